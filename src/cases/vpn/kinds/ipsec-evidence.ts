/**
 * @module cases/vpn/kinds/ipsec-evidence — an IPsec VPN pod's own files as the IPsec kind reads
 * them: `ipsec.conf` (strongSwan starter, libreswan), `swanctl.conf`, `ipsec statusall` and
 * `swanctl --list-sas` output, `ip xfrm policy` / `ip xfrm state`, each beside the pod
 * (`pods/NS/POD/…`) or, for the configs, a ConfigMap key of the pod's namespace.
 */

import { type IpsecConf, parseIpsecConf } from "../../../agents/strongswan/ipsec-conf.ts";
import { parseSaStatus, type SaStatus } from "../../../agents/strongswan/sa-status.ts";
import { parseSwanctlConf, type SwanctlConf } from "../../../agents/strongswan/swanctl-conf.ts";
import {
  parseXfrmPolicy,
  parseXfrmState,
  type XfrmPolicy,
  type XfrmState,
} from "../../../agents/strongswan/xfrm.ts";
import type { Diagnostic } from "../../../model/types.ts";
import type { KindPodSource } from "./kind.ts";

/** The snapshot files of the IPsec kind, by base name (`.txt` optional for command output). */
export const IPSEC_FILES = {
  ipsecConf: "ipsec.conf",
  swanctlConf: "swanctl.conf",
  statusall: "ipsec-statusall.txt",
  listSas: "swanctl-list-sas.txt",
  xfrmPolicy: "xfrm-policy.txt",
  xfrmState: "xfrm-state.txt",
} as const;

export interface IpsecEvidence {
  readonly ipsecConf?: IpsecConf;
  readonly swanctlConf?: SwanctlConf;
  /** `ipsec statusall` and/or `swanctl --list-sas`, as read. */
  readonly status: readonly SaStatus[];
  readonly xfrmPolicies?: { readonly file: string; readonly policies: readonly XfrmPolicy[] };
  readonly xfrmStates?: { readonly file: string; readonly states: readonly XfrmState[] };
}

const looksLikeIpsecConf = (text: string) =>
  /^conn\s+\S+/m.test(text) && /^\s+(left|right)[a-z]*\s*=/m.test(text);
const looksLikeSwanctl = (text: string) => /^\s*connections\s*\{/m.test(text);

type Role = "ipsec-conf" | "swanctl-conf" | "status" | "xfrm-policy" | "xfrm-state" | "settings";

/** Which IPsec file a base name (and, for other `.conf` names, its text) is. */
export function ipsecFileRole(base: string, text: string): Role | undefined {
  const stem = base.replace(/\.txt$/, "");
  if (base === "ipsec.conf") return "ipsec-conf";
  if (base === "swanctl.conf") return "swanctl-conf";
  // charon's own settings: claimed so no other kind misreads them, not needed to decide anything
  if (base === "strongswan.conf" || base === "charon.conf") return "settings";
  if (stem === "ipsec-statusall" || stem === "swanctl-list-sas") return "status";
  if (stem === "xfrm-policy") return "xfrm-policy";
  if (stem === "xfrm-state") return "xfrm-state";
  if (base.endsWith(".conf") && looksLikeSwanctl(text)) return "swanctl-conf";
  if (base.endsWith(".conf") && looksLikeIpsecConf(text)) return "ipsec-conf";
  return undefined;
}

/** The pod's IPsec evidence with the readers' problems; undefined when it has none. */
export function readIpsecEvidence(
  src: KindPodSource,
): { evidence: IpsecEvidence; diagnostics: Diagnostic[] } | undefined {
  const diagnostics: Diagnostic[] = [];
  const e: { -readonly [K in keyof IpsecEvidence]: IpsecEvidence[K] } = { status: [] };
  const status: SaStatus[] = [];
  for (const f of src.files) {
    const role = ipsecFileRole(f.file.split("/").at(-1) ?? "", f.text);
    const take = <T>(r: { value: T; diagnostics: Diagnostic[] }) => {
      diagnostics.push(...r.diagnostics);
      return r.value;
    };
    if (role === "ipsec-conf") e.ipsecConf = take(parseIpsecConf(f.text, f.file));
    else if (role === "swanctl-conf") e.swanctlConf = take(parseSwanctlConf(f.text, f.file));
    else if (role === "status") status.push(take(parseSaStatus(f.text, f.file)));
    else if (role === "xfrm-policy")
      e.xfrmPolicies = { file: f.file, policies: take(parseXfrmPolicy(f.text, f.file)) };
    else if (role === "xfrm-state")
      e.xfrmStates = { file: f.file, states: take(parseXfrmState(f.text, f.file)) };
  }
  // The config in a ConfigMap of the pod's namespace (mounted at /etc/ipsec.conf), when no file
  // beside the pod has it and the pod is the only one of its namespace in the snapshot.
  if (src.onlyPodOfNamespace) {
    for (const cm of src.objects) {
      if (cm.kind !== "ConfigMap" || (cm.namespace ?? "default") !== src.namespace) continue;
      const data = cm.raw["data"] as Record<string, unknown> | undefined;
      for (const key of ["ipsec.conf", "swanctl.conf"] as const) {
        const text = data?.[key];
        if (typeof text !== "string") continue;
        const start = cm.locateInString(["data", key], 1);
        const offset = start ? start.line - 1 : 0;
        if (key === "ipsec.conf" && !e.ipsecConf)
          e.ipsecConf = take2(parseIpsecConf(text, cm.source.file, offset), diagnostics);
        if (key === "swanctl.conf" && !e.swanctlConf)
          e.swanctlConf = take2(parseSwanctlConf(text, cm.source.file, offset), diagnostics);
      }
    }
  }
  e.status = status;
  const any = e.ipsecConf || e.swanctlConf || status.length > 0 || e.xfrmPolicies || e.xfrmStates;
  return any ? { evidence: e, diagnostics } : undefined;
}

function take2<T>(r: { value: T; diagnostics: Diagnostic[] }, into: Diagnostic[]): T {
  into.push(...r.diagnostics);
  return r.value;
}
