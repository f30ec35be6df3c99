/**
 * @module evidence/remote-site — podpath's own `remote/*.yaml` files: what podpath cannot see on
 * the far side (the site's prefixes, what it routes back, VPN traffic selectors, allowlists),
 * validated with every CIDR parsed strictly and every entry citing its line.
 */
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { type Cidr, formatCidr, tryParseCidr } from "../net/cidr.ts";
import { lazySchema } from "./lazy-zod.ts";
import { type LocatedValue, parseLenient } from "./lenient-parse.ts";
import { readYamlSource, type YamlPath, type YamlSource } from "./yaml-source.ts";

export const VPN_KINDS = [
  "cloud-vpn-classic",
  "cloud-vpn-ha",
  "ipsec",
  "wireguard",
  "openvpn",
] as const;
export type VpnKind = (typeof VPN_KINDS)[number];

export interface CidrEntry {
  readonly cidr: Cidr;
  readonly source: SourceRef;
}

export interface PortEntry {
  readonly protocol: "tcp" | "udp" | "sctp" | "icmp" | "all";
  /** Inclusive port range; absent for icmp/all. */
  readonly from?: number;
  readonly to?: number;
  readonly source: SourceRef;
}

export interface Allowlist {
  readonly name: string;
  readonly sources: readonly CidrEntry[];
  readonly destinations: readonly CidrEntry[];
  /** Empty: every port. */
  readonly ports: readonly PortEntry[];
  readonly source: SourceRef;
}

export interface RemoteSite {
  readonly name: string;
  readonly prefixes: readonly CidrEntry[];
  /** Undefined when the file does not say (unknown); empty when the site routes nothing back. */
  readonly routesBack?: readonly CidrEntry[];
  readonly vpn?: {
    readonly kind: VpnKind;
    readonly localTrafficSelectors?: readonly CidrEntry[];
    readonly remoteTrafficSelectors?: readonly CidrEntry[];
    readonly source: SourceRef;
  };
  readonly allowlists: readonly Allowlist[];
  readonly source: SourceRef;
}

const SiteSchema = lazySchema((z) => {
  const cidrList = z.array(z.string());
  return z.strictObject({
    kind: z.literal("RemoteSite"),
    name: z.string().min(1),
    prefixes: cidrList.optional(),
    routesBack: cidrList.optional(),
    vpn: z
      .strictObject({
        kind: z.enum(VPN_KINDS),
        localTrafficSelectors: cidrList.optional(),
        remoteTrafficSelectors: cidrList.optional(),
      })
      .optional(),
    allowlists: z
      .array(
        z.strictObject({
          name: z.string().min(1),
          sources: cidrList.optional(),
          destinations: cidrList.optional(),
          ports: z.array(z.string()).optional(),
        }),
      )
      .optional(),
  });
});

/**
 * Reads a `remote/*.yaml` file (one site per YAML document). Invalid entries become diagnostics at
 * their line and are left out; unknown keys are warnings (`UNKNOWN_KEY`), so a newer file still reads.
 *
 * @example
 *   const { value } = readRemoteSites(text, "remote/onprem-dc1.yaml");
 *   value[0]?.routesBack?.map((e) => formatCidr(e.cidr)) // ["10.128.0.0/20"]
 */
export function readRemoteSites(text: string, file: string): Parsed<RemoteSite[]> {
  const { source, diagnostics } = readYamlSource(text, file);
  const sites: RemoteSite[] = [];
  for (const d of source.documents) {
    if (!d.ok || d.value === null || d.value === undefined) continue;
    const root = d.doc.contents;
    const doc: LocatedValue = {
      raw: d.value,
      locate: (p) => source.locate(root, p),
      source: source.locate(root, []) ?? source.refAt(0),
      label: `remote site in ${file}`,
    };
    const site = readSite(doc, source, root, diagnostics);
    if (site) sites.push(site);
  }
  if (sites.length === 0 && !diagnostics.some((d) => d.severity === "error")) {
    diagnostics.push({
      code: "REMOTE_EMPTY",
      severity: "warning",
      message: "no RemoteSite in this file; expected `kind: RemoteSite` with a name",
      source: { file, line: 1 },
    });
  }
  return { value: sites, diagnostics };
}

function readSite(
  doc: LocatedValue,
  source: YamlSource,
  root: unknown,
  diagnostics: Diagnostic[],
): RemoteSite | undefined {
  const checked = parseLenient(SiteSchema(), doc, diagnostics, "REMOTE_SCHEMA");
  if (!checked) return undefined;
  const at = (p: YamlPath) => source.locate(root, p) ?? doc.source;
  const cidrs = (list: readonly string[] | undefined, base: YamlPath): CidrEntry[] | undefined =>
    list?.flatMap((text, i) => {
      const ref = at([...base, i]);
      const r = tryParseCidr(text, { strictHostBits: true });
      if ("error" in r) {
        const loose = tryParseCidr(text);
        diagnostics.push({
          code: "REMOTE_CIDR",
          severity: "error",
          message: `${base.join(".")}[${i}] ${JSON.stringify(text)}: ${r.error}; expected a CIDR such as ${
            "cidr" in loose ? formatCidr(loose.cidr) : "10.20.0.0/16"
          }. The entry was left out`,
          source: ref,
        });
        return [];
      }
      return [{ cidr: r.cidr, source: ref }];
    });
  const vpn = checked.vpn;
  return {
    name: checked.name,
    prefixes: cidrs(checked.prefixes, ["prefixes"]) ?? [],
    ...(checked.routesBack ? { routesBack: cidrs(checked.routesBack, ["routesBack"]) ?? [] } : {}),
    ...(vpn
      ? {
          vpn: {
            kind: vpn.kind,
            ...(vpn.localTrafficSelectors
              ? {
                  localTrafficSelectors:
                    cidrs(vpn.localTrafficSelectors, ["vpn", "localTrafficSelectors"]) ?? [],
                }
              : {}),
            ...(vpn.remoteTrafficSelectors
              ? {
                  remoteTrafficSelectors:
                    cidrs(vpn.remoteTrafficSelectors, ["vpn", "remoteTrafficSelectors"]) ?? [],
                }
              : {}),
            source: at(["vpn"]),
          },
        }
      : {}),
    allowlists: (checked.allowlists ?? []).map((a, i) => {
      const base: YamlPath = ["allowlists", i];
      return {
        name: a.name,
        sources: cidrs(a.sources, [...base, "sources"]) ?? [],
        destinations: cidrs(a.destinations, [...base, "destinations"]) ?? [],
        ports: (a.ports ?? []).flatMap((p, j) => {
          const ref = at([...base, "ports", j]);
          const port = parsePort(p);
          if (typeof port === "string") {
            diagnostics.push({
              code: "REMOTE_PORT",
              severity: "error",
              message: `allowlists[${i}].ports[${j}] ${JSON.stringify(p)}: ${port}`,
              source: ref,
            });
            return [];
          }
          return [{ ...port, source: ref }];
        }),
        source: at(base),
      };
    }),
    source: doc.source,
  };
}

/** `tcp/5432`, `udp/53`, `tcp/8000-8080`, `icmp`, `all`; a string explains what is wrong. */
export function parsePort(text: string): Omit<PortEntry, "source"> | string {
  const expected =
    "expected PROTOCOL/PORT (tcp/5432), PROTOCOL/FROM-TO (tcp/8000-8080), icmp or all";
  const m = /^(tcp|udp|sctp)\/(\d{1,5})(?:-(\d{1,5}))?$/.exec(text);
  if (m) {
    const from = Number(m[2]);
    const to = m[3] === undefined ? from : Number(m[3]);
    if (from < 1 || to > 65535 || from > to)
      return `port range ${from}-${to} is outside 1-65535 or reversed; ${expected}`;
    return { protocol: m[1] as "tcp" | "udp" | "sctp", from, to };
  }
  if (text === "icmp" || text === "all") return { protocol: text };
  return expected;
}
