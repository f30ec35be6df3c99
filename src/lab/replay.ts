/**
 * @module lab/replay — what-if replay of a real node's nat table: loads the dump's nat section
 * into a sandbox, sends the flow through it, reads the source address the kernel put on the wire
 * from conntrack, and sets it next to what the evaluator (iptables/nat-eval) predicts for the same
 * node shape. The masquerade plan uses it to prove a proposed config on a real kernel before it
 * reaches a cluster. An explicit I/O module (creates a lab).
 */

import { type IpsetDump, parseIpset } from "../iptables/ipset-parser.ts";
import { ipsetRestoreInput } from "../iptables/ipset-render.ts";
import { compileNat } from "../iptables/nat-eval.ts";
import type { Flow, NatContext, NatTrace } from "../iptables/nat-trace.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import type { Diagnostic } from "../model/types.ts";
import { formatIp, parseCidr, parseIp, tryParseIp } from "../net/cidr.ts";
import type { FlowSpec } from "./flow-spec.ts";
import {
  createNatSandbox,
  type KernelObservation,
  type NatSandbox,
  natSection,
  SANDBOX_GATEWAY,
  SANDBOX_NODE_IP,
  type SandboxFlow,
} from "./nat-sandbox.ts";
import { type Agreement, compareTranslation } from "./translation.ts";

export interface ReplayOptions {
  /** Interface the flow arrives on at the node (default cbr0). */
  readonly inIface?: string;
  /** Interface it leaves by (default eth0). */
  readonly outIface?: string;
  /**
   * The node's address on outIface (default 10.128.0.2, or fd00:128::2 for an IPv6 flow):
   * MASQUERADE's choice. Of the flow's family.
   */
  readonly nodeIp?: string;
  /** The flow is the node's own traffic (default: when its source is nodeIp). */
  readonly local?: boolean;
  /** Name the dump is cited by (default "iptables-save", "ip6tables-save" for an IPv6 flow). */
  readonly file?: string;
  /**
   * Lines of the nat table podpath's own reader flags as errors: "refuse" (the default) replays
   * nothing and names the first; "skip" loads the table without them (they stay in diagnostics).
   */
  readonly invalidLines?: "refuse" | "skip";
  /** The node's IP sets (`ipset save` or `ipset list`), restored before the rules that test them. */
  readonly ipsets?: {
    readonly text: string;
    readonly file: string;
    readonly extra?: readonly string[];
  };
}

export interface ReplayResult {
  readonly flow: FlowSpec;
  /** Source address the kernel put on the wire; undefined when nothing left the node. */
  readonly kernelSource: string | undefined;
  readonly kernel: KernelObservation;
  /** The evaluator's trace for the same flow and node shape. */
  readonly trace: NatTrace;
  /** The evaluator's answer in one line. */
  readonly predicted: string;
  /** undefined: the evaluator cannot decide (never counted as a disagreement). */
  readonly agree: boolean | undefined;
  readonly agreement: Agreement;
  readonly diagnostics: readonly Diagnostic[];
}

/** Thrown for input replay cannot run at all (no nat table, rules the kernel refuses, mixed families). */
export class ReplayError extends Error {
  override readonly name = "ReplayError";
  readonly code: "ERR_REPLAY_INPUT" | "ERR_REPLAY_KERNEL";
  constructor(code: ReplayError["code"], message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * The node as the sandbox builds it, told to the evaluator in its own terms; its family is
 * nodeIp's (IPv6: ::1 on lo, the IPv6 gateway on inIface).
 */
export function sandboxContext(
  nodeIp: string,
  inIface: string,
  outIface: string,
  extraLocal: readonly string[] = [],
): NatContext {
  const family = parseIp(nodeIp).family;
  const gateway = SANDBOX_GATEWAY[family];
  const host = (a: string) => ({ ip: parseIp(a), prefix: family === 6 ? 128 : 32 });
  const loopback = family === 6 ? "::1" : "127.0.0.1";
  return {
    localAddresses: [
      parseCidr(family === 6 ? "::1/128" : "127.0.0.0/8"),
      parseIp(gateway),
      parseIp(nodeIp),
      ...extraLocal.map((a) => parseIp(a)),
    ],
    interfaces: [
      {
        name: "lo",
        primary: parseIp(loopback),
        addresses: [{ ip: parseIp(loopback), prefix: family === 6 ? 128 : 8 }],
      },
      { name: inIface, primary: parseIp(gateway), addresses: [host(gateway)] },
      {
        name: outIface,
        primary: parseIp(nodeIp),
        addresses: [host(nodeIp), ...extraLocal.map(host)],
      },
    ],
    nodeInternalIp: parseIp(nodeIp),
  };
}

/** The evaluator's flow for a sandbox flow. */
export function sandboxFlow(f: SandboxFlow, inIface: string, outIface: string): Flow {
  return {
    src: parseIp(f.src),
    dst: parseIp(f.dst),
    proto: f.proto,
    ...(f.sport === undefined ? {} : { sport: f.sport }),
    ...(f.dport === undefined ? {} : { dport: f.dport }),
    origin: f.local ? "host" : "pod",
    ...(f.local ? {} : { inIface }),
    outIface,
  };
}

/**
 * The nat section as the kernel is handed it. Lines the reader flagged as errors are never loaded
 * as root: refused (the first named, with file and line), or left out when `invalid` is "skip".
 */
export function loadableNat(
  dumpText: string,
  diagnostics: readonly Diagnostic[],
  invalid: "refuse" | "skip",
): string {
  const lines = dumpText.split(/\r?\n/);
  const start = lines.findIndex((l) => l.trim() === "*nat");
  const end = lines.findIndex((l, i) => i > start && l.trim() === "COMMIT");
  const bad = diagnostics.filter(
    (d) =>
      d.severity === "error" &&
      d.source !== undefined &&
      d.source.line > start + 1 &&
      d.source.line <= end + 1,
  );
  const first = bad[0];
  if (first?.source !== undefined && invalid === "refuse") {
    throw new ReplayError(
      "ERR_REPLAY_INPUT",
      `line ${first.source.line}: ${first.message}: ${JSON.stringify(first.source.text ?? lines[first.source.line - 1] ?? "")}; ${bad.length} line(s) of the nat table cannot be read, and podpath does not load lines it cannot read into the kernel (--skip-invalid replays the table without them)`,
    );
  }
  const skip = new Set(bad.map((d) => (d.source?.line ?? 0) - 1));
  return `${lines
    .slice(start, end + 1)
    .filter((_, i) => !skip.has(start + i))
    .join("\n")}\n`;
}

/** The node's sets with the extra members, as the evaluator reads them and as `ipset restore` input. */
function replaySets(o: NonNullable<ReplayOptions["ipsets"]>): {
  dump: IpsetDump;
  restore: string;
} {
  const given = parseIpset(o.text, o.file).value;
  const restore = ipsetRestoreInput(given, o.extra ?? []);
  // the sets as given keep their lines for citing; with extra members, as restored
  return { dump: (o.extra ?? []).length > 0 ? parseIpset(restore, o.file).value : given, restore };
}

/**
 * Replays one flow through a node's nat table on the kernel and through the evaluator.
 * @example
 *   const r = await replayFlow(readFileSync("iptables-save.txt", "utf8"), parseFlowSpec("10.4.0.5->10.20.30.40:5432"));
 *   r.kernelSource; // "10.4.0.5": exempt, the pod's own address leaves the node
 */
export async function replayFlow(
  dumpText: string,
  flow: FlowSpec,
  opts: ReplayOptions = {},
): Promise<ReplayResult> {
  const family = flow.src.family;
  const file = opts.file ?? (family === 6 ? "ip6tables-save" : "iptables-save");
  if (flow.dst.family !== family) {
    throw new ReplayError(
      "ERR_REPLAY_INPUT",
      `${formatIp(flow.src)} -> ${formatIp(flow.dst)}: source and destination are of different families`,
    );
  }
  const nodeIp = opts.nodeIp ?? SANDBOX_NODE_IP[family];
  if (tryParseIp(nodeIp)?.family !== family) {
    throw new ReplayError(
      "ERR_REPLAY_INPUT",
      `--node-ip ${nodeIp}: not an IPv${family} address, as the flow's are`,
    );
  }
  if (natSection(dumpText) === undefined) {
    throw new ReplayError(
      "ERR_REPLAY_INPUT",
      `${file}: no "*nat ... COMMIT" section; expected iptables-save output of the node`,
    );
  }
  // an IPv6 flow meets ip6tables rules: read as such even when no line names an address
  const parsed = parseIptablesSave(dumpText, file, family === 6 ? { family } : {});
  const section = loadableNat(dumpText, parsed.diagnostics, opts.invalidLines ?? "refuse");
  const inIface = opts.inIface ?? "cbr0";
  const outIface = opts.outIface ?? "eth0";
  const src = formatIp(flow.src);
  const isNodeIp = flow.src.value === parseIp(nodeIp).value;
  const local = opts.local ?? isNodeIp;
  const ctx = sandboxContext(nodeIp, inIface, outIface, local && !isNodeIp ? [src] : []);
  // a fixed source port keeps the conntrack lookup unambiguous
  const sport = flow.sport ?? (flow.proto === "icmp" ? undefined : 41_000);
  const cleaned: SandboxFlow = {
    proto: flow.proto,
    src,
    dst: formatIp(flow.dst),
    ...(sport === undefined ? {} : { sport }),
    ...(flow.dport === undefined ? {} : { dport: flow.dport }),
    local,
  };
  const sets = opts.ipsets ? replaySets(opts.ipsets) : undefined;
  const trace = compileNat(parsed.value, sets ? { ...ctx, ipsets: sets.dump } : ctx).evaluate(
    sandboxFlow(cleaned, inIface, outIface),
  );
  let sb: NatSandbox | undefined;
  try {
    sb = await createNatSandbox({ inIface, outIface, nodeIp, family });
    if (sets) {
      const r = await sb.node.exec(["ipset", "restore"], { input: sets.restore });
      if (r.code !== 0) {
        throw new ReplayError(
          "ERR_REPLAY_KERNEL",
          `the kernel refuses ${opts.ipsets?.file}'s IP sets: ${r.stderr.trim()}`,
        );
      }
    }
    const loadError = await sb.loadNat(section);
    if (loadError !== undefined) {
      throw new ReplayError(
        "ERR_REPLAY_KERNEL",
        `the kernel refuses ${file}'s nat table: ${loadError}`,
      );
    }
    const [kernel] = await sb.observe([cleaned]);
    const obs = kernel ?? { error: "no observation" };
    const agreement = compareTranslation(trace, obs);
    return {
      flow,
      kernelSource: obs.source,
      kernel: obs,
      trace,
      predicted: agreement.predicted,
      agree: agreement.agree,
      agreement,
      diagnostics: parsed.diagnostics,
    };
  } finally {
    await sb?.destroy();
  }
}
