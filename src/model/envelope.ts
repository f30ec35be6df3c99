/**
 * @module model/envelope — the one envelope every question answers in: `schemaVersion`, `tool`,
 * `question`, the snapshot's name when there is one, then the question's own body. Every `-o json`
 * goes through {@link envelope} and {@link toJson} (DESIGN.md "JSON output"); the keys of each
 * body are a public contract (docs/schema/*.json).
 */

/** The head every answer starts with, in this order. */
export interface EnvelopeHead {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  /** The question asked: `diagnose`, `plan masquerade`, `verify`, `capture flows`, … */
  readonly question: string;
  /** The snapshot's name, for the questions asked of one. */
  readonly snapshot?: string;
}

/** The head, then the body's own keys in the body's order. */
export type Envelope<B extends object> = EnvelopeHead & Omit<B, keyof EnvelopeHead>;

/**
 * Wraps a question's body in the envelope: the head first (a body that carries its own
 * `schemaVersion`, `tool`, `question` or `snapshot` has them replaced, in the head's place), then
 * the body's keys in their order.
 *
 * @example envelope("probe", { stoppedAt: null, steps: [] })
 * // → { schemaVersion: 1, tool: "podpath", question: "probe", stoppedAt: null, steps: [] }
 */
export function envelope<B extends object>(
  question: string,
  body: B,
  snapshot?: string,
): Envelope<B> {
  const {
    schemaVersion: _v,
    tool: _t,
    question: _q,
    snapshot: bodySnapshot,
    ...rest
  } = body as B & Partial<Record<keyof EnvelopeHead, unknown>>;
  const snap = snapshot ?? (typeof bodySnapshot === "string" ? bodySnapshot : undefined);
  return {
    schemaVersion: 1,
    tool: "podpath",
    question,
    ...(snap === undefined ? {} : { snapshot: snap }),
    ...rest,
  } as Envelope<B>;
}

/**
 * The JSON text of an answer: two-space indented, one trailing newline, keys in the order they
 * were built, no `undefined` (left out), `bigint` written as a decimal string.
 */
export function toJson(value: unknown): string {
  return `${JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v), 2)}\n`;
}
