/**
 * @module cases/masquerade — case A, "the node reaches on-prem, the pod does not": who rewrites a
 * pod's source address when it leaves its node (today: ip-masq-agent and the rules it installs),
 * what the far side sees, and the wire that proves it. What it reads of a snapshot is `model.ts`,
 * built once per snapshot; its plan is `plan.ts`, its proof for `verify` is `proof.ts` (asked
 * through `proof-case.ts`).
 */
import { type Case, idsOfArea } from "../case.ts";
import { explainMasquerade } from "./explain.ts";

export const masqueradeCase = {
  name: "masquerade",
  summary:
    "SNAT exception lists: which rule keeps a pod's source address toward the far side, and whether the far side routes it back",
  findingIds: idsOfArea("masq"),
  diagnose: (snap, opts) => explainMasquerade(snap, opts),
  proof: async (before, after, opts) =>
    (await import("./proof-case.ts")).masqueradeProof(before, after, opts),
} as const satisfies Case;
