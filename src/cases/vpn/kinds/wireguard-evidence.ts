/**
 * @module cases/vpn/kinds/wireguard-evidence — what the WireGuard kind reads for one pod: its
 * `wg0.conf` (a file beside the pod, else a ConfigMap key of its namespace holding one), `wg show`
 * and `wg showconf` output, wg-access-server Helm values (those beside the pod first), and the
 * WireGuard image's env in the pod's workload. Pure.
 */

import {
  type AccessServerValues,
  looksLikeAccessServerValues,
  readAccessServerValues,
} from "../../../agents/wireguard/access-server-values.ts";
import {
  looksLikeWgConfig,
  parseWgConfig,
  type WgConfig,
} from "../../../agents/wireguard/config.ts";
import { type WgImageSettings, wgImageSettings } from "../../../agents/wireguard/images.ts";
import { readWgShow, type WgShow } from "../../../agents/wireguard/show.ts";
import type { KubeObject } from "../../../evidence/kube-objects.ts";
import { readYamlSource } from "../../../evidence/yaml-source.ts";
import type { Diagnostic } from "../../../model/types.ts";
import { podSpecPath } from "../durable.ts";
import type { KindPodSource } from "./kind.ts";

export interface WgEvidence {
  /** The server's wg-quick config (Address, PostUp …). */
  readonly config?: WgConfig;
  /** `wg showconf` output: the running interface's keys, port and peers. */
  readonly showconf?: WgConfig;
  readonly show?: WgShow;
  readonly values?: AccessServerValues;
}

const SHOW = /^wg-show(\.txt)?$/;
const SHOWCONF = /^wg-showconf(\.txt)?$/;

/** Is this file beside a pod WireGuard's? (`wg-show.txt`, `wg-showconf.txt`, a wg-quick config) */
export function isWireguardFile(base: string, text: string): boolean {
  if (SHOW.test(base) || SHOWCONF.test(base)) return true;
  return base.endsWith(".conf") && (/^wg\d*\.conf$/.test(base) || looksLikeWgConfig(text));
}

/** The ConfigMap names a Pod's volumes mount (`volumes[].configMap.name`, projected sources). */
function mountedConfigMaps(pod: KubeObject | undefined): Set<string> {
  const names = new Set<string>();
  const spec = pod?.raw["spec"] as { volumes?: unknown } | undefined;
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (typeof v === "object" && v !== null) {
      for (const [k, x] of Object.entries(v)) {
        const name = (x as { name?: unknown } | null)?.name;
        if (k === "configMap" && typeof name === "string") names.add(name);
        else visit(x);
      }
    }
  };
  visit(spec?.volumes);
  return names;
}

/**
 * A wg-quick config in a ConfigMap of the namespace (key `wg0.conf`, or any key holding one): one
 * the pod mounts; without the Pod's manifest, one of the namespace when it is the only pod there.
 */
function configFromConfigMaps(src: KindPodSource, diagnostics: Diagnostic[]): WgConfig | undefined {
  const { objects, namespace, name } = src;
  const pod = objects.find(
    (o) => o.kind === "Pod" && o.name === name && (o.namespace ?? "default") === namespace,
  );
  const mounted = mountedConfigMaps(pod);
  for (const cm of objects) {
    if (cm.kind !== "ConfigMap" || (cm.namespace ?? "default") !== namespace) continue;
    if (pod ? !mounted.has(cm.name) : !src.onlyPodOfNamespace) continue;
    const data = cm.raw["data"];
    if (typeof data !== "object" || data === null) continue;
    for (const [key, value] of Object.entries(data as Record<string, unknown>)) {
      if (typeof value !== "string" || !looksLikeWgConfig(value)) continue;
      const start = cm.locateInString(["data", key], 1);
      const r = parseWgConfig(value, cm.source.file, start ? start.line - 1 : cm.source.line);
      diagnostics.push(...r.diagnostics);
      return r.value;
    }
  }
  return undefined;
}

/** Reads one pod's WireGuard evidence; undefined when there is none. */
export function readWgEvidence(
  src: KindPodSource,
): { evidence: WgEvidence; diagnostics: Diagnostic[] } | undefined {
  const diagnostics: Diagnostic[] = [];
  const out: { -readonly [K in keyof WgEvidence]?: WgEvidence[K] } = {};
  for (const f of src.files) {
    const base = f.file.split("/").at(-1) ?? "";
    if (SHOW.test(base)) {
      const r = readWgShow(f.text, f.file);
      diagnostics.push(...r.diagnostics);
      out.show = r.value;
    } else if (SHOWCONF.test(base)) {
      const r = parseWgConfig(f.text, f.file);
      diagnostics.push(...r.diagnostics);
      out.showconf = r.value;
    } else {
      const r = parseWgConfig(f.text, f.file);
      diagnostics.push(...r.diagnostics);
      out.config = r.value;
    }
  }
  if (!out.config) {
    const fromCm = configFromConfigMaps(src, diagnostics);
    if (fromCm) out.config = fromCm;
  }
  const beside = `pods/${src.namespace}/${src.name}/`;
  const values = [...src.values].sort(
    (a, b) => Number(b.file.startsWith(beside)) - Number(a.file.startsWith(beside)),
  );
  for (const v of values) {
    const { source } = readYamlSource(v.text, v.file);
    if (!source.documents.some((d) => d.ok && looksLikeAccessServerValues(d.value))) continue;
    const r = readAccessServerValues(v.text, v.file);
    diagnostics.push(...r.diagnostics);
    out.values = r.value;
    break;
  }
  if (!out.config && !out.show && !out.showconf && !out.values) {
    // a pod folder holding only values of another chart is not WireGuard's
    return undefined;
  }
  return { evidence: out, diagnostics };
}

/** The first container of a workload (or Pod) that runs a known WireGuard image, with its settings. */
export function imageSettingsOf(workload: KubeObject | undefined): WgImageSettings | undefined {
  if (!workload) return undefined;
  const path = podSpecPath(workload.kind);
  let spec: unknown = workload.raw;
  for (const p of path) {
    spec =
      typeof spec === "object" && spec !== null
        ? (spec as Record<string | number, unknown>)[p]
        : undefined;
  }
  const containers = (spec as { containers?: unknown } | undefined)?.containers;
  if (!Array.isArray(containers)) return undefined;
  for (let i = 0; i < containers.length; i++) {
    const s = wgImageSettings(workload, [...path, "containers", i]);
    if (s) return s;
  }
  return undefined;
}
