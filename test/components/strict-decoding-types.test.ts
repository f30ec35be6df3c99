/**
 * Component test: podpath's strict decoding (src/agents/kube-apiserver/strict-decoding.ts) against
 * the real kube-apiserver's answer to a server-side dry-run create with `fieldValidation=Strict`,
 * for every manifest of src/agents/kube-apiserver/fixtures/type-errors.json: values of the wrong
 * type (the JSON decoder's `json: cannot unmarshal …`, reported instead of unknown fields),
 * quantities the parser refuses, and unknown fields. Each manifest is sent as kubectl sends it
 * (YAML made JSON, keys sorted). The server's message must equal the one recorded in the fixture
 * and podpath's, word for word. `RECORD=1` rewrites the fixture's messages from the server.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as models from "@kubernetes/client-node";
import { parse } from "yaml";
import { strictDecoding } from "../../src/agents/kube-apiserver/strict-decoding.ts";
import { readKubeObjects } from "../../src/evidence/kube-objects.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { componentSkip } from "./component-guard.ts";
import { collectionPath, type Obj, rawRequest } from "./live-objects.ts";

const skip =
  componentSkip("kube-apiserver", { kernel: false }) || componentSkip("etcd", { kernel: false });
const FIXTURE = join(
  import.meta.dirname,
  "../../src/agents/kube-apiserver/fixtures/type-errors.json",
);

interface Case {
  readonly name: string;
  readonly manifest: string;
  message: string;
}

/** JSON with every object's keys sorted, as kubectl marshals the Go map it read the YAML into. */
function sortedJson(v: unknown): string {
  const sort = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(sort)
      : x !== null && typeof x === "object"
        ? Object.fromEntries(
            Object.keys(x as object)
              .sort()
              .map((k) => [k, sort((x as Record<string, unknown>)[k])]),
          )
        : x;
  return JSON.stringify(sort(v));
}

describe("strict decoding of types, against the real kube-apiserver", { skip }, () => {
  const cases = JSON.parse(readFileSync(FIXTURE, "utf8")) as Case[];
  let cluster: Cluster;
  before(async () => {
    cluster = await startCluster();
  });
  after(async () => {
    await cluster?.stop();
    if (process.env["RECORD"]) writeFileSync(FIXTURE, `${JSON.stringify(cases, null, 2)}\n`);
  });

  for (const c of cases) {
    it(c.name, async () => {
      const obj = parse(c.manifest) as Obj;
      const r = await rawRequest(
        cluster,
        "POST",
        `${collectionPath(obj)}?dryRun=All&fieldValidation=Strict`,
        cluster.adminToken,
        { text: sortedJson(obj), contentType: "application/json" },
      );
      const message = String(r.body["message"] ?? "");
      assert.equal(r.status, 400, message);
      if (process.env["RECORD"]) c.message = message;
      assert.equal(message, c.message, "the fixture records the server's message");
      const [ours] = readKubeObjects(c.manifest, "manifest.yaml").value;
      const d = strictDecoding(models, ours!);
      assert.equal(d.state === "rejected" ? d.message : d.state, message);
    });
  }
});
