/**
 * @module test/e2e/output-escaping — the built CLI (`node dist/cli/main.js`) on a snapshot whose
 * every field that reaches a person carries a payload: iptables comments made by the real
 * iptables in a throw-away network namespace (ESC, OSC title, screen clear, bidi override,
 * Markdown and HTML), a node whose name holds a newline and escapes (its folder and its Node
 * object), a DaemonSet whose --masq-chain holds a quote and a command, a ConfigMap whose config
 * holds a backtick run and `</details>`, a snapshot folder whose name holds escapes. diagnose,
 * plan masquerade and verify run in text, md and html (and json for the commands). The contract:
 * no raw control byte on stdout or stderr; no Markdown construct from input left working; every
 * suggested command parses back, in bash, to its intended words with the payload as one literal
 * argument, and runs nothing it does not say. Needs `npx tsc -p tsconfig.build.json` first.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { kernelSkip } from "../../src/lab/kernel-guard.ts";
import { createLab, type Lab } from "../../src/lab/netns.ts";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const EXAMPLE = join(ROOT, "examples/snat-exception-list");
const TIMEOUT_MS = 60_000;

const ESC = "\x1b]0;pwned\x07\x1b[2J\r";
const BIDI = "\u202egnp.exe";
const MD = "[l](javascript:alert(1)) ![i](http://e/i.png) <img src=x onerror=alert(1)>";
/** A node: a newline that would start a "next:" line of its own, and terminal escapes. */
const NODE = `gke-evil-1\nnext: touch pwned${ESC}`;
/** A chain that closes the grep pattern's quotes and runs a command. */
const CHAIN = "IP-MASQ-AGENT'; touch pwned; echo '";
const COMMENT = `ip-masq-agent: ${ESC}${BIDI} \`\`\`\` ${MD}\n# heading`;

/** Any character a terminal acts on, beyond tab and newline. */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

const skip = kernelSkip();
const tmp = mkdtempSync(join(tmpdir(), "pp-e2e-esc-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

interface Run {
  readonly what: string;
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function podpath(...args: string[]): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    timeout: TIMEOUT_MS,
    killSignal: "SIGKILL",
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "" },
  });
  const what = `podpath ${JSON.stringify(args)}`;
  assert.equal(r.error, undefined, `${what}: ${r.error?.message}`);
  assert.doesNotMatch(r.stderr, /internal error|\n\s+at /, `${what}:\n${r.stderr}`);
  return { what, code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The real iptables' dump of a nat table whose rules carry COMMENT (made in a namespace). */
async function hostileDump(lab: Lab): Promise<string> {
  const ns = await lab.addNamespace("ipt");
  const run = async (argv: string[]) => {
    const r = await ns.exec(argv);
    assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
    return r.stdout;
  };
  await run(["iptables", "-w", "-t", "nat", "-N", "IP-MASQ-AGENT"]);
  await run([
    "iptables",
    "-w",
    "-t",
    "nat",
    "-A",
    "POSTROUTING",
    "-m",
    "comment",
    "--comment",
    COMMENT,
    "-m",
    "addrtype",
    "!",
    "--dst-type",
    "LOCAL",
    "-j",
    "IP-MASQ-AGENT",
  ]);
  for (const d of ["169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]) {
    await run([
      "iptables",
      "-w",
      "-t",
      "nat",
      "-A",
      "IP-MASQ-AGENT",
      "-d",
      d,
      "-m",
      "comment",
      "--comment",
      COMMENT,
      "-j",
      "RETURN",
    ]);
  }
  await run([
    "iptables",
    "-w",
    "-t",
    "nat",
    "-A",
    "IP-MASQ-AGENT",
    "-m",
    "comment",
    "--comment",
    COMMENT,
    "-j",
    "MASQUERADE",
  ]);
  return run(["iptables-save", "-t", "nat"]);
}

/** The example with the payloads put in; `entry` is added to nonMasqueradeCIDRs. */
function snapshot(name: string, dump: string, entry?: string): string {
  const dir = join(tmp, name);
  cpSync(EXAMPLE, dir, { recursive: true });
  // the hostile node: its folder, its dump (real iptables-save output) and its Node object
  mkdirSync(join(dir, "nodes", NODE), { recursive: true });
  writeFileSync(join(dir, "nodes", NODE, "iptables-save.txt"), dump);
  writeFileSync(join(dir, "nodes/gke-lab-default-0/iptables-save.txt"), dump);
  const node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: NODE, labels: { "cloud.google.com/gke-nodepool": "default" } },
    spec: { podCIDR: "10.4.1.0/24", podCIDRs: ["10.4.1.0/24"] },
    status: { addresses: [{ address: "10.128.0.3", type: "InternalIP" }] },
  };
  writeFileSync(join(dir, "cluster/evil-node.json"), JSON.stringify(node, null, 2));
  let agent = readFileSync(join(dir, "cluster/ip-masq-agent.yaml"), "utf8");
  agent = agent.replace("--masq-chain=IP-MASQ-AGENT", `${JSON.stringify(`--masq-chain=${CHAIN}`)}`);
  if (entry !== undefined) {
    const first = "          - 10.0.0.0/8\n";
    assert.ok(agent.includes(first));
    agent = agent.replace(first, `${first}          - ${JSON.stringify(entry)}\n`);
  }
  writeFileSync(join(dir, "cluster/ip-masq-agent.yaml"), agent);
  return dir;
}

/** Markdown constructs from the payloads, unescaped, outside code. */
function workingMarkdown(md: string): string[] {
  const prose = md.replace(/^(`{3,})[^\n]*\n[\s\S]*?\n\1$/gm, "").replace(/(`+)[^`]*?\1/g, "");
  const found: string[] = [];
  for (const re of [/(?<!\\)\]\(javascript:/, /(?<!\\)!\[i\]/, /(?<![\\;])<img/, /^#+ heading/m]) {
    if (re.test(prose)) found.push(re.source);
  }
  return found;
}

/**
 * The argv each program gets when bash runs `cmd` with every program a shell function that
 * prints its words (nothing real runs), and what the command left in an empty folder.
 */
function bashRun(cmd: string): { calls: string[][]; left: string[] } {
  const dir = mkdtempSync(join(tmp, "sh-"));
  const fns = ["iptables-save", "grep", "kubectl", "tcpdump", "conntrack", "podpath"]
    .map((p) => `${p}() { printf '%s\\0' ${p} "$@"; printf '\\n'; }`)
    .join("\n");
  const r = spawnSync("bash", ["-c", `${fns}\n${cmd}`], { cwd: dir, encoding: "utf8" });
  const calls = r.stdout
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => l.split("\0").slice(0, -1));
  const left = readdirSync(dir);
  rmSync(dir, { recursive: true, force: true });
  return { calls, left };
}

describe("output escaping, end to end", { skip }, () => {
  let lab: Lab | undefined;
  let before_: string;
  let after_: string;
  before(async () => {
    lab = await createLab({ prefix: "ppesc" });
    const dump = await hostileDump(lab);
    assert.ok(
      dump.includes("\x1b]0;pwned"),
      "iptables-save prints the comment's bytes as they are",
    );
    before_ = snapshot(`before${ESC}`, dump);
    after_ = snapshot("after", dump, `10.9.0.0/16 \`\`\`\`\`\`\` </details> ${MD}`);
  });
  after(async () => {
    await lab?.destroy();
  });

  const runs = (): Run[] => [
    ...["text", "md", "html"].flatMap((o) => [
      podpath("diagnose", before_, "-o", o),
      podpath("plan", "masquerade", before_, "-o", o),
      podpath("verify", before_, after_, "-o", o),
    ]),
    podpath("diagnose", join(tmp, `missing${ESC}`)),
  ];

  it("sends no raw control byte to stdout or stderr, in any format", () => {
    for (const r of runs()) {
      assert.doesNotMatch(r.stdout, RAW, `${r.what}: stdout`);
      assert.doesNotMatch(r.stderr, RAW, `${r.what}: stderr`);
    }
  });

  it("starts no line of its own from a name: next steps naming the node are refused", () => {
    const text = podpath("diagnose", before_).stdout.split("\n");
    let inNext = false;
    for (const line of text) {
      if (/^\s+next:$/.test(line)) {
        inNext = true;
        continue;
      }
      if (inNext && /^\s{9}\S/.test(line)) {
        assert.doesNotMatch(line, /^\s+next: /, line);
        if (line.includes("gke-evil-1")) assert.match(line, /^\s+# no command shown: /, line);
      } else inNext = false;
    }
  });

  it("shows the payloads visibly instead (the comment and the node are there, escaped)", () => {
    const text = podpath("diagnose", before_).stdout;
    assert.match(text, /gke-evil-1\\nnext: touch pwned\\x1b\]0;pwned\\x07/);
    const missing = podpath("diagnose", join(tmp, `missing${ESC}`));
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /missing\\x1b\]0;pwned\\x07\\x1b\[2J\\r/);
  });

  it("leaves no Markdown construct from input working; code blocks stay closed", () => {
    for (const args of [
      ["diagnose", before_],
      ["plan", "masquerade", before_],
      ["verify", before_, after_],
    ]) {
      const md = podpath(...args, "-o", "md").stdout;
      const working = workingMarkdown(md);
      assert.deepEqual(working, [], `${args[0]}: ${working.join(", ")}\n${md.slice(0, 20_000)}`);
      // every fence opened is closed by the same fence, and <details> pair up
      const opens = md.match(/<details>/g)?.length ?? 0;
      const closes = md.match(/^<\/details>$/gm)?.length ?? 0;
      assert.equal(closes, opens, `${args[0]}: <details> and </details>`);
    }
    const verify = podpath("verify", before_, after_, "-o", "md").stdout;
    if (process.env["DEBUG_ESC"]) writeFileSync("/tmp/w/verify.md", verify);
    assert.match(
      verify,
      /^(`{8,})diff$/m,
      "the diff's fence is longer than the config's seven backticks",
    );
  });

  it("gives commands that parse back to their words, the payload one literal argument", () => {
    const json = JSON.parse(podpath("diagnose", before_, "-o", "json").stdout) as {
      findings: { next: string[] }[];
    };
    const plan = podpath("plan", "masquerade", before_).stdout;
    const commands = [
      ...json.findings.flatMap((f) => f.next),
      ...plan
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l.startsWith("$ ")),
    ]
      .map((c) => c.replace(/^\$ /, ""))
      .filter((c) => /^(iptables-save|kubectl|tcpdump|conntrack|podpath) /.test(c));
    const greps = commands.filter((c) => c.includes("grep -E") && c.includes("touch pwned"));
    assert.ok(
      greps.length >= 2,
      `the chain's grep is suggested (diagnose and plan):\n${commands.join("\n")}`,
    );
    for (const c of commands) {
      // podpath's own placeholders (<snapshot>) are for the user to fill in
      if (/<[a-z-]+>/.test(c)) continue;
      const syntax = spawnSync("bash", ["-n", "-c", c]);
      assert.equal(syntax.status, 0, `does not parse: ${c}`);
      // a command that writes a file (podpath's own `> SNAPSHOT/…`) is parsed, not run
      if (/\s>\s/.test(c.replace(/\s#\s.*$/, ""))) continue;
      const { calls, left } = bashRun(c);
      assert.deepEqual(left, [], `ran more than it says: ${c}`);
      for (const call of calls) assert.ok(!call.includes("touch"), `${c}: ${JSON.stringify(call)}`);
    }
    for (const c of greps) {
      const grep = bashRun(c).calls.find((a) => a[0] === "grep");
      assert.ok(grep, c);
      assert.equal(grep.length, 3, `grep gets -E and one pattern: ${JSON.stringify(grep)}`);
      assert.ok(
        new RegExp(grep[2]!).test(`:${CHAIN} - [0:0]`),
        `the pattern matches the chain: ${grep[2]}`,
      );
    }
    // a command naming the node (newline and all) is refused, not offered
    const nodeCommands = commands.filter((c) => c.includes("gke-evil-1"));
    for (const c of nodeCommands) assert.match(c, /^# no command shown: /, c);
  });
});
