/**
 * @module snapshot/kube-list-stream — Kubernetes objects from a cluster-sized `kubectl get -o json`
 * List, streamed item by item ({@link streamJsonList}). Per object only what podpath reads is kept:
 * the parsed item without `metadata.managedFields` (the API server's bookkeeping of who set which
 * field, a third to a half of a pod's JSON, read by nothing here), and the byte range of its text.
 * A field's line is found only when a finding cites it: the item's text is read again from the
 * file (a few kilobytes) and located as the whole-text reader locates it, its lines counted from the
 * item's own line. Memory grows with the objects kept, never with the file's text.
 */

import { closeSync, readSync } from "node:fs";
import { jsonLocator, offsetCiter, offsetOfStringLine } from "../evidence/json-source.ts";
import { type KubeObject, type LocatedDocument, objectOf } from "../evidence/kube-objects.ts";
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { openRegular } from "./input-file.ts";
import {
  type ByteSource,
  bytesSource,
  fdSource,
  type StreamedItem,
  streamJsonList,
} from "./json-list-stream.ts";
import type { SnapshotSource } from "./source.ts";

/**
 * JSON files of `cluster/` at least this big are streamed (smaller ones are read whole, which
 * also reads several documents one after another and cites each line with its text).
 */
export const STREAM_FROM = 8 << 20;

/**
 * The objects of a big JSON List in the snapshot, streamed; undefined when the file is small, is
 * not a JSON object, or is not a List (the caller then reads it whole, within the text limit).
 */
export function streamClusterFile(
  source: SnapshotSource,
  rel: string,
  streamFrom = STREAM_FROM,
): Parsed<KubeObject[]> | undefined {
  const size = source.sizeOf?.(rel);
  if (size === undefined || size < streamFrom) return undefined;
  const disk = source.diskPath(rel);
  if (disk === undefined) {
    const bytes = source.readBytes(rel);
    return readKubeListStream(bytesSource(bytes), rel, (a, b) => bytes.subarray(a, b));
  }
  const { fd, size: opened } = openRegular(disk, rel);
  try {
    return readKubeListStream(fdSource(fd, opened, readSync), rel, (a, b) => {
      const again = openRegular(disk, rel);
      try {
        const out = Buffer.allocUnsafe(b - a);
        let off = 0;
        while (off < out.length) {
          const n = readSync(again.fd, out, off, out.length - off, a + off);
          if (n === 0) break;
          off += n;
        }
        return out.subarray(0, off);
      } finally {
        closeSync(again.fd);
      }
    });
  } finally {
    closeSync(fd);
  }
}

type Json = Record<string, unknown>;
const isRecord = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Items whose text was read again for a citation, kept for the next ones (findings cite a few). */
const LOCATED_CACHE = 16;

/** Drops what podpath never reads from an object, to keep a cluster's objects in memory. */
export function pruneObject(value: Json): Json {
  const meta = value["metadata"];
  if (isRecord(meta) && "managedFields" in meta) delete meta["managedFields"];
  return value;
}

/** One item's text read again, with its locator and citer (lines counted from the file's start). */
interface ItemText {
  readonly find: ReturnType<typeof jsonLocator>["find"];
  readonly text: string;
  readonly cite: (offset: number) => SourceRef;
}

/**
 * Reads the List in `src` (the snapshot file `file`) as objects. `reread(start, end)` gives the
 * file's bytes again for a citation. Undefined when the file is not a JSON object at its root
 * (the caller reads it whole, as any other document).
 */
export function readKubeListStream(
  src: ByteSource,
  file: string,
  reread: (start: number, end: number) => Uint8Array,
): Parsed<KubeObject[]> | undefined {
  const diagnostics: Diagnostic[] = [];
  const items: StreamedItem[] = [];
  const r = streamJsonList(
    src,
    (item) => {
      if (isRecord(item.value)) pruneObject(item.value);
      items.push(item);
    },
    (p) =>
      diagnostics.push({
        code: "JSON_SYNTAX",
        severity: "error",
        message: p.message,
        source: { file, line: p.line, col: p.col },
      }),
  );
  if (!r.isList) return undefined;
  if (r.problem) {
    diagnostics.push({
      code: "JSON_SYNTAX",
      severity: "error",
      message: `${r.problem.message} (byte ${r.problem.offset})`,
      source: { file, line: r.problem.line, col: r.problem.col },
    });
  }
  const start: SourceRef = { file, line: 1 };
  const kind = typeof r.members.get("kind") === "string" ? String(r.members.get("kind")) : "";
  const apiVersion = r.members.get("apiVersion");
  if (!r.members.has("items") && items.length === 0 && !kind.endsWith("List")) {
    // one object, not a List: read as the whole-text reader reads one
    return undefined;
  }
  const inherited =
    kind !== "List" && kind.endsWith("List") && typeof apiVersion === "string"
      ? { apiVersion, kind: kind.slice(0, -"List".length) }
      : undefined;

  const cache = new Map<number, ItemText>();
  const textOf = (item: StreamedItem): ItemText => {
    const hit = cache.get(item.start);
    if (hit) return hit;
    const text = Buffer.from(reread(item.start, item.end)).toString("utf8");
    const local = offsetCiter(text, file);
    const cite = (offset: number): SourceRef => {
      const ref = local(offset);
      // lines of the item's text are counted from the line it starts on
      return {
        ...ref,
        line: ref.line + item.line - 1,
        ...(ref.col !== undefined && ref.line === 1 ? { col: ref.col + item.col - 1 } : {}),
      };
    };
    const entry = { find: jsonLocator(text).find, text, cite };
    if (cache.size >= LOCATED_CACHE) cache.delete(cache.keys().next().value as number);
    cache.set(item.start, entry);
    return entry;
  };

  const objects: KubeObject[] = [];
  for (const item of items) {
    const at: SourceRef = { file, line: item.line, col: item.col };
    if (!isRecord(item.value)) {
      diagnostics.push({
        code: "KUBE_NOT_OBJECT",
        severity: "error",
        message: `items[${item.index}] of the ${kind || "List"} is not a mapping; expected a Kubernetes object`,
        source: at,
      });
      continue;
    }
    const doc: LocatedDocument = {
      value: item.value,
      locate: (path) => {
        if (path.length === 0) return at;
        const t = textOf(item);
        const spot = t.find(path);
        if (!spot) return undefined;
        // Collections and nulls are cited at their key, other values where they are written.
        const c = t.text[spot.value];
        const atKey = c === "{" || c === "[" || c === "n";
        return t.cite(atKey && spot.key !== undefined ? spot.key : spot.value);
      },
      locateInString: (path, lineWithin) => {
        const t = textOf(item);
        const spot = t.find(path);
        if (!spot || t.text[spot.value] !== '"' || !Number.isInteger(lineWithin) || lineWithin < 1)
          return undefined;
        const off = offsetOfStringLine(t.text, spot.value, lineWithin - 1);
        return off === undefined ? undefined : t.cite(off);
      },
    };
    const obj = objectOf(doc, [], item.value, inherited, start, diagnostics);
    if (obj) objects.push(obj);
  }
  return { value: objects, diagnostics };
}
