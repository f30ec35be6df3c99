/**
 * @module cases — the registry: every case, in the order `diagnose` asks them (a case that reads
 * the others' answers comes after them). Each entry names its case and its finding ids, says from
 * the snapshot alone (importing nothing) whether the case has anything to read, and loads the case
 * when asked: `diagnose` loads only the cases a snapshot has evidence for. The compiler checks that
 * every finding id belongs to exactly one case; `cases.test.ts` checks that each is decided in
 * exactly one file of its folder, and that each entry's ids and name are its case's.
 */
import type { FindingId } from "../model/types.ts";
import type { Snapshot } from "../snapshot/load.ts";
import { type Case, idsOfArea } from "./case.ts";
import { vpnClaims } from "./vpn/claims.ts";

/** A case as the registry lists it, before it is loaded. */
export interface CaseEntry {
  /** The case's name (its folder). */
  readonly name: string;
  readonly findingIds: readonly FindingId[];
  /**
   * Might the case find anything in `snap`? False only when its `diagnose` would answer nothing
   * (no finding, path, missing evidence or diagnostic): the case is then neither loaded nor asked.
   */
  claims(snap: Snapshot): boolean;
  /** The case itself, loaded on first call. */
  load(): Promise<Case>;
}

/** Every snapshot: the masquerade case names the evidence it lacks even in an empty one. */
const always = (): boolean => true;

export const CASE_ENTRIES = [
  {
    name: "masquerade",
    findingIds: idsOfArea("masq"),
    claims: always,
    load: async () => (await import("./masquerade/index.ts")).masqueradeCase,
  },
  {
    name: "vpn",
    findingIds: idsOfArea("vpn"),
    claims: vpnClaims,
    load: async () => (await import("./vpn/index.ts")).vpnCase,
  },
  {
    name: "evidence",
    findingIds: idsOfArea("evidence"),
    claims: always,
    load: async () => (await import("./evidence/index.ts")).evidenceCase,
  },
] as const satisfies readonly CaseEntry[];

/** Every case, loaded, in registry order (`verify` asks them all). */
export async function loadCases(): Promise<Case[]> {
  const out: Case[] = [];
  for (const e of CASE_ENTRIES) out.push(await e.load());
  return out;
}

type IdsOf<C> = C extends { readonly findingIds: readonly (infer I)[] } ? I : never;
type Owned = IdsOf<(typeof CASE_ENTRIES)[number]>;
/** Ids owned by a case and by a later one. */
type Twice<T extends readonly unknown[]> = T extends readonly [infer H, ...infer R]
  ? (IdsOf<H> & IdsOf<R[number]>) | Twice<R>
  : never;

// A finding id with no case, or with two, fails to compile here.
const everyIdHasACase: [Exclude<FindingId, Owned>] extends [never]
  ? true
  : { readonly noCase: Exclude<FindingId, Owned> } = true;
const noIdHasTwo: [Twice<typeof CASE_ENTRIES>] extends [never]
  ? true
  : { readonly twoCases: Twice<typeof CASE_ENTRIES> } = true;
void everyIdHasACase;
void noIdHasTwo;

/** The registry entry of the case that decides `id`. */
export function caseOf(id: FindingId): (typeof CASE_ENTRIES)[number] {
  const c = CASE_ENTRIES.find((x) => (x.findingIds as readonly FindingId[]).includes(id));
  if (c === undefined) throw new Error(`finding id ${id} belongs to no case`);
  return c;
}
