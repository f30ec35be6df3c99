/**
 * Component test: the real ip-masq-agent (built by scripts/build-components.sh) runs in a lab
 * network namespace, its config file mounted at /etc/config/ip-masq-agent (an overlay on /etc
 * in a mount namespace of its own), once for every vector of the shared reference and for seeded
 * random configs and flags, on the nf_tables and legacy iptables. For each run, what podpath
 * says (`ipmasq config` and `ipmasq rules`, with the same file and flags) must equal what the
 * agent did: its exit message for a bad flag, its "Error syncing configuration" text for a
 * rejected config, the config it logs, the iptables-restore input it logs, and the lines the
 * real iptables-save shows afterwards. Each run waits for the agent's own log lines and for the
 * rules to appear, never for a fixed time.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as configCommand from "../../src/cli/commands/ipmasq-config.ts";
import * as rulesCommand from "../../src/cli/commands/ipmasq-rules.ts";
import { memoryIo, UsageError } from "../../src/cli/io.ts";
import { createLab, type Lab, type Namespace } from "../../src/lab/netns.ts";
import { componentPath, componentSkip } from "./component-guard.ts";
import { type AgentCase, edgeCases, randomCases, vectorCases } from "./ip-masq-agent-cases.ts";

const AGENT = componentPath("ip-masq-agent");
const skip = componentSkip("ip-masq-agent");
/** PODPATH_COMPONENT_SEED=N runs other random configs; the default keeps CI repeatable. */
const SEED = Number(process.env["PODPATH_COMPONENT_SEED"] ?? 16);
/** PODPATH_COMPONENT_RANDOM=N runs N random configs instead of 24. */
const RANDOM_COUNT = Number(process.env["PODPATH_COMPONENT_RANDOM"] ?? 24);
const WAIT_MS = 30_000;

// ---------------------------------------------------------------- podpath's side

const OPTION_KEYS: Readonly<Record<string, string>> = {
  "masq-chain": "masqChain",
  "nomasq-all-reserved-ranges": "nomasqAllReservedRanges",
  "enable-ipv6": "enableIpv6",
  "random-fully": "randomFully",
  "to-ports": "toPorts",
};

interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `podpath ipmasq config|rules [FILE] flags -o json`, run in-process with the command module. */
async function podpath(
  command: "config" | "rules",
  file: string | undefined,
  flags: readonly string[],
  output: "json" | "text" = "json",
): Promise<CliResult> {
  const opts: Record<string, unknown> = { output };
  for (const f of flags) {
    const m = /^--([a-z0-9-]+)=(.*)$/s.exec(f);
    assert.ok(m && OPTION_KEYS[m[1]!], `unexpected agent flag ${f}`);
    opts[OPTION_KEYS[m[1]!]!] = m[2]!;
  }
  const io = memoryIo();
  const mod = command === "config" ? configCommand : rulesCommand;
  let code: number;
  try {
    code = await mod.run(file === undefined ? [] : [file], opts, io);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.err(`podpath: ${e.message}\n`);
    code = 2;
  }
  return { code, stdout: io.stdout(), stderr: io.stderr() };
}

interface FamilyRules {
  readonly restoreInput: string;
  readonly savedLines: readonly string[];
}

// ---------------------------------------------------------------- the agent's side

/** One klog line: `I1202 03:55:03.787147    1635 file.go:128] message`. */
const KLOG = /^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]+\] (.*)$/;

interface AgentRun {
  readonly log: string;
  readonly exited: boolean;
  /** Messages of the klog lines, by severity letter. */
  readonly messages: readonly { severity: string; text: string }[];
  readonly saved: Readonly<Record<4 | 6, string>>;
}

/** Go's strconv.Unquote for the %q the agent logs its rules with. */
function goUnquote(q: string): string {
  assert.ok(q.startsWith('"') && q.endsWith('"'), `not a Go quoted string: ${q}`);
  const simple: Readonly<Record<string, string>> = {
    n: "\n",
    t: "\t",
    r: "\r",
    a: "\x07",
    b: "\b",
    f: "\f",
    v: "\v",
    '"': '"',
    "\\": "\\",
  };
  return q
    .slice(1, -1)
    .replace(/\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|.)/g, (_, e: string) =>
      e.length > 1 ? String.fromCodePoint(Number.parseInt(e.slice(1), 16)) : (simple[e] ?? e),
    );
}

const TOOLS = ["iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save"];

/** A PATH folder whose iptables tools are the given backend's. */
function backendBin(dir: string, backend: "nft" | "legacy"): string {
  const bin = join(dir, `bin-${backend}`);
  mkdirSync(bin, { recursive: true });
  for (const t of [...TOOLS, "ip6tables-restore"]) {
    const [fam, ...rest] = t.split("-");
    const target = `/usr/sbin/${[fam, backend, ...rest].join("-")}`;
    symlinkSync(target, join(bin, t));
  }
  return bin;
}

function waitExit(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
}

function masqChain(kase: AgentCase): string {
  const f = kase.flags.find((x) => x.startsWith("--masq-chain="));
  return f === undefined ? "IP-MASQ-AGENT" : f.slice("--masq-chain=".length);
}

/** The chain's last rule, the one MASQUERADE without a protocol, is in the given save output. */
function lastRuleIn(saved: string, chain: string): boolean {
  return saved
    .split("\n")
    .some((l) => l.startsWith(`-A ${chain} `) && / -j MASQUERADE( --random-fully)?$/.test(l));
}

async function runAgent(
  ns: Namespace,
  kase: AgentCase,
  dir: string,
  bin: string,
): Promise<AgentRun> {
  const upper = join(dir, "upper");
  const work = join(dir, "work");
  mkdirSync(work, { recursive: true });
  mkdirSync(join(upper, "config"), { recursive: true });
  const text = kase.mounted ?? kase.file;
  if (text !== undefined) writeFileSync(join(upper, "config", "ip-masq-agent"), text);
  else rmSync(join(upper, "config"), { recursive: true });
  const script =
    "mount --make-rprivate / && " +
    `mount -t overlay overlay -o lowerdir=/etc,upperdir=${upper},workdir=${work} /etc && ` +
    `PATH=${bin}:$PATH exec "$0" "$@"`;
  const child = ns.spawn(["unshare", "-m", "sh", "-c", script, AGENT, "--v=2", ...kase.flags]);
  let log = "";
  child.stdout?.on("data", (d: Buffer) => {
    log += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    log += d.toString();
  });
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  const save = async (family: 4 | 6) => {
    const r = await ns.exec([
      join(bin, family === 4 ? "iptables-save" : "ip6tables-save"),
      "-t",
      "nat",
    ]);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  };
  const chain = masqChain(kase);
  const deadline = Date.now() + WAIT_MS;
  try {
    for (;;) {
      // the conditions the agent's first sync ends on, in the order it logs them
      if (exited) break;
      if (/Error syncing (configuration|masquerade rules)/.test(log)) break;
      if (/IPv6 masquerading rules: not enabled\./.test(log)) break;
      if (/IPv6 masquerading rules: "/.test(log) && lastRuleIn(await save(6), chain)) break;
      if (Date.now() > deadline) {
        assert.fail(`the agent did not finish its first sync in ${WAIT_MS} ms; its log:\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const saved = { 4: await save(4), 6: await save(6) };
    if (!exited) child.kill("SIGKILL");
    await waitExit(child);
    const messages = log.split("\n").flatMap((l) => {
      const m = KLOG.exec(l);
      return m ? [{ severity: m[1]!, text: m[2]! }] : [];
    });
    return { log, exited, messages, saved };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
}

/** The lines of iptables-save that belong to the agent: its chain and the POSTROUTING rules. */
function agentLines(saved: string, chain: string): string[] {
  return saved
    .split("\n")
    .filter(
      (l) =>
        l.startsWith(`:${chain} `) ||
        l.startsWith("-A POSTROUTING ") ||
        l.startsWith(`-A ${chain} `),
    );
}

// ---------------------------------------------------------------- the comparison

function describeCase(kase: AgentCase): string {
  const file = kase.file === undefined ? "(no config file)" : JSON.stringify(kase.file);
  return `config file: ${file}\nflags: ${kase.flags.join(" ") || "(none)"}\nbackend: ${kase.backend}`;
}

async function compare(lab: Lab, index: number, kase: AgentCase, root: string): Promise<void> {
  const dir = join(root, `case${index}`);
  mkdirSync(dir, { recursive: true });
  let file: string | undefined;
  if (kase.file !== undefined) {
    file = join(dir, "ip-masq-agent.yaml");
    writeFileSync(file, kase.file);
  }
  const config = await podpath("config", file, kase.flags);
  const rules = await podpath("rules", file, kase.flags);
  const ns = await lab.addNamespace(`c${index}`);
  const agent = await runAgent(ns, kase, dir, join(root, `bin-${kase.backend}`));
  const chain = masqChain(kase);
  const context = `\n${describeCase(kase)}\npodpath config: ${config.stdout}${config.stderr}\nagent log:\n${agent.log}`;
  const said = (prefix: string) =>
    agent.messages.find((m) => m.text.startsWith(prefix))?.text.slice(prefix.length);

  const fatal = agent.exited ? agent.messages.find((m) => m.severity === "F")?.text : undefined;
  const rejected = said("Error syncing configuration: ");
  if (config.code === 2) {
    const expected = (JSON.parse(config.stdout) as { error: string }).error;
    assert.equal(fatal ?? rejected, expected, `the agent's error differs from podpath's${context}`);
    assert.notEqual(rules.code, 0, `podpath rejects the config but prints rules${context}`);
    // rejected at the first sync: the agent returns before writing any rule
    for (const f of [4, 6] as const) {
      assert.deepEqual(agentLines(agent.saved[f], chain), [], `rules after a rejection${context}`);
    }
    return;
  }
  assert.equal(config.code, 0, `podpath ipmasq config failed${context}`);
  assert.equal(fatal, undefined, `the agent exited; podpath accepts the config${context}`);
  assert.equal(rejected, undefined, `the agent rejected the config; podpath accepts it${context}`);
  const using = said("Using config: ");
  if (using !== undefined) {
    // (the agent logs it only when it read a file)
    assert.deepEqual(JSON.parse(using), JSON.parse(config.stdout), `the config differs${context}`);
  }

  const restoreFailed = said("Error syncing masquerade rules");
  // the text form exits 1 when the real iptables-restore refuses part of the input
  const refused = (await podpath("rules", file, kase.flags, "text")).code === 1;
  assert.equal(
    restoreFailed !== undefined,
    refused,
    `iptables-restore refused the rules: agent ${restoreFailed ?? "no"}, podpath ${refused}${context}\n${rules.stderr}`,
  );
  if (restoreFailed !== undefined) return;
  assert.equal(rules.code, 0, `podpath ipmasq rules failed${context}\n${rules.stderr}`);
  const json = JSON.parse(rules.stdout) as { iptables?: FamilyRules; ip6tables?: FamilyRules };
  for (const [family, key, label] of [
    [4, "iptables", "IPv4"],
    [6, "ip6tables", "IPv6"],
  ] as const) {
    const logged = said(`${label} masquerading rules: `);
    const mine = json[key];
    if (logged === undefined || logged === "not enabled.") {
      assert.equal(mine, undefined, `podpath writes ${label} rules, the agent does not${context}`);
      assert.deepEqual(
        agentLines(agent.saved[family], chain),
        [],
        `${label} rules present${context}`,
      );
      continue;
    }
    assert.ok(mine, `the agent writes ${label} rules, podpath does not${context}`);
    assert.equal(goUnquote(logged), mine.restoreInput, `${label} restore input differs${context}`);
    assert.deepEqual(
      agentLines(agent.saved[family], chain),
      mine.savedLines,
      `${label} iptables-save lines differ${context}`,
    );
  }
}

describe("the real ip-masq-agent agrees with podpath ipmasq config/rules", { skip }, () => {
  let lab: Lab | undefined;
  let root = "";
  before(async () => {
    lab = await createLab();
    root = mkdtempSync(join(tmpdir(), "podpath-ipmasq-agent-"));
    backendBin(root, "nft");
    backendBin(root, "legacy");
  });
  after(async () => {
    await lab?.destroy();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const vectors = skip === false ? vectorCases() : [];
  const edges = skip === false ? edgeCases() : [];
  const random = skip === false ? randomCases(SEED, RANDOM_COUNT) : [];
  let index = 0;
  for (const kase of [...vectors, ...edges, ...random]) {
    const i = index++;
    it(kase.id, async () => {
      await compare(lab!, i, kase, root);
    });
  }
  it("ran every vector of the shared reference and the random configs", () => {
    assert.ok(vectors.length >= 60, `only ${vectors.length} vector cases`);
    assert.equal(random.length, RANDOM_COUNT);
  });
});
