/**
 * @module agents/wireguard/access-server-values — Helm values of the wg-access-server chart
 * (`helm get values RELEASE`): its inline config (`config:`, the server's config.yaml) holds
 * `vpn.cidr` (the client pool, default 10.44.0.0/24), `vpn.allowedIPs` (what clients route into
 * the tunnel, default 0.0.0.0/0, ::/0) and `vpn.nat44` (the server masquerades the pool itself,
 * default true) — wg-access-server docs/2-configuration.md. A top-level `vpn:` is read the same.
 */

import { readYamlSource } from "../../evidence/yaml-source.ts";
import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";
import { redactKeys } from "./config.ts";

export interface AccessServerValues {
  readonly file: string;
  readonly pool?: Located<Cidr>;
  readonly allowedIps: readonly Located<Cidr>[];
  readonly nat44?: Located<boolean>;
}

function rec(v: unknown): Record<string, unknown> | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

/** The `vpn:` block of the values, and the path to it. */
function vpnBlock(v: unknown): { path: string[]; vpn: Record<string, unknown> } | undefined {
  const inConfig = rec(rec(rec(v)?.["config"])?.["vpn"]);
  if (inConfig) return { path: ["config", "vpn"], vpn: inConfig };
  const top = rec(rec(v)?.["vpn"]);
  return top ? { path: ["vpn"], vpn: top } : undefined;
}

/** True when a YAML document looks like wg-access-server values (`config.vpn` or `wireguard.config`). */
export function looksLikeAccessServerValues(value: unknown): boolean {
  const v = rec(value);
  if (!v || ("kind" in v && "apiVersion" in v)) return false;
  return vpnBlock(v) !== undefined || rec(rec(v["wireguard"])?.["config"]) !== undefined;
}

/** Reads the values file; a malformed `vpn.cidr` or `vpn.allowedIPs` entry is a warning. */
export function readAccessServerValues(text: string, file: string): Parsed<AccessServerValues> {
  const { source, diagnostics: yamlDiags } = readYamlSource(text, file);
  // the values may hold wireguard.config.privateKey: a quoted line never shows it
  const diagnostics: Diagnostic[] = yamlDiags.map((d) => ({
    ...d,
    message: redactKeys(d.message),
    ...(d.source
      ? {
          source: {
            ...d.source,
            ...(d.source.text === undefined ? {} : { text: redactKeys(d.source.text) }),
          },
        }
      : {}),
  }));
  const doc = source.documents.find((d) => d.ok && looksLikeAccessServerValues(d.value));
  const block = vpnBlock(doc?.value);
  const at = (path: (string | number)[]): SourceRef =>
    (doc && source.locate(doc.doc.contents, path)) ?? { file, line: doc?.line ?? 1 };
  const out: { pool?: Located<Cidr>; allowedIps: Located<Cidr>[]; nat44?: Located<boolean> } = {
    allowedIps: [],
  };
  if (block) {
    const bad = (key: string, expected: string) =>
      diagnostics.push({
        code: "WIREGUARD_VALUES",
        severity: "warning",
        message: `${[...block.path, key].join(".")} is ${JSON.stringify(block.vpn[key])}; expected ${expected}`,
        source: at([...block.path, key]),
      });
    const cidr = block.vpn["cidr"];
    if (typeof cidr === "string") {
      const r = tryParseCidr(cidr.trim());
      if ("cidr" in r) out.pool = { value: r.cidr, source: at([...block.path, "cidr"]) };
      else if (cidr.trim() !== "0") bad("cidr", "a prefix such as 10.44.0.0/24 (or 0: no IPv4)");
    } else if (cidr !== undefined) bad("cidr", "a prefix such as 10.44.0.0/24");
    const allowed = block.vpn["allowedIPs"];
    const list = Array.isArray(allowed)
      ? allowed.map(String)
      : typeof allowed === "string"
        ? allowed.split(",")
        : [];
    list.forEach((a, i) => {
      const r = tryParseCidr(a.trim());
      const where = at([...block.path, "allowedIPs", ...(Array.isArray(allowed) ? [i] : [])]);
      if ("cidr" in r) out.allowedIps.push({ value: r.cidr, source: where });
      else bad("allowedIPs", "prefixes such as 10.96.0.0/12");
    });
    const nat = block.vpn["nat44"];
    if (typeof nat === "boolean") out.nat44 = { value: nat, source: at([...block.path, "nat44"]) };
  }
  return {
    value: {
      file,
      ...(out.pool ? { pool: out.pool } : {}),
      allowedIps: out.allowedIps,
      ...(out.nat44 ? { nat44: out.nat44 } : {}),
    },
    diagnostics,
  };
}
