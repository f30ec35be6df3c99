/**
 * @module cases — the registry: every case, in the order `diagnose` asks them (a case that reads
 * the others' answers comes after them). The compiler checks that every finding id belongs to
 * exactly one case; `cases.test.ts` checks that each is decided in exactly one file of its folder.
 */
import type { FindingId } from "../model/types.ts";
import type { Case } from "./case.ts";
import { evidenceCase } from "./evidence/index.ts";
import { masqueradeCase } from "./masquerade/index.ts";
import { vpnCase } from "./vpn/index.ts";

export const CASES = [masqueradeCase, vpnCase, evidenceCase] as const satisfies readonly Case[];

type IdsOf<C> = C extends { readonly findingIds: readonly (infer I)[] } ? I : never;
type Owned = IdsOf<(typeof CASES)[number]>;
/** Ids owned by a case and by a later one. */
type Twice<T extends readonly unknown[]> = T extends readonly [infer H, ...infer R]
  ? (IdsOf<H> & IdsOf<R[number]>) | Twice<R>
  : never;

// A finding id with no case, or with two, fails to compile here.
const everyIdHasACase: [Exclude<FindingId, Owned>] extends [never]
  ? true
  : { readonly noCase: Exclude<FindingId, Owned> } = true;
const noIdHasTwo: [Twice<typeof CASES>] extends [never]
  ? true
  : { readonly twoCases: Twice<typeof CASES> } = true;
void everyIdHasACase;
void noIdHasTwo;

/** The case that decides `id`. */
export function caseOf(id: FindingId): (typeof CASES)[number] {
  const c = CASES.find((x) => (x.findingIds as readonly FindingId[]).includes(id));
  if (c === undefined) throw new Error(`finding id ${id} belongs to no case`);
  return c;
}
