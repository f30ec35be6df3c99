/** @module evidence/lazy-zod.test — schemas are built once, on first use, with zod's behaviour. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { lazySchema, zodLib } from "./lazy-zod.ts";

test("a lazy schema is built on its first use only, and once", () => {
  let builds = 0;
  const Port = lazySchema((z) => {
    builds++;
    return z.object({ port: z.number().int() });
  });
  assert.equal(builds, 0);
  assert.equal(Port().safeParse({ port: 80 }).success, true);
  assert.equal(Port().safeParse({ port: "80" }).success, false);
  assert.equal(builds, 1);
  assert.equal(Port(), Port());
});

test("zodLib is zod's z namespace", () => {
  const z = zodLib();
  const r = z.strictObject({ a: z.string() }).safeParse({ a: "x", b: 1 });
  assert.equal(r.success, false);
  assert.equal(r.error?.issues[0]?.code, "unrecognized_keys");
});
