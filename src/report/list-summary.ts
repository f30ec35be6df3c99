/**
 * @module report/list-summary — a long run of names in prose (`does not place its pod on gke-a-0,
 * gke-a-1, … gke-a-99`) said short for a person: how many, of what (nodes, in which pool, when the
 * finding says), the first two and the last. JSON keeps the full list; this is display only. Pure.
 */

/** Runs of at least this many comma-separated names are summarised. */
export const LIST_LIMIT = 8;

/** What the names are, when known: `nodes`, and the pool they are in. */
export interface ListContext {
  readonly noun?: string;
  readonly pool?: string;
}

const RUN = new RegExp(
  `(?<![\\w.-])(?:[A-Za-z0-9][\\w./:-]*, ){${LIST_LIMIT - 1},}[A-Za-z0-9][\\w./:-]*?(?=[:;,.)]?(?:\\s|$))`,
  "g",
);

/** `100 nodes in pool a: gke-a-0, gke-a-1, … gke-a-99 (-o json lists all)`. */
export function summariseNames(names: readonly string[], ctx: ListContext = {}): string {
  if (names.length < LIST_LIMIT) return names.join(", ");
  const noun = ctx.noun ?? "names";
  const where = ctx.pool ? ` in pool ${ctx.pool}` : "";
  return `${names.length} ${noun}${where}: ${names[0]}, ${names[1]}, … ${names.at(-1)} (-o json lists all)`;
}

/** The text with every run of LIST_LIMIT or more comma-separated names summarised. */
export function summariseLists(text: string, ctx: ListContext = {}): string {
  return text.replace(RUN, (run) => summariseNames(run.split(", "), ctx));
}
