/**
 * @module cli/commands/plan-masquerade-replay — `plan masquerade --replay`: the plan's rules proved
 * on this machine's kernel (`cases/masquerade/plan-replay`). Needs root; without it, says so on
 * stderr and proves nothing.
 */

import type { MasqueradePlan } from "../../cases/masquerade/plan.ts";
import type { ReplayLine } from "../../cases/masquerade/plan-render.ts";
import { replayMasqueradePlan } from "../../cases/masquerade/plan-replay.ts";
import { labUnavailableReason } from "../../lab/netns.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { Io } from "../io.ts";

export async function replayPlan(
  snap: Snapshot,
  plan: MasqueradePlan,
  io: Io,
): Promise<ReplayLine[]> {
  const why = labUnavailableReason();
  if (why) {
    io.err(`podpath: --replay skipped: ${why}\n`);
    return [];
  }
  return replayMasqueradePlan(snap, plan);
}
