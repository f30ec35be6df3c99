/**
 * @module cli/read-summary — one line saying what a snapshot held, for `-v` (`io.verbose`): the
 * objects, the nodes and pods with evidence, captures, probes and files that fit no place.
 */
import type { Snapshot } from "../snapshot/load.ts";

const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

export function snapshotSummary(snap: Snapshot): string {
  return (
    `read ${snap.name}: ${count(snap.objects.length, "object")}, ` +
    `${count(snap.nodes.size, "node")} and ${count(snap.pods.size, "pod")} with evidence, ` +
    `${count(snap.captures.length, "capture")}, ${count(snap.probes.length, "probe transcript")}, ` +
    `${count(snap.remoteFiles.length, "remote site file")}, ` +
    `${count(snap.unknownFiles.length, "file")} in no place of the layout, ` +
    `${count(snap.diagnostics.length, "reading diagnostic")}`
  );
}
