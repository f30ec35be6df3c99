/**
 * @module agents/ip-masq-agent/config-volume — the files the agent's container finds in its config
 * directory, laid out from its DaemonSet the way the kubelet lays out ConfigMap volumes: a
 * `configMap` volume (every data and binaryData key, or only its `items`), a `projected` volume
 * (its `configMap` sources in order; a later source's file replaces an earlier one at the same
 * path), `optional` (a missing ConfigMap or key is skipped; without it the pod does not start),
 * `subPath` mounts of one file. Each file keeps the ConfigMap line its content is written on.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { Diagnostic, SourceRef } from "../../model/types.ts";
import type { Locate } from "./config.ts";

/** One file of the config directory and the ConfigMap key it comes from. */
export interface VolumeFile {
  /** The top-level name in the directory (a nested item path makes a directory of its first part). */
  readonly name: string;
  /** The path inside the volume, as the item names it. */
  readonly path: string;
  readonly isDirectory: boolean;
  readonly configMap: string;
  readonly namespace?: string;
  readonly key: string;
  /** The ConfigMap object, when the snapshot has it. */
  readonly object?: KubeObject;
  readonly content?: string | Uint8Array;
  /** Maps a byte offset of the content to the ConfigMap line it is written on. */
  readonly locate?: Locate;
  /** Where the DaemonSet projects it (the item, or the volume's configMap source). */
  readonly declaredAt: SourceRef;
}

export interface ConfigDirLayout {
  /** The volume mounted at the directory; undefined when nothing is mounted there. */
  readonly volume?: string;
  readonly mountedAt?: SourceRef;
  /** Files by their top-level name, in the directory's (sorted) order. */
  readonly files: readonly VolumeFile[];
  /** ConfigMaps the volume names, in order, with whether the snapshot has them. */
  readonly configMaps: readonly {
    readonly name: string;
    readonly optional: boolean;
    readonly found: boolean;
    readonly at: SourceRef;
  }[];
  /** Why the kubelet would not start the pod (a ConfigMap or key that is not optional is absent). */
  readonly podBlocked?: string;
  readonly diagnostics: readonly Diagnostic[];
}

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const trimSlash = (p: string) => (p.length > 1 ? p.replace(/\/+$/, "") : p);

/** A locator into `data.<key>` of a ConfigMap (the value's lines, looked up once each). */
export function dataKeyLocator(cm: KubeObject, key: string, content: string): Locate {
  const bytes = Buffer.from(content, "utf8");
  const fallback = cm.locate(["data", key]) ?? cm.source;
  const memo = new Map<number, SourceRef>();
  return (offset) => {
    let line = 1;
    for (let i = 0; i < Math.min(offset, bytes.length); i++) if (bytes[i] === 0x0a) line++;
    const known = memo.get(line);
    if (known) return known;
    const ref = cm.locateInString(["data", key], line) ?? fallback;
    memo.set(line, ref);
    return ref;
  };
}

interface Source {
  readonly name: string;
  readonly optional: boolean;
  readonly items?: readonly { key: string; path: string; at: SourceRef }[];
  readonly at: SourceRef;
}

/** The configMap sources of a volume (one for `configMap`, each `configMap` of `projected`). */
function sourcesOf(
  ds: KubeObject,
  volume: Rec,
  base: readonly (string | number)[],
  diagnostics: Diagnostic[],
): Source[] {
  const at = (p: readonly (string | number)[]) => ds.locate([...p]) ?? ds.source;
  const one = (cm: Rec, p: readonly (string | number)[]): Source => {
    const items = Array.isArray(cm["items"])
      ? arr(cm["items"]).flatMap((it, i) =>
          isRec(it) && str(it["key"]) !== undefined
            ? [
                {
                  key: str(it["key"])!,
                  path: str(it["path"]) ?? str(it["key"])!,
                  at: at([...p, "items", i]),
                },
              ]
            : [],
        )
      : undefined;
    return {
      name: str(cm["name"]) ?? "",
      optional: cm["optional"] === true,
      ...(items ? { items } : {}),
      at: at([...p, "name"]),
    };
  };
  if (isRec(volume["configMap"])) return [one(volume["configMap"], [...base, "configMap"])];
  const projected = volume["projected"];
  if (!isRec(projected)) return [];
  const out: Source[] = [];
  for (const [i, s] of arr(projected["sources"]).entries()) {
    const p = [...base, "projected", "sources", i];
    if (isRec(s) && isRec(s["configMap"])) out.push(one(s["configMap"], [...p, "configMap"]));
    else if (isRec(s) && ("name" in s || "items" in s) && !("secret" in s)) {
      diagnostics.push({
        code: "IPMASQ_PROJECTION_SHAPE",
        severity: "warning",
        message: `projected source ${i} has name/items beside "configMap:" instead of under it (an indentation slip): it names no ConfigMap, and the API server refuses a source with no projection`,
        source: at(p),
      });
    }
  }
  return out;
}

/**
 * The files the container at `containerIndex` of DaemonSet `ds` sees in `dir`, from the
 * ConfigMaps in `objects` (same namespace as the DaemonSet).
 * @example configDirLayout(ds, 0, objects, "/etc/config").files.map((f) => f.name)
 */
export function configDirLayout(
  ds: KubeObject,
  containerIndex: number,
  objects: readonly KubeObject[],
  dir: string,
): ConfigDirLayout {
  const diagnostics: Diagnostic[] = [];
  const podSpec = (ds.raw["spec"] as Rec | undefined)?.["template"] as Rec | undefined;
  const spec = isRec(podSpec?.["spec"]) ? (podSpec["spec"] as Rec) : {};
  const container = arr(spec["containers"])[containerIndex];
  const mounts = isRec(container) ? arr(container["volumeMounts"]) : [];
  const want = trimSlash(dir);
  const mi = mounts.findIndex(
    (m) => isRec(m) && trimSlash(str(m["mountPath"]) ?? "") === want && !m["subPath"],
  );
  // one file mounted by subPath (`mountPath: /etc/config/ip-masq-agent`, `subPath: config`)
  const subMounts = mounts.flatMap((m, i) => {
    if (!isRec(m)) return [];
    const mp = trimSlash(str(m["mountPath"]) ?? "");
    const sub = str(m["subPath"]);
    if (!sub || !mp.startsWith(`${want}/`) || mp.slice(want.length + 1).includes("/")) return [];
    return [{ index: i, name: mp.slice(want.length + 1), subPath: sub, volume: str(m["name"]) }];
  });
  if (mi < 0 && subMounts.length === 0) return { files: [], configMaps: [], diagnostics };
  const volumes = arr(spec["volumes"]);
  const base = ["spec", "template", "spec"] as const;
  const mountBase = [...base, "containers", containerIndex, "volumeMounts"];
  const byName = (name: string | undefined) =>
    volumes.findIndex((v) => isRec(v) && v["name"] === name);
  const ns = ds.namespace;
  const cmOf = (name: string) =>
    objects.find(
      (o) =>
        o.kind === "ConfigMap" &&
        o.name === name &&
        (ns === undefined || o.namespace === undefined || o.namespace === ns),
    );

  const configMaps: { name: string; optional: boolean; found: boolean; at: SourceRef }[] = [];
  let podBlocked: string | undefined;
  /** The files of one volume, by path; a later source replaces an earlier file at its path. */
  const volumeFiles = (vi: number): Map<string, VolumeFile> => {
    const files = new Map<string, VolumeFile>();
    const v = volumes[vi];
    if (!isRec(v)) return files;
    for (const s of sourcesOf(ds, v, [...base, "volumes", vi], diagnostics)) {
      const cm = cmOf(s.name);
      configMaps.push({ name: s.name, optional: s.optional, found: cm !== undefined, at: s.at });
      if (!cm) {
        if (!s.optional) {
          podBlocked ??= `configmap "${s.name}" not found (the volume does not say optional: true), so the kubelet does not start the agent's pod`;
        }
        continue;
      }
      const data = isRec(cm.raw["data"]) ? (cm.raw["data"] as Rec) : {};
      const binary = isRec(cm.raw["binaryData"]) ? (cm.raw["binaryData"] as Rec) : {};
      const entries =
        s.items ??
        [...Object.keys(data), ...Object.keys(binary)].map((key) => ({
          key,
          path: key,
          at: s.at,
        }));
      for (const item of entries) {
        const text = str(data[item.key]);
        const bin = str(binary[item.key]);
        if (text === undefined && bin === undefined) {
          if (!s.optional) {
            podBlocked ??= `configmap "${s.name}" has no key "${item.key}" that the volume's items name (not optional), so the kubelet does not start the agent's pod`;
          }
          diagnostics.push({
            code: "IPMASQ_VOLUME_KEY",
            severity: "warning",
            message: `the volume projects key "${item.key}" of ConfigMap ${s.name}, which has no such key${s.optional ? " (optional: the file is simply absent)" : ""}`,
            source: item.at,
          });
          continue;
        }
        const path = item.path.replace(/^\/+/, "");
        const name = path.split("/")[0] ?? path;
        const earlier = files.get(path);
        if (earlier) {
          diagnostics.push({
            code: "IPMASQ_VOLUME_PATH_TWICE",
            severity: "warning",
            message: `${path} is projected twice: ConfigMap ${s.name} key ${item.key} replaces ${earlier.configMap} key ${earlier.key} (the kubelet writes the later source)`,
            source: item.at,
          });
        }
        const at = cm.locate([text !== undefined ? "data" : "binaryData", item.key]) ?? cm.source;
        files.set(path, {
          name,
          path,
          isDirectory: path.includes("/"),
          configMap: s.name,
          ...(cm.namespace === undefined ? {} : { namespace: cm.namespace }),
          key: item.key,
          object: cm,
          content: text ?? Buffer.from(bin!, "base64"),
          locate: text !== undefined ? dataKeyLocator(cm, item.key, text) : () => at,
          declaredAt: item.at,
        });
      }
    }
    return files;
  };

  const out = new Map<string, VolumeFile>();
  let volume: string | undefined;
  let mountedAt: SourceRef | undefined;
  if (mi >= 0) {
    const m = mounts[mi] as Rec;
    volume = str(m["name"]);
    mountedAt = ds.locate([...mountBase, mi, "mountPath"]) ?? ds.source;
    const vi = byName(volume);
    if (vi < 0) {
      diagnostics.push({
        code: "IPMASQ_VOLUME_MISSING",
        severity: "warning",
        message: `volumeMount ${volume ?? "?"} at ${dir} names no volume of the pod`,
        source: mountedAt,
      });
    } else {
      for (const f of volumeFiles(vi).values()) {
        // a directory entry appears once, named by its first path part
        if (!out.has(f.name) || !f.isDirectory) out.set(f.name, f);
      }
    }
  }
  for (const s of subMounts) {
    const vi = byName(s.volume);
    const f = vi >= 0 ? volumeFiles(vi).get(s.subPath) : undefined;
    if (f) out.set(s.name, { ...f, name: s.name, path: s.name, isDirectory: false });
  }
  const files = [...out.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return {
    ...(volume === undefined ? {} : { volume }),
    ...(mountedAt ? { mountedAt } : {}),
    files,
    configMaps,
    ...(podBlocked ? { podBlocked } : {}),
    diagnostics,
  };
}
