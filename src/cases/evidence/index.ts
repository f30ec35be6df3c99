/**
 * @module cases/evidence — evidence read but placed by no other case: a node dump with no pod to
 * trace, probes without the VPN pod, a destination of the other address family. Runs after the
 * other cases and reads their answers.
 */
import { type Case, idsOfArea } from "../case.ts";
import { unplacedFindings } from "./unplaced.ts";

export const evidenceCase = {
  name: "evidence",
  summary: "evidence read but placed by no case, with the file or flag that would place it",
  findingIds: idsOfArea("evidence"),
  diagnose: async (snap, opts, earlier) => ({
    ...unplacedFindings(snap, opts, earlier),
    paths: [],
    missing: [],
  }),
} as const satisfies Case;
