/**
 * The real kube-proxy's 10k-Service dumps (written to .components/dumps/ by the component test:
 * PODPATH_COMPONENT_SERVICES=10000 node scripts/test.mjs kube-proxy-live): podpath's read + parse
 * + nat compile of the iptables-save dump against the real `iptables-restore --test`, and of the
 * nftables listing against the real `nft -c -f`, each in a throwaway network namespace and
 * interleaved; then flow evaluations per second on both. Goal: >= 100,000 flow evaluations per
 * second on the iptables dump (as for the generated 10k table). Skips, saying how to make the
 * dumps, when they are not there.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { compileNat } from "../src/iptables/nat-eval.ts";
import type { Flow, NatEvaluator } from "../src/iptables/nat-trace.ts";
import { parseIptablesSave } from "../src/iptables/save-parser.ts";
import { createLab, labUnavailableReason, type Namespace } from "../src/lab/netns.ts";
import { sandboxContext } from "../src/lab/replay.ts";
import { parseIp } from "../src/net/cidr.ts";
import { compileNftNat } from "../src/nftables/nat-eval.ts";
import { readNftRuleset } from "../src/nftables/read-ruleset.ts";
import { readTextFile } from "../src/snapshot/source.ts";

const DIR = join(import.meta.dirname, "..", ".components", "dumps");
/** Which dumps: "10k" (default), or another size the test wrote (PODPATH_BENCH_KUBE_PROXY=1k). */
const TAG = process.env["PODPATH_BENCH_KUBE_PROXY"] ?? "10k";
const IPT = join(DIR, `kube-proxy-${TAG}-iptables-save.txt`);
const NFT = join(DIR, `kube-proxy-${TAG}-nft.txt`);
const RUNS = 5;
/** The node the component test ran kube-proxy on (its address, pod and uplink interfaces). */
const CTX = sandboxContext("10.128.0.2", "cbr0", "eth0");

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function toolMs(ns: Namespace, argv: string[]): Promise<number> {
  const r = await ns.exec(["/usr/bin/time", "-f", "TIME %e", ...argv], { timeoutMs: 300_000 });
  const m = /TIME ([0-9.]+)\s*$/.exec(r.stderr);
  if (r.code !== 0 || !m) throw new Error(`${argv.join(" ")} failed: ${r.stderr.slice(0, 400)}`);
  return Number(m[1]) * 1000;
}

function flowsOf(text: string): Flow[] {
  const flows: Flow[] = [];
  for (const m of text.matchAll(
    /^-A KUBE-SERVICES -d ([0-9.]+)\/32 -p (tcp|udp) .*?--dport ([0-9]+)/gm,
  )) {
    flows.push({
      src: parseIp(`10.4.${flows.length % 250}.${1 + (flows.length % 200)}`),
      dst: parseIp(m[1]!),
      proto: m[2]!,
      sport: 40000,
      dport: Number(m[3]),
      origin: "pod",
      inIface: "cbr0",
      outIface: "eth0",
    });
    if (flows.length >= 2000) break;
  }
  flows.push({
    src: parseIp("10.4.0.9"),
    dst: parseIp("10.20.30.40"),
    proto: "tcp",
    dport: 5432,
    origin: "pod",
    inIface: "cbr0",
    outIface: "eth0",
  });
  return flows;
}

function perSecond(nat: NatEvaluator, flows: readonly Flow[]): number {
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < 2000) {
    for (const f of flows) nat.evaluate(f);
    n += flows.length;
  }
  return Math.round(n / ((performance.now() - t0) / 1000));
}

async function main(): Promise<number> {
  if (!existsSync(IPT) || !existsSync(NFT)) {
    console.log(
      `SKIP: no real ${TAG} dumps in ${DIR}; make them with PODPATH_COMPONENT_SERVICES=10000 node scripts/test.mjs kube-proxy-live`,
    );
    return 0;
  }
  const iptText = readFileSync(IPT, "utf8");
  const ipt: number[] = [];
  const nft: number[] = [];
  const restore: number[] = [];
  const nftCheck: number[] = [];
  const why = labUnavailableReason();
  const lab = why === undefined ? await createLab() : undefined;
  try {
    const ns = await lab?.addNamespace("bench");
    for (let i = 0; i < RUNS; i++) {
      let t0 = performance.now();
      compileNat(parseIptablesSave(readTextFile(IPT), IPT).value);
      ipt.push(performance.now() - t0);
      t0 = performance.now();
      compileNftNat(readNftRuleset(readTextFile(NFT), NFT).value);
      nft.push(performance.now() - t0);
      if (ns) {
        restore.push(await toolMs(ns, ["iptables-restore", "--test", IPT]));
        nftCheck.push(await toolMs(ns, ["nft", "-c", "-f", NFT]));
      }
    }
  } finally {
    await lab?.destroy();
  }
  const flows = flowsOf(iptText);
  const iptRate = perSecond(compileNat(parseIptablesSave(iptText, IPT).value, CTX), flows);
  const nftRate = perSecond(
    compileNftNat(readNftRuleset(readTextFile(NFT), NFT).value, CTX),
    flows,
  );
  const ms = (xs: number[]) => (xs.length ? `${median(xs).toFixed(0)} ms` : "not measured");
  console.log(
    `iptables-save (${Math.round(iptText.length / 1024)} KiB): podpath read+parse+compile ${ms(ipt)}; iptables-restore --test ${ms(restore)}${why ? ` (${why})` : ""}`,
  );
  console.log(
    `nft list table (${Math.round(readFileSync(NFT).length / 1024)} KiB): podpath read+compile ${ms(nft)}; nft -c -f ${ms(nftCheck)}`,
  );
  console.log(
    `flow evaluations on the real ${TAG} dumps (${flows.length} flows): iptables ${iptRate.toLocaleString("en-US")}/s, nftables ${nftRate.toLocaleString("en-US")}/s`,
  );
  console.log(
    `${iptRate >= 100_000 ? "PASS" : "MISS"} >= 100,000 flow evaluations/s on the real iptables dump`,
  );
  return 0;
}

process.exitCode = await main();
