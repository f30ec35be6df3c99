/**
 * @module evidence/lazy-zod — zod, loaded the first time a schema is built: a snapshot that holds
 * no document a schema checks (a node with only an iptables dump) never pays for loading zod and
 * building its schemas. Each schema module wraps its schemas in {@link lazySchema}.
 */
import { createRequire } from "node:module";
import type * as Zod from "zod";

/** zod's `z` namespace, as `import { z } from "zod"` gives it. */
export type ZodLib = typeof Zod.z;

let loaded: ZodLib | undefined;

/** zod itself, loaded (synchronously) on the first call. */
export function zodLib(): ZodLib {
  loaded ??= (createRequire(import.meta.url)("zod") as typeof Zod).z;
  return loaded;
}

/**
 * A getter of what `build` makes from zod, built on the first call and kept.
 *
 * @example
 * const PortSchema = lazySchema((z) => z.object({ port: z.number().int() }));
 * PortSchema().safeParse({ port: 80 }).success; // true
 */
export function lazySchema<S>(build: (z: ZodLib) => S): () => S {
  let built: S | undefined;
  let done = false;
  return () => {
    if (!done) {
      built = build(zodLib());
      done = true;
    }
    return built as S;
  };
}
