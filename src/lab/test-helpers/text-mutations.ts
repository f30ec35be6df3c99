/**
 * @module lab/test-helpers/text-mutations — a fast-check arbitrary for fuzzing readers with damaged
 * real input: a sample of a corpus cut short, with a piece inserted or replacing a span, or with a
 * span duplicated. Keeps most of the real structure around the damage.
 */
import fc from "fast-check";

/**
 * Text made from one sample of `corpus` by one mutation. `pieces` are the characters or words the
 * reader is most sensitive to (inserted besides short random strings); `maxSpan` bounds the length
 * of a replaced or duplicated span.
 *
 * @example
 * fc.assert(fc.property(mutatedText(corpus, ["\n", ":"], 40), (text) => read(text)));
 */
export function mutatedText(
  corpus: readonly string[],
  pieces: readonly string[],
  maxSpan: number,
): fc.Arbitrary<string> {
  return fc
    .tuple(
      fc.constantFrom(...corpus),
      fc.nat(),
      fc.nat(),
      fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom(...pieces)),
      fc.constantFrom("cut", "insert", "replace", "duplicate"),
    )
    .map(([text, a, b, piece, op]) => {
      const i = a % (text.length + 1);
      const j = Math.min(text.length, i + (b % maxSpan));
      switch (op) {
        case "cut":
          return text.slice(0, i);
        case "insert":
          return text.slice(0, i) + piece + text.slice(i);
        case "replace":
          return text.slice(0, i) + piece + text.slice(j);
        default:
          return text.slice(0, j) + text.slice(i, j) + text.slice(j);
      }
    });
}
