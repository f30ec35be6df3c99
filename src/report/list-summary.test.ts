import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LIST_LIMIT, summariseLists, summariseNames } from "./list-summary.ts";

const nodes = (n: number) => Array.from({ length: n }, (_, i) => `gke-prod-a-7f3c-${i}`);

describe("long lists of names, said short", () => {
  it("says how many, of what, in which pool, the first two and the last", () => {
    assert.equal(
      summariseNames(nodes(100), { noun: "nodes", pool: "a" }),
      "100 nodes in pool a: gke-prod-a-7f3c-0, gke-prod-a-7f3c-1, … gke-prod-a-7f3c-99 (-o json lists all)",
    );
    assert.equal(summariseNames(["n1", "n2"]), "n1, n2");
  });

  it("summarises a run inside prose and keeps the words around it", () => {
    const text = `The DaemonSet does not place its pod on ${nodes(100).join(", ")}: node x matches none. Fix it.`;
    const out = summariseLists(text, { noun: "nodes", pool: "a" });
    assert.equal(
      out,
      "The DaemonSet does not place its pod on 100 nodes in pool a: gke-prod-a-7f3c-0, gke-prod-a-7f3c-1, … gke-prod-a-7f3c-99 (-o json lists all): node x matches none. Fix it.",
    );
  });

  it("leaves short lists and ordinary prose as they are", () => {
    const short = `on ${nodes(LIST_LIMIT - 1).join(", ")}: x`;
    assert.equal(summariseLists(short), short);
    const prose =
      "Either masquerade this destination, or add the pod range, and the VPN selectors.";
    assert.equal(summariseLists(prose), prose);
  });
});
