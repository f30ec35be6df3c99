/**
 * Real-kernel test: what `podpath ipmasq rules` prints is loaded with the real
 * `iptables-restore --noflush` (nf_tables and legacy backends, IPv4 and IPv6) inside a throwaway
 * network namespace, the POSTROUTING jump is ensured with `iptables -C`/`-A` as the agent does,
 * the real `iptables-save` output is parsed and compared with the expected chain (no drift),
 * then rules are changed by hand and the drift names the changed line.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { parseIptablesSave } from "../../iptables/save-parser.ts";
import { waitingForXtablesLock } from "../../iptables/test-helpers/iptables-netns.ts";
import { kernelSkip } from "../../lab/kernel-guard.ts";
import { createLab, type Lab, type Namespace } from "../../lab/netns.ts";
import { decodeMasqConfig, type MasqConfig, validateMasqConfig } from "./config.ts";
import { compareAgentChain } from "./drift.ts";
import { type AgentFlags, DEFAULT_AGENT_FLAGS } from "./flags.ts";
import { parseIntervals } from "./intervals.ts";
import {
  agentChain,
  agentRestoreInput,
  agentSavedLines,
  expectedAgentChain,
  RETURN_COMMENT,
  restoreProblems,
} from "./rules.ts";

const MAIN = fileURLToPath(new URL("../../cli/main.ts", import.meta.url));
const CLUSTER = fileURLToPath(new URL("./fixtures/diagnose-cluster.yaml", import.meta.url));
const skip = kernelSkip();

const CONFIG = `nonMasqueradeCIDRs:
  - 10.0.0.0/8
  - 172.16.0.0/12
  - 10.1.2.3/32
  - fc00::/7
  - 2001:db8::/32
masqLinkLocal: false
`;

function podpath(args: readonly string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["--import", "tsx", MAIN, ...args], { encoding: "utf8" });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

function decoded(text: string): MasqConfig {
  const r = decodeMasqConfig(text);
  if ("error" in r) throw new Error(r.error.message);
  return r.config;
}

async function run(ns: Namespace, argv: readonly string[], input?: string): Promise<string> {
  const r = await ns.exec(waitingForXtablesLock(argv), input === undefined ? {} : { input });
  assert.equal(r.code, 0, `${argv.join(" ")} failed: ${r.stderr}`);
  return r.stdout;
}

/** The agent's EnsureRule: `-C` to check, `-A` to append when missing (argv, no shell). */
async function ensureJump(ns: Namespace, tool: string, written: string): Promise<void> {
  const m =
    /^-A POSTROUTING -m comment --comment (.*) -m addrtype ! --dst-type LOCAL -j (\S+)$/.exec(
      written,
    );
  assert.ok(m, written);
  const spec = ["-m", "comment", "--comment", m[1]!, "-m", "addrtype", "!", "--dst-type", "LOCAL"];
  const check = await ns.exec(
    waitingForXtablesLock([tool, "-t", "nat", "-C", "POSTROUTING", ...spec, "-j", m[2]!]),
  );
  if (check.code !== 0)
    await run(ns, [tool, "-t", "nat", "-A", "POSTROUTING", ...spec, "-j", m[2]!]);
}

const BACKENDS = ["nft", "legacy"] as const;

describe("agent rules on a real kernel", { skip }, () => {
  let lab: Lab | undefined;
  let dir = "";
  before(async () => {
    lab = await createLab();
    dir = mkdtempSync(join(tmpdir(), "podpath-ipmasq-"));
    writeFileSync(join(dir, "config.yaml"), CONFIG);
  });
  after(async () => {
    await lab?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const backend of BACKENDS) {
    for (const family of [4, 6] as const) {
      const tool = `${family === 4 ? "iptables" : "ip6tables"}-${backend}`;
      it(`${tool}: the printed rules load, save back exactly, and show no drift; a hand edit is named`, async () => {
        const ns = await lab!.addNamespace(`${backend.slice(0, 3)}${family}`);
        // the config lists IPv6 CIDRs, which the agent accepts only with --enable-ipv6
        const flagArgs = ["--enable-ipv6"];
        const flags: AgentFlags = { ...DEFAULT_AGENT_FLAGS, enableIpv6: true };

        // 1. what the CLI prints goes into the real iptables-restore --noflush
        const cli = podpath([
          "ipmasq",
          "rules",
          join(dir, "config.yaml"),
          ...flagArgs,
          "--family",
          String(family),
        ]);
        assert.equal(cli.code, 0, cli.stderr);
        await run(ns, [`${tool}-restore`, "--noflush"], cli.stdout);
        const config = decoded(CONFIG);
        const chain = agentChain(config, family, { flags })!;
        await ensureJump(ns, tool, chain.jump.written);

        // 2. the real iptables-save shows exactly the lines podpath expects, in order
        const saved = await run(ns, [`${tool}-save`, "-t", "nat"]);
        const lines = saved.split("\n");
        const want = agentSavedLines(chain);
        const positions = want.map((l) => lines.indexOf(l));
        assert.ok(
          positions.every((p) => p >= 0),
          `missing in iptables-save:\n${want.filter((_, i) => positions[i]! < 0).join("\n")}\n---\n${saved}`,
        );
        const rulePositions = positions.slice(2);
        assert.deepEqual(
          [...rulePositions].sort((a, b) => a - b),
          rulePositions,
        );

        // 3. parsed and compared: no drift
        const expected = expectedAgentChain(config, flags, { family })!;
        const dump = parseIptablesSave(saved, "iptables-save.txt", { family }).value;
        const same = compareAgentChain(expected, dump);
        assert.deepEqual(same.drift, []);
        assert.equal(same.inSync, true);

        // 4. one entry changed by hand: drift names that installed line
        const other = family === 4 ? "10.99.0.0/16" : "2001:db8:99::/48";
        await run(ns, [
          tool,
          "-t",
          "nat",
          "-R",
          expected.chain,
          "2",
          "-d",
          other,
          "-m",
          "comment",
          "--comment",
          RETURN_COMMENT,
          "-j",
          "RETURN",
        ]);
        const edited = await run(ns, [`${tool}-save`, "-t", "nat"]);
        const editedLine = edited.split("\n").findIndex((l) => l.includes(` -d ${other} `)) + 1;
        assert.ok(editedLine > 0);
        const drift = compareAgentChain(
          expected,
          parseIptablesSave(edited, "iptables-save.txt", { family }).value,
        );
        assert.equal(drift.inSync, false);
        assert.equal(drift.drift.length, 1, JSON.stringify(drift.drift, null, 1));
        const d = drift.drift[0]!;
        assert.equal(d.kind, "changed");
        assert.ok("source" in d);
        assert.equal(d.source.line, editedLine);
        assert.match(d.message, new RegExp(`iptables-save\\.txt:${editedLine}:`));

        // 5. the jump deleted: reported as missing
        await run(ns, [tool, "-t", "nat", "-D", "POSTROUTING", "1"]);
        const noJump = await run(ns, [`${tool}-save`, "-t", "nat"]);
        const kinds = compareAgentChain(
          expected,
          parseIptablesSave(noJump, "x", { family }).value,
        ).drift.map((x) => x.kind);
        assert.deepEqual(kinds.sort(), ["changed", "jump-missing"]);

        // 6. the chain gone entirely
        await run(ns, [tool, "-t", "nat", "-F", expected.chain]);
        await run(ns, [tool, "-t", "nat", "-X", expected.chain]);
        const gone = await run(ns, [`${tool}-save`, "-t", "nat"]);
        const goneKinds = compareAgentChain(
          expected,
          parseIptablesSave(gone, "x", { family }).value,
        ).drift.map((x) => x.kind);
        assert.deepEqual(goneKinds.sort(), ["chain-missing", "jump-missing"]);
      });
    }

    it(`iptables-${backend}: --to-ports rules save back as podpath renders them (probabilities quantised)`, async () => {
      const ns = await lab!.addNamespace(`${backend.slice(0, 3)}tp`);
      const toPortsText = "1024-29999,32768-49151,61000-65535";
      const parsed = parseIntervals(toPortsText);
      assert.ok("intervals" in parsed);
      const cli = podpath([
        "ipmasq",
        "rules",
        join(dir, "config.yaml"),
        "--enable-ipv6",
        `--to-ports=${toPortsText}`,
      ]);
      assert.equal(cli.code, 0, cli.stderr);
      await run(ns, [`iptables-${backend}-restore`, "--noflush"], cli.stdout);
      const flags: AgentFlags = { ...DEFAULT_AGENT_FLAGS, enableIpv6: true, toPorts: toPortsText };
      const config = decoded(CONFIG);
      const chain = agentChain(config, 4, { flags, toPorts: parsed.intervals })!;
      await ensureJump(ns, `iptables-${backend}`, chain.jump.written);
      const saved = await run(ns, [`iptables-${backend}-save`, "-t", "nat"]);
      const lines = saved.split("\n");
      for (const l of agentSavedLines(chain))
        assert.ok(lines.includes(l), `not in iptables-save: ${l}\n---\n${saved}`);
      const expected = expectedAgentChain(config, flags, { toPorts: parsed.intervals })!;
      const cmp = compareAgentChain(expected, parseIptablesSave(saved, "iptables-save.txt").value);
      assert.deepEqual(cmp.drift, []);
    });
  }

  it("diagnose on a snapshot with the real iptables-save: no drift, then the hand-edited line", async () => {
    const ns = await lab!.addNamespace("diag");
    const snap = join(dir, "snapshot");
    mkdirSync(join(snap, "cluster"), { recursive: true });
    mkdirSync(join(snap, "nodes", "gke-a-1"), { recursive: true });
    copyFileSync(CLUSTER, join(snap, "cluster", "objects.yaml"));
    // the agent's own steps: rules through iptables-restore, then the POSTROUTING jump
    const cli = podpath(["ipmasq", "rules", CLUSTER]);
    assert.equal(cli.code, 0, cli.stderr);
    await run(ns, ["iptables-restore", "--noflush"], cli.stdout);
    const config = decoded("nonMasqueradeCIDRs: [10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16]\n");
    await ensureJump(
      ns,
      "iptables",
      agentChain(config, 4, { flags: DEFAULT_AGENT_FLAGS })!.jump.written,
    );
    const savePath = join(snap, "nodes", "gke-a-1", "iptables-save.txt");
    writeFileSync(savePath, await run(ns, ["iptables-save"]));

    const diagnose = () => {
      const r = podpath(["diagnose", snap, "-o", "json"]);
      assert.ok(r.code === 0 || r.code === 1, r.stderr);
      return JSON.parse(r.stdout) as {
        findings: { id: string; evidence: { file: string; line: number; text?: string }[] }[];
      };
    };
    const clean = diagnose();
    assert.deepEqual(
      clean.findings.filter((f) => f.id === "masq/intent-rules-drift"),
      [],
      JSON.stringify(clean.findings, null, 1),
    );

    await run(ns, [
      "iptables",
      "-t",
      "nat",
      "-R",
      "IP-MASQ-AGENT",
      "3",
      "-d",
      "172.16.0.0/16",
      "-m",
      "comment",
      "--comment",
      RETURN_COMMENT,
      "-j",
      "RETURN",
    ]);
    const edited = await run(ns, ["iptables-save"]);
    writeFileSync(savePath, edited);
    const line = edited.split("\n").findIndex((l) => l.includes("-d 172.16.0.0/16 ")) + 1;
    const drift = diagnose().findings.filter((f) => f.id === "masq/intent-rules-drift");
    assert.equal(drift.length, 1);
    assert.deepEqual(
      drift[0]!.evidence
        .filter((e) => e.file === "nodes/gke-a-1/iptables-save.txt")
        .map((e) => e.line),
      [line],
    );
  });

  it("predicts exactly which accepted configs the real iptables-restore refuses, and where", async () => {
    const ns = await lab!.addNamespace("refuse");
    const cases: { cidrs: string[]; chain?: string; toPorts?: string }[] = [
      { cidrs: ["10.0.0.0/8"] },
      { cidrs: ["10.0.0.0/08"] },
      { cidrs: ["10.0.0.0/010"] },
      { cidrs: ["10.0.0.0/0"] },
      { cidrs: ["::ffff:10.0.0.0/104"] },
      { cidrs: ["10.0.0.0/8"], toPorts: "1024-70000" },
      { cidrs: ["10.0.0.0/8"], toPorts: "0" },
      { cidrs: [], chain: "ABCDEFGHIJKLMNOPQRSTUVWXYZ01" },
      { cidrs: [], chain: "ABCDEFGHIJKLMNOPQRSTUVWXYZ012" },
    ];
    for (const backend of BACKENDS) {
      for (const c of cases) {
        const config = decoded(JSON.stringify({ nonMasqueradeCIDRs: c.cidrs }));
        const parsed = parseIntervals(c.toPorts ?? "0");
        assert.ok("intervals" in parsed);
        const flags: AgentFlags = {
          ...DEFAULT_AGENT_FLAGS,
          masqChain: c.chain ?? DEFAULT_AGENT_FLAGS.masqChain,
          toPorts: c.toPorts ?? "",
        };
        const options = { flags, toPorts: c.toPorts ? parsed.intervals : [] };
        const chain = agentChain(config, 4, options)!;
        const predicted = restoreProblems(chain);
        const input = agentRestoreInput(config, 4, options)!;
        const r = await ns.exec(
          waitingForXtablesLock([`iptables-${backend}-restore`, "--noflush"]),
          { input },
        );
        const what = `${backend} ${JSON.stringify(c)}: ${r.stderr}`;
        assert.equal(r.code !== 0, predicted.length > 0, what);
        if (predicted.length > 0) {
          // the refused token (mask, port, chain name); nft and legacy word the rest differently
          const token = /`([^']*)'/.exec(predicted[0]!.message)?.[1];
          assert.ok(token !== undefined && r.stderr.includes(`\`${token}'`), what);
          assert.match(
            r.stderr,
            new RegExp(`Error occurred at line: ${predicted[0]!.line}\\b`),
            what,
          );
          continue;
        }
        // loaded: what iptables-save shows is what podpath expects it to show
        const saved = (await run(ns, [`iptables-${backend}-save`, "-t", "nat"])).split("\n");
        for (const rule of chain.rules)
          assert.ok(saved.includes(rule.saved), `${what}\n${rule.saved}\n${saved.join("\n")}`);
      }
    }
  });

  it("random accepted configs: podpath predicts the real iptables-restore verdict and the saved lines", async () => {
    const ns = await lab!.addNamespace("rand");
    const octet = fc.integer({ min: 0, max: 255 });
    const prefixText = fc.oneof(
      fc.integer({ min: 0, max: 32 }).map(String),
      fc.integer({ min: 0, max: 32 }).map((p) => `0${p}`),
    );
    const cidrText = fc
      .tuple(octet, octet, prefixText)
      .map(([a, b, p]) => `${a}.${b}.0.0/${p}`)
      .filter((t) => {
        // only entries the agent accepts (parseable and aligned as Go reads them)
        const r = decodeMasqConfig(JSON.stringify({ nonMasqueradeCIDRs: [t] }));
        return "config" in r && validateMasqConfig(r.config, { enableIpv6: false }) === undefined;
      });
    const port = fc.integer({ min: 0, max: 70000 });
    const toPorts = fc.array(
      fc.tuple(port, port).map(([a, b]) => (a <= b ? `${a}-${b}` : String(b))),
      { maxLength: 3 },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(cidrText, { maxLength: 5 }),
        toPorts,
        fc.boolean(),
        fc.constantFrom(...BACKENDS),
        async (cidrs, ports, masqLinkLocal, backend) => {
          const config = decoded(JSON.stringify({ nonMasqueradeCIDRs: cidrs, masqLinkLocal }));
          const parsed = parseIntervals(ports.join(","));
          const intervals = ports.length > 0 && "intervals" in parsed ? parsed.intervals : [];
          const options = {
            flags: { ...DEFAULT_AGENT_FLAGS, toPorts: ports.join(",") },
            toPorts: intervals,
          };
          const chain = agentChain(config, 4, options)!;
          const predicted = restoreProblems(chain);
          const input = agentRestoreInput(config, 4, options)!;
          const r = await ns.exec(
            waitingForXtablesLock([`iptables-${backend}-restore`, "--noflush"]),
            { input },
          );
          assert.equal(r.code !== 0, predicted.length > 0, `${input}\n${r.stderr}`);
          if (predicted.length > 0) {
            assert.match(
              r.stderr,
              new RegExp(`Error occurred at line: ${predicted[0]!.line}\\b`),
              r.stderr,
            );
            return;
          }
          const saved = (await run(ns, [`iptables-${backend}-save`, "-t", "nat"])).split("\n");
          const installed = saved.filter((l) => l.startsWith(`-A ${chain.chain} `));
          assert.deepEqual(
            installed,
            chain.rules.map((x) => x.saved),
          );
        },
      ),
      { numRuns: 60 },
    );
  });
});
