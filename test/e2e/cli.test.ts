/**
 * @module test/e2e/cli — the CLI's plumbing, through the built CLI (`node dist/cli/main.js`):
 * usage errors (unknown pods and nodes with the closest names, flags that would do nothing,
 * hostnames where an address belongs) exit 2 with nothing on stdout; kubectl's `pod/NAME -n NS`;
 * global flags before and after the subcommand; `-v`; a reader that closes the pipe early; the
 * help (every option described, an example per command, the README's command list); shell
 * completion; what the package ships. Needs `npm run build` first (npm test does it).
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const EXAMPLE = join(ROOT, "examples/snat-exception-list");
const PCAP = join(EXAMPLE, "captures/node-gke-lab-default-0.pcap");

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

const colorless: NodeJS.ProcessEnv = { ...process.env };
delete colorless["NO_COLOR"];
delete colorless["FORCE_COLOR"];

function podpath(args: readonly string[], env: Record<string, string> = {}): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    timeout: 60_000,
    killSignal: "SIGKILL",
    maxBuffer: 64 * 1024 * 1024,
    env: { ...colorless, ...env },
  });
  assert.equal(r.error, undefined, `podpath ${args.join(" ")}: ${r.error?.message}`);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function assertUsage(r: Run, pattern: RegExp): void {
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stdout, "", "no partial answer on stdout");
  assert.match(r.stderr, pattern);
  assert.doesNotMatch(r.stderr, /\n\s+at |internal error/, "no stack trace");
}

describe("usage errors are usage errors", () => {
  it("an unknown pod exits 2 naming the closest pod, on stderr only", () => {
    const r = podpath(["diagnose", EXAMPLE, "--from", "pod/default/billing"]);
    assertUsage(
      r,
      /no such pod in namespace default; did you mean pod\/default\/billing-default\?/,
    );
  });
  it("an unknown namespace and an unknown node, with the closest names", () => {
    assertUsage(
      podpath(["diagnose", EXAMPLE, "--from", "pod/prod/billing-default"]),
      /no namespace prod .*did you mean pod\/default\/billing-default/,
    );
    assertUsage(
      podpath(["diagnose", EXAMPLE, "--from", "node/gke-lab-defualt-0"]),
      /no such node .*did you mean node\/gke-lab-default-0/,
    );
  });
  it("kubectl's pod/NAME -n NS names the same pod as pod/NS/NAME", () => {
    const a = podpath(["diagnose", EXAMPLE, "--from", "pod/billing-default", "-n", "default"]);
    const b = podpath(["diagnose", EXAMPLE, "--from", "pod/default/billing-default"]);
    assert.equal(a.code, b.code, a.stderr);
    assert.ok(a.code === 0 || a.code === 1, a.stderr);
    assert.ok(a.stdout.length > 0);
    assert.equal(a.stdout, b.stdout);
    assertUsage(
      podpath(["diagnose", EXAMPLE, "--from", "pod/default/billing-default", "-n", "prod"]),
      /-n says "prod"/,
    );
  });
  it("refuses flags that do nothing for a snapshot, even when they equal their default", () => {
    for (const flags of [
      ["--keep", "x"],
      ["--context", "prod"],
      ["--kubeconfig", "k"],
      ["--node-state"],
      ["--nodes", "a"],
      ["--pod", "a/b"],
      ["--capture", "10.0.0.1"],
      ["--seconds", "10"],
      ["--concurrency", "10"],
      ["-n", "default"],
    ]) {
      assertUsage(
        podpath(["diagnose", EXAMPLE, ...flags]),
        new RegExp(`${flags[0]!.replace(/^-n$/, "-n/--namespace")} does nothing here`),
      );
    }
    assertUsage(podpath(["capture", "flows", PCAP, "--talkers"]), /--talkers does nothing/);
    assertUsage(podpath(["ipmasq", "config", "--family", "4"]), /--family does nothing/);
  });
  it("a hostname in --dest is refused with the commands that resolve it", () => {
    assertUsage(
      podpath(["diagnose", EXAMPLE, "--dest", "db.example.com:5432"]),
      /getent hosts db\.example\.com.*dig \+short db\.example\.com.*--dest ADDRESS:5432/,
    );
  });
});

describe("global flags and -v", () => {
  const colored = (s: string) => /\x1b\[/.test(s);
  it("--no-color works before and after the subcommand", () => {
    const plain = ["diagnose", EXAMPLE];
    assert.ok(colored(podpath(plain, { FORCE_COLOR: "1" }).stdout), "FORCE_COLOR colours");
    assert.ok(!colored(podpath(["--no-color", ...plain], { FORCE_COLOR: "1" }).stdout));
    assert.ok(!colored(podpath([...plain, "--no-color"], { FORCE_COLOR: "1" }).stdout));
  });
  it("-v says on stderr what was read and how long each step took; stdout is unchanged", () => {
    const quiet = podpath(["diagnose", EXAMPLE]);
    for (const args of [
      ["-v", "diagnose", EXAMPLE],
      ["diagnose", EXAMPLE, "--verbose"],
    ]) {
      const v = podpath(args);
      assert.equal(v.stdout, quiet.stdout);
      assert.match(v.stderr, /podpath: read .*snat-exception-list: 5 objects, 1 node .*\(\d+ ms\)/);
      assert.match(v.stderr, /asked every question: \d+ findings.*\(\d+ ms\)/);
    }
    assert.doesNotMatch(quiet.stderr, /\(\d+ ms\)/);
  });
});

describe("a reader that stops early", () => {
  const tmp = mkdtempSync(join(tmpdir(), "podpath-cli-"));
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it("capture read | head -1 ends with exit 0 and no stack trace", async () => {
    // a real capture's packets repeated until the text is far larger than a pipe's buffer
    const pcap = readFileSync(PCAP);
    const header = pcap.subarray(0, 24);
    const records = pcap.subarray(24);
    const big = join(tmp, "big.pcap");
    writeFileSync(big, Buffer.concat([header, ...Array.from({ length: 3000 }, () => records)]));
    const child = spawn(process.execPath, [CLI, "capture", "read", big], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const firstLine = await new Promise<string>((resolve) => {
      let text = "";
      child.stdout.on("data", (d: Buffer) => {
        text += d.toString();
        if (text.includes("\n")) {
          child.stdout.destroy(); // what head does after its line
          resolve(text.split("\n")[0]!);
        }
      });
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    assert.match(firstLine, /^ +1 /);
    assert.equal(code, 0, stderr);
    assert.equal(stderr, "");
  });
});

/** The help of `podpath ...path`, and the subcommands it lists (`help` left out). */
function help(path: readonly string[]): { text: string; subcommands: string[] } {
  const r = podpath([...path, "--help"]);
  assert.equal(r.code, 0, r.stderr);
  const section = (r.stdout.split(/\nCommands:\n/)[1] ?? "").split("\n\n")[0]!;
  const subcommands = section
    .split("\n")
    .map((l) => /^ {2}([a-z][a-z-]*)/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined && n !== "help");
  return { text: r.stdout, subcommands };
}

function leafCommands(path: readonly string[] = []): string[][] {
  const h = help(path);
  if (h.subcommands.length === 0) return [[...path]];
  return h.subcommands.flatMap((s) => leafCommands([...path, s]));
}

describe("help", () => {
  const leaves = leafCommands();

  it("lists the commands a user can run", () => {
    const names = leaves.map((l) => l.join(" "));
    for (const n of ["diagnose", "plan masquerade", "lab replay", "completion"]) {
      assert.ok(names.includes(n), n);
    }
  });

  it("every command describes every option and gives at least one example", () => {
    for (const leaf of leaves) {
      const { text } = help(leaf);
      assert.match(text, /\nExamples?:\n {2}\S/, `podpath ${leaf.join(" ")}: an example`);
      const options = (text.split(/\nOptions:\n/)[1] ?? "").split(/\n\n/)[0]!.split("\n");
      for (const line of options.filter((l) => /^ {2}-/.test(l))) {
        assert.match(line, /^ {2}-\S.*? {2,}\S/, `podpath ${leaf.join(" ")}: ${line.trim()}`);
      }
    }
  });

  it("the README's command list names exactly the commands the help lists", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const table = readme.split(/\n## Commands\n/)[1]!.split(/\n## /)[0]!;
    const groups = new Set(leaves.filter((l) => l.length > 1).map((l) => l[0]!));
    const named = new Set<string>();
    for (const row of table.split("\n").filter((l) => l.startsWith("| `podpath "))) {
      const firstCell = row.split(/(?<!\\)\|/)[1]!;
      for (const m of firstCell.matchAll(/`podpath ([a-z-]+)(?: ([a-z-]+(?:\\\|[a-z-]+)*))?/g)) {
        const [, first, second] = m as unknown as [string, string, string | undefined];
        if (!groups.has(first)) named.add(first);
        else for (const sub of (second ?? "").split("\\|")) named.add(`${first} ${sub}`);
      }
    }
    const listed = new Set(leaves.map((l) => l.join(" ")));
    assert.deepEqual([...named].sort(), [...listed].sort());
  });
});

describe("podpath completion", () => {
  it("bash: registers podpath and completes commands, options and their values", () => {
    const script = `
      source <("${process.execPath}" "${CLI}" completion bash) || exit 9
      complete -p podpath
      t() { COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _podpath; echo "\${COMPREPLY[*]}"; }
      t podpath dia
      t podpath plan ""
      t podpath diagnose snap -o ""
      t podpath --no-color diagnose --fr
      t podpath lab replay --fl
    `;
    const r = spawnSync("bash", ["-c", script], { encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split("\n"), [
      "complete -o default -F _podpath podpath",
      "diagnose",
      "masquerade vpn",
      "text json md html",
      "--from",
      "--flow",
    ]);
  });
  it("zsh and fish scripts are generated; an unknown shell is a usage error", () => {
    assert.match(podpath(["completion", "zsh"]).stdout, /bashcompinit[\s\S]*complete -o default/);
    const fish = podpath(["completion", "fish"]).stdout;
    assert.match(fish, /complete -c podpath -f -n '__fish_use_subcommand' -a diagnose -d /);
    assert.match(fish, /-l output -x -a 'text json md html'/);
    assertUsage(podpath(["completion", "tcsh"]), /name a shell: bash, zsh, fish/);
  });
});

describe("the package", () => {
  it("ships the LICENSE and no source map", () => {
    const r = spawnSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const files = (JSON.parse(r.stdout) as [{ files: { path: string }[] }])[0].files.map(
      (f) => f.path,
    );
    assert.ok(files.includes("LICENSE"));
    assert.match(readFileSync(join(ROOT, "LICENSE"), "utf8"), /Apache License\s+Version 2\.0/);
    assert.ok(files.includes("dist/cli/main.js"));
    assert.deepEqual(
      files.filter((f) => f.endsWith(".map")),
      [],
    );
  });
});
