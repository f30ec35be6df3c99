/**
 * @module path/step-list — the steps of a packet part-way through the node, as a list that shares
 * its beginning with the packets it forked from: a fork costs nothing, and each outcome's steps
 * are made into an array once, at its end.
 */
import type { PathStep } from "./path-types.ts";

/** The last step and the ones before it (undefined: none yet). */
export type StepList = { readonly step: PathStep; readonly prev: StepList } | undefined;

/** The list with `step` after the others. */
export function push(list: StepList, step: PathStep): StepList {
  return { step, prev: list };
}

/** The list with `steps` after the others, in order. */
export function pushAll(list: StepList, steps: readonly PathStep[]): StepList {
  let l = list;
  for (let i = 0; i < steps.length; i++) l = { step: steps[i]!, prev: l };
  return l;
}

/** The steps in order, first to last. */
export function toArray(list: StepList): PathStep[] {
  let n = 0;
  for (let l = list; l !== undefined; l = l.prev) n++;
  const out = new Array<PathStep>(n);
  for (let l = list; l !== undefined; l = l.prev) out[--n] = l.step;
  return out;
}
