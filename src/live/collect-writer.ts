/**
 * @module live/collect-writer — writes a snapshot folder on disk (the explicit I/O of collect):
 * files are created beneath the root only, never outside it.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import type { SnapshotWriter } from "./collect-types.ts";

/** A writer into `root`; a path that would leave the root (`..`, absolute) is refused. */
export function folderWriter(root: string): SnapshotWriter {
  const base = resolve(root);
  return {
    async write(rel, data) {
      const target = resolve(join(base, rel));
      if (target !== base && !target.startsWith(base + sep)) {
        throw new Error(`refusing to write outside the snapshot: ${JSON.stringify(rel)}`);
      }
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, data);
    },
  };
}

/** A writer into memory, for tests and for callers that post-process. */
export function memoryWriter(): SnapshotWriter & { readonly files: Map<string, Buffer> } {
  const files = new Map<string, Buffer>();
  return {
    files,
    async write(rel, data) {
      files.set(rel, Buffer.from(data));
    },
  };
}
