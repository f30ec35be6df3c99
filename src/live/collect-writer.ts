/**
 * @module live/collect-writer — writes a snapshot folder on disk (the explicit I/O of collect):
 * files are created beneath the root only, never outside it, never through a link, and never
 * over a file already there (snapshot/out-folder).
 */

import { writeBeneathCreating } from "../snapshot/out-folder.ts";
import type { SnapshotWriter } from "./collect-types.ts";

/** A writer into `root`; a path that would leave the root (`..`, absolute, a link) is refused. */
export function folderWriter(root: string): SnapshotWriter {
  return {
    async write(rel, data) {
      writeBeneathCreating(root, rel, data);
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
