import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { describe, it } from "node:test";
import { Command } from "commander";
import { endQuietlyWhenStdoutCloses, memoryIo, stepClock, UsageError } from "./io.ts";
import {
  commandPath,
  flagName,
  fromWithNamespace,
  givenByUser,
  mergedOptions,
  podWithNamespace,
  refuseHostname,
  refuseUnless,
} from "./options.ts";

/** A two-level CLI like podpath's: a global --no-color on both levels, a sub with defaults. */
function parse(argv: string[]): Command {
  let seen: Command | undefined;
  const root = new Command("podpath").enablePositionalOptions().exitOverride();
  root.option("--no-color", "never colour").option("-v, --verbose", "more");
  const sub = root
    .command("diagnose")
    .argument("[snapshot]")
    .option("--no-color", "never colour")
    .option("-v, --verbose", "more")
    .option("--live", "collect first")
    .option("--seconds <n>", "capture length", "10")
    .option("-n, --namespace <ns>", "namespace")
    .exitOverride()
    .action((_s, _o, cmd: Command) => {
      seen = cmd;
    });
  root.parse(["node", "podpath", ...argv]);
  assert.ok(seen === sub);
  return sub;
}

describe("mergedOptions", () => {
  it("a flag typed before or after the subcommand wins over the other level's default", () => {
    assert.equal(mergedOptions(parse(["diagnose", "x"]))["color"], true);
    assert.equal(mergedOptions(parse(["--no-color", "diagnose", "x"]))["color"], false);
    assert.equal(mergedOptions(parse(["diagnose", "x", "--no-color"]))["color"], false);
    assert.equal(mergedOptions(parse(["-v", "diagnose", "x"]))["verbose"], true);
    assert.equal(mergedOptions(parse(["diagnose", "x", "-v"]))["verbose"], true);
    assert.equal(mergedOptions(parse(["diagnose", "x"]))["seconds"], "10");
  });
});

describe("refuseUnless", () => {
  it("refuses what the user typed, even when it equals the default, and not the defaults", () => {
    const typed = parse(["diagnose", "x", "--seconds", "10", "-n", "a"]);
    assert.ok(givenByUser(typed, "seconds"));
    assert.throws(
      () => refuseUnless(typed, ["seconds", "namespace", "live"], false, "with --live"),
      (e: unknown) =>
        e instanceof UsageError &&
        e.message ===
          "diagnose: --seconds, -n/--namespace do nothing here: they work only with --live",
    );
    refuseUnless(typed, ["seconds"], true, "with --live");
    const untouched = parse(["diagnose", "x"]);
    assert.equal(givenByUser(untouched, "seconds"), false);
    refuseUnless(untouched, ["seconds", "namespace"], false, "with --live");
    assert.equal(flagName(untouched, "live"), "--live");
    assert.equal(commandPath(untouched), "diagnose");
  });
});

describe("kubectl's pod forms", () => {
  it("--from pod/NAME takes -n; two namespaces are refused", () => {
    assert.equal(fromWithNamespace("pod/web", "shop"), "pod/shop/web");
    assert.equal(fromWithNamespace("pod/web", undefined), "pod/default/web");
    assert.equal(fromWithNamespace("node/n1", undefined), "node/n1");
    assert.equal(fromWithNamespace("10.4.0.5", undefined), "10.4.0.5");
    assert.throws(() => fromWithNamespace("pod/a/web", "b"), UsageError);
    assert.throws(() => fromWithNamespace("pods/web", undefined), UsageError);
  });
  it("--pod reads NS/NAME, pod/NS/NAME, pod/NAME and NAME with -n", () => {
    assert.equal(podWithNamespace("vpn/ovpn", undefined, "--pod"), "vpn/ovpn");
    assert.equal(podWithNamespace("pod/vpn/ovpn", "vpn", "--pod"), "vpn/ovpn");
    assert.equal(podWithNamespace("pod/ovpn", "vpn", "--pod"), "vpn/ovpn");
    assert.equal(podWithNamespace("ovpn", undefined, "--pod"), "ovpn");
    assert.equal(podWithNamespace("ovpn", undefined, "--pod", "default"), "default/ovpn");
    assert.throws(() => podWithNamespace("vpn/ovpn", "other", "--pod"), /-n says "other"/);
    assert.throws(() => podWithNamespace("a/b/c", undefined, "--pod"), /expected NAMESPACE\/NAME/);
  });
});

describe("refuseHostname", () => {
  it("refuses names with the commands that resolve them, and leaves addresses alone", () => {
    assert.throws(
      () => refuseHostname("--dest", "db.corp.example:5432"),
      /getent hosts db\.corp\.example.*dig \+short db\.corp\.example.*--dest ADDRESS:5432/,
    );
    for (const ok of ["10.20.30.40", "10.20.30.40:5432", "[fd00::1]:443", "fd00::1", "1.2.3"]) {
      refuseHostname("--dest", ok);
    }
  });
});

describe("Io plumbing", () => {
  it("verbose steps print with their time only when asked", () => {
    let t = 0;
    const lines: string[] = [];
    const step = stepClock(
      (s) => lines.push(s),
      true,
      () => t,
    );
    t = 12;
    step("read x");
    t = 40;
    step("asked");
    assert.deepEqual(lines, ["podpath: read x (12 ms)\n", "podpath: asked (28 ms)\n"]);
    const quiet = memoryIo();
    quiet.verbose("nothing");
    assert.equal(quiet.stderr(), "");
    const loud = memoryIo({}, { verbose: true });
    loud.verbose("read x");
    assert.match(loud.stderr(), /^podpath: read x \(\d+ ms\)\n$/);
    assert.equal(loud.stdout(), "");
  });
  it("a closed stdout (EPIPE) ends with exit 0; other errors still surface", () => {
    const stdout = new EventEmitter() as unknown as NodeJS.WriteStream;
    const exits: number[] = [];
    endQuietlyWhenStdoutCloses(stdout, (c) => exits.push(c));
    stdout.emit("error", Object.assign(new Error("write EPIPE"), { code: "EPIPE" }));
    assert.deepEqual(exits, [0]);
    assert.throws(
      () => stdout.emit("error", Object.assign(new Error("disk"), { code: "ENOSPC" })),
      /disk/,
    );
  });
});
