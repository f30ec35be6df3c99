/**
 * @module cases/vpn/plan-nat — the NAT rules a VPN pod's start scripts install, read from the
 * ConfigMaps of its namespace (the chart's `configure.sh` runs `iptables -t nat -A POSTROUTING -s
 * 10.240.0.0/255.255.0.0 -o eth0 -j MASQUERADE`): which of them source-NATs the client pool, with
 * the line of the script that adds it. Pure.
 */
import { networkAndMask } from "../../agents/openvpn/server-config.ts";
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { SourceRef } from "../../model/types.ts";
import { type Cidr, contains } from "../../net/cidr.ts";

/** A POSTROUTING MASQUERADE/SNAT rule written in a script, and where. */
export interface ScriptNatRule {
  readonly configMap: string;
  readonly key: string;
  /** The script line as written (trimmed). */
  readonly text: string;
  readonly target: "MASQUERADE" | "SNAT";
  /** The `-s` block; undefined when the rule has none (it matches every source). */
  readonly source?: Cidr;
  readonly at: SourceRef;
}

const NAT_LINE =
  /\biptables\b(?=.*(?:-t\s+nat|--table[=\s]+nat))(?=.*-(?:A|I)\s+POSTROUTING)(?=.*-j\s+(MASQUERADE|SNAT)\b)/;

/** `10.8.0.0/24`, `10.240.0.0/255.255.0.0` or a bare address; undefined for anything else. */
function blockOf(text: string): Cidr | undefined {
  const [net, mask] = text.split("/", 2);
  return net === undefined ? undefined : networkAndMask(net, mask);
}

/** Every source-NAT rule in the scripts of the ConfigMaps of `namespace`. */
export function scriptNatRules(objects: readonly KubeObject[], namespace: string): ScriptNatRule[] {
  const out: ScriptNatRule[] = [];
  for (const cm of objects) {
    if (cm.kind !== "ConfigMap" || (cm.namespace ?? "default") !== namespace) continue;
    const data = cm.raw["data"];
    if (typeof data !== "object" || data === null) continue;
    for (const [key, value] of Object.entries(data as Record<string, unknown>)) {
      if (typeof value !== "string") continue;
      value.split("\n").forEach((line, i) => {
        const code = line.replace(/(^|\s)#.*$/, "").trim();
        const m = NAT_LINE.exec(code);
        if (!m) return;
        const src = /(?:^|\s)(!\s+)?(?:-s|--source)[=\s]+(\S+)/.exec(code);
        if (src?.[1]) return; // `! -s X`: every source but X
        const source = src?.[2] === undefined ? undefined : blockOf(src[2]);
        if (src?.[2] !== undefined && source === undefined) return; // templated or unreadable
        out.push({
          configMap: cm.name,
          key,
          text: code,
          target: m[1] as "MASQUERADE" | "SNAT",
          ...(source ? { source } : {}),
          at: cm.locateInString(["data", key], i + 1) ??
            cm.locate(["data", key]) ?? { file: cm.source.file, line: cm.source.line },
        });
      });
    }
  }
  return out;
}

/** The first script rule that source-NATs every address of `pool`. */
export function scriptNatFor(
  objects: readonly KubeObject[],
  namespace: string,
  pool: Cidr,
): ScriptNatRule | undefined {
  return scriptNatRules(objects, namespace).find(
    (r) => r.source === undefined || contains(r.source, pool),
  );
}
