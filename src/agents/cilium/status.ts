/**
 * @module agents/cilium/status — reads the `Masquerading:` line of `cilium-dbg status --verbose`
 * (or `cilium status`), the agent's own account of how it masquerades on this node. The forms are
 * the ones pkg/command's FormatStatusResponse writes (pkg/client in older releases):
 * `Disabled`; `BPF` or `BPF (ip-masq-agent)`, then with kube-proxy replacement a tab, `[devices]`, a
 * tab and the SNAT exclusion CIDR (native-routing CIDR); `IPTables`; and since 1.13
 * ` [IPv4: Enabled, IPv6: Disabled]`. The tabs arrive as runs of spaces (tabwriter).
 */
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";

export type MasqueradingMode = "BPF" | "IPTables" | "Disabled";

export interface MasqueradingStatus {
  readonly mode: MasqueradingMode;
  /** `BPF (ip-masq-agent)`: the BPF ip-masq-agent map is consulted. */
  readonly ipMasqAgent: boolean;
  /** The devices the BPF masquerade program runs on (with kube-proxy replacement). */
  readonly devices: readonly string[];
  /** IPV4_SNAT_EXCLUSION_DST_CIDR: destinations in it keep the pod's address. */
  readonly snatExclusionCidr?: Cidr;
  /** The IPv6 exclusion CIDR, which newer agents print after the IPv4 one. */
  readonly snatExclusionCidrV6?: Cidr;
  readonly ipv4?: boolean;
  readonly ipv6?: boolean;
  readonly source: SourceRef;
}

const LINE_RE = /^\s*Masquerading:\s*(.*)$/;
const FAMILIES_RE = /\s*\[IPv4:\s*(Enabled|Disabled),\s*IPv6:\s*(Enabled|Disabled)\]\s*$/;

function parseLine(
  rest: string,
  source: SourceRef,
): { status: MasqueradingStatus } | { error: string } {
  let body = rest.trim();
  let ipv4: boolean | undefined;
  let ipv6: boolean | undefined;
  const fam = FAMILIES_RE.exec(body);
  if (fam) {
    ipv4 = fam[1] === "Enabled";
    ipv6 = fam[2] === "Enabled";
    body = body.slice(0, fam.index).trim();
  }
  const fams = { ...(ipv4 !== undefined ? { ipv4 } : {}), ...(ipv6 !== undefined ? { ipv6 } : {}) };
  if (body === "Disabled") {
    return { status: { mode: "Disabled", ipMasqAgent: false, devices: [], ...fams, source } };
  }
  if (body === "IPTables") {
    return { status: { mode: "IPTables", ipMasqAgent: false, devices: [], ...fams, source } };
  }
  const bpf = /^BPF( \(ip-masq-agent\))?(?:\s+\[([^\]]*)\](?:\s+(\S+))?(?:\s+(\S+))?)?$/.exec(body);
  if (!bpf) {
    return {
      error: `expected "Disabled", "IPTables", "BPF" or "BPF (ip-masq-agent)" (then "[devices] CIDR" and "[IPv4: …, IPv6: …]"), got "${rest.trim().slice(0, 80)}"`,
    };
  }
  const devices = (bpf[2] ?? "")
    .split(",")
    .map((d) => d.trim())
    .filter((d) => d !== "");
  let snatExclusionCidr: Cidr | undefined;
  let snatExclusionCidrV6: Cidr | undefined;
  for (const text of [bpf[3], bpf[4]]) {
    if (text === undefined || text === "<nil>" || text === "") continue;
    const c = tryParseCidr(text);
    if (!("cidr" in c))
      return { error: `the SNAT exclusion CIDR "${text.slice(0, 60)}": ${c.error.slice(0, 80)}` };
    if (c.cidr.family === 4) snatExclusionCidr = c.cidr;
    else snatExclusionCidrV6 = c.cidr;
  }
  return {
    status: {
      mode: "BPF",
      ipMasqAgent: bpf[1] !== undefined,
      devices,
      ...(snatExclusionCidr ? { snatExclusionCidr } : {}),
      ...(snatExclusionCidrV6 ? { snatExclusionCidrV6 } : {}),
      ...fams,
      source,
    },
  };
}

/**
 * The Masquerading line of a `cilium-dbg status` output, or undefined when the output has none
 * (the agent prints it only when it reports masquerading at all).
 */
export function readCiliumStatus(
  text: string,
  file: string,
): Parsed<MasqueradingStatus | undefined> {
  const diagnostics: Diagnostic[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const m = LINE_RE.exec(lines[i] ?? "");
    if (!m) continue;
    const t = (lines[i] ?? "").trim();
    const source: SourceRef = { file, line: i + 1, ...(t.length <= 200 ? { text: t } : {}) };
    const r = parseLine(m[1] ?? "", source);
    if ("status" in r) return { value: r.status, diagnostics };
    diagnostics.push({ code: "CILIUM_STATUS_MASQ", severity: "warning", message: r.error, source });
    return { value: undefined, diagnostics };
  }
  if (!/KVStore:|Kubernetes:|Cilium:|Host Routing:/.test(text)) {
    diagnostics.push({
      code: "CILIUM_STATUS_SHAPE",
      severity: "warning",
      message:
        'expected the output of `cilium-dbg status --verbose` (lines such as "Cilium:", "Host Routing:", "Masquerading:"); found none of them',
      source: { file, line: 1 },
    });
  }
  return { value: undefined, diagnostics };
}
