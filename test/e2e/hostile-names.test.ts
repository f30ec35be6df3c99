/**
 * @module test/e2e/hostile-names — the built CLI (`node dist/cli/main.js`) on examples whose
 * objects are renamed with shell payloads (a quote, `$(…)`, backticks, `;`) and one node named
 * with a newline: every command podpath suggests (diagnose's next steps and missing files, the
 * plans' steps, in JSON and text) parses in bash and, run with every program a stub, runs nothing
 * it does not say (no `touch` runs); the text output starts no line from a name, and JSON keeps
 * the exact name. Needs `npx tsc -p tsconfig.build.json` first.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const tmp = mkdtempSync(join(tmpdir(), "pp-e2e-names-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A name that runs `touch pwned` three ways when a shell reads it unquoted. */
const EVIL = "x'$(touch pwned)`touch pwned`;touch pwned";
/** A node name whose newline would start a fake `next:` line. */
const NL_NODE = "gke-a\nnext: touch pwned";

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function podpath(...args: string[]): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    timeout: 60_000,
    killSignal: "SIGKILL",
    env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "" },
  });
  assert.equal(r.error, undefined, String(r.error));
  assert.doesNotMatch(r.stderr, /internal error|\n\s+at /, r.stderr);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Every file under `dir` (relative paths). */
function filesUnder(dir: string): string[] {
  return (readdirSync(dir, { recursive: true, encoding: "utf8" }) as string[]).filter((f) =>
    statSync(join(dir, f)).isFile(),
  );
}

/**
 * A copy of `examples/<example>` with every whole YAML value `from` (`key: from`, `- from`,
 * `node/from`) written as `to` (a JSON string, which YAML reads), and folders named `from` renamed.
 */
function renamed(example: string, renames: readonly (readonly [string, string])[]): string {
  const from = example.includes("/") ? join(ROOT, example) : join(ROOT, "examples", example);
  const dir = mkdtempSync(join(tmp, "snap-"));
  cpSync(from, dir, { recursive: true });
  for (const f of filesUnder(dir).filter((x) => /\.(ya?ml|json)$/.test(x))) {
    let text = readFileSync(join(dir, f), "utf8");
    for (const [from, to] of renames) {
      const esc = from.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      text = text
        .replace(new RegExp(`(:\\s+|-\\s+)${esc}\\s*$`, "gm"), (_, pre) => pre + JSON.stringify(to))
        .replace(
          new RegExp(`(:\\s+)node/${esc}\\s*$`, "gm"),
          (_, pre) => pre + JSON.stringify(`node/${to}`),
        );
    }
    writeFileSync(join(dir, f), text);
  }
  const pods = existsSync(join(dir, "pods")) ? readdirSync(join(dir, "pods")) : [];
  for (const [from, to] of renames) {
    for (const parent of ["nodes", "pods", ...pods.map((p) => `pods/${p}`)]) {
      if (existsSync(join(dir, parent, from)))
        renameSync(join(dir, parent, from), join(dir, parent, to));
    }
  }
  return dir;
}

/** The keys under which podpath's answers and plans carry suggested commands. */
const COMMAND_KEYS = new Set([
  "next",
  "command",
  "commands",
  "apply",
  "checks",
  "verify",
  "rollback",
]);

/** Every string in `v` that reads as a command podpath suggests (under a command key). */
function commandsIn(v: unknown, out: string[] = [], isCommand = false): string[] {
  if (typeof v === "string") {
    const c = v.replace(/^\$ /, "");
    const program = /^(kubectl|iptables|iptables-save|ip|ipset|helm|tcpdump|conntrack|podpath) /;
    if ((isCommand || v.startsWith("$ ")) && program.test(c)) out.push(c);
  } else if (Array.isArray(v)) for (const x of v) commandsIn(x, out, isCommand);
  else if (v !== null && typeof v === "object")
    for (const [k, x] of Object.entries(v)) commandsIn(x, out, COMMAND_KEYS.has(k));
  return out;
}

/** What bash does with `cmd` when every program is a stub: whether `touch` ran (a pwned file). */
function ranTouch(cmd: string): boolean {
  const dir = mkdtempSync(join(tmp, "sh-"));
  const stubs = ["kubectl", "iptables", "iptables-save", "ip", "ipset", "helm", "tcpdump"]
    .concat(["conntrack", "podpath", "calicoctl", "grep", "sysctl"])
    .map((p) => `${p}() { :; }`)
    .join("\n");
  spawnSync("bash", ["-c", `${stubs}\n${cmd}`], { cwd: dir, encoding: "utf8" });
  const pwned = existsSync(join(dir, "pwned"));
  rmSync(dir, { recursive: true, force: true });
  return pwned;
}

function assertSafe(commands: readonly string[], what: string): void {
  assert.ok(commands.length > 0, `${what}: commands found`);
  for (const c of commands) {
    // podpath's own placeholders (<snapshot>, IP[:PORT]) are for the user to fill in
    if (/<[a-z-]+>|\[:PORT\]/.test(c)) continue;
    const syntax = spawnSync("bash", ["-n", "-c", c], { encoding: "utf8" });
    assert.equal(syntax.status, 0, `${what}: does not parse: ${c}\n${syntax.stderr}`);
    assert.equal(ranTouch(c), false, `${what}: runs touch: ${c}`);
  }
}

describe("hostile names in suggested commands, end to end", () => {
  it("VPN: a pod and a Deployment named with quotes, $( ), backticks and ;", () => {
    const snap = renamed("vpn-forwarding-off", [
      ["vpn-openvpn-6d9c7b5f4-x2x7k", `${EVIL}-pod`],
      ["vpn-openvpn", `${EVIL}-deploy`],
    ]);
    const diag = podpath("diagnose", snap, "-o", "json");
    const answer = JSON.parse(diag.stdout) as unknown;
    // the pod is found without --pod (a name like this one is refused as a --pod value)
    const plan = podpath("plan", "vpn", snap, "-o", "json");
    const planText = podpath("plan", "vpn", snap).stdout;
    const commands = [
      ...commandsIn(answer),
      ...commandsIn(JSON.parse(plan.stdout) as unknown),
      ...commandsIn(
        planText.split("\n").map((l) => l.trim()),
        [],
        false,
      ),
    ];
    assert.ok(
      commands.some((c) => c.includes("touch pwned")),
      `the names reach the commands:\n${commands.join("\n")}`,
    );
    assertSafe(commands, "vpn");
  });

  it("masquerade: a node and an agent pod named with quotes, $( ), backticks and ;", () => {
    const snap = renamed("snat-exception-list", [["gke-lab-default-0", `${EVIL}-node`]]);
    const answer = JSON.parse(podpath("diagnose", snap, "-o", "json").stdout) as unknown;
    const plan = podpath("plan", "masquerade", snap, "-o", "json");
    const planText = podpath("plan", "masquerade", snap).stdout;
    const commands = [
      ...commandsIn(answer),
      ...commandsIn(JSON.parse(plan.stdout) as unknown),
      ...commandsIn(
        planText.split("\n").map((l) => l.trim()),
        [],
        false,
      ),
    ];
    assertSafe(commands, "masquerade");
  });

  // each owner's fixture: its node, its pod and (Flannel, Calico) its DaemonSet renamed
  const FIXTURES = "src/cases/masquerade/fixtures";
  const owners: readonly (readonly [string, readonly string[]])[] = [
    ["flannel/before", ["flannel-worker-1", "billing-5d8f9c7b6-h2xkq", "kube-flannel-ds"]],
    ["calico/before", ["worker-1", "billing-6c9f7d8b5-q8zkt", "calico-node"]],
    ["cilium/iptables-native-routing/before", ["worker-1", "billing-5f7c9d8b6-q2w4e"]],
    ["kubenet/before", ["kubenet-pool-1-node-0", "billing-6f9c7d5b8-q4m2x"]],
    ["bridge-cni/before", ["bridge-node-0", "billing-5c8d7f9b4-h7r2t"]],
  ];
  for (const [fixture, names] of owners) {
    it(`owner fixture ${fixture}: node, pod and agent renamed`, () => {
      const snap = renamed(
        `${FIXTURES}/${fixture}`,
        names.map((n) => [n, `${EVIL}-${n}`] as const),
      );
      const commands = [
        ...commandsIn(JSON.parse(podpath("diagnose", snap, "-o", "json").stdout) as unknown),
        ...commandsIn(
          JSON.parse(podpath("plan", "masquerade", snap, "-o", "json").stdout) as unknown,
        ),
        ...commandsIn(
          podpath("plan", "masquerade", snap)
            .stdout.split("\n")
            .map((l) => l.trim()),
        ),
      ];
      assert.ok(
        commands.some((c) => c.includes("touch pwned")),
        `the names reach the commands:\n${commands.join("\n")}`,
      );
      assertSafe(commands, fixture);
    });
  }

  it("a node named with a newline starts no line of its own in text; JSON keeps the name", () => {
    const snap = renamed("snat-exception-list", [["gke-lab-default-0", NL_NODE]]);
    for (const o of ["text", "md"]) {
      const out = podpath("diagnose", snap, "-o", o).stdout;
      assert.doesNotMatch(out, /^\W*next: touch/m, out);
      assert.match(out, /gke-a\\+nnext: touch pwned/);
    }
    const json = podpath("diagnose", snap, "-o", "json").stdout;
    assert.ok(json.includes(JSON.stringify(`node/${NL_NODE}`)), "the exact node name in JSON");
  });
});
