/**
 * @module k8s/views-fuzz.test — the typed views and the DaemonSet predicate on arbitrary objects:
 * no throw, every diagnostic cites a line of the input, and valid parts survive bad neighbours.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { readKubeObjects } from "../evidence/kube-objects.ts";
import { nodeMatchesDaemonSet } from "./daemonset-scheduling.ts";
import {
  readConfigMap,
  readDaemonSet,
  readNamespace,
  readNetworkPolicy,
  readNode,
  readPod,
  readService,
} from "./objects.ts";

const KINDS = [
  "Node",
  "Pod",
  "DaemonSet",
  "ConfigMap",
  "Namespace",
  "Service",
  "NetworkPolicy",
] as const;
const READERS = {
  Node: readNode,
  Pod: readPod,
  DaemonSet: readDaemonSet,
  ConfigMap: readConfigMap,
  Namespace: readNamespace,
  Service: readService,
  NetworkPolicy: readNetworkPolicy,
} as const;

const key = fc.constantFrom(
  "spec",
  "status",
  "metadata",
  "taints",
  "containers",
  "tolerations",
  "affinity",
  "nodeSelector",
  "podCIDRs",
  "addresses",
  "template",
  "selector",
  "key",
  "effect",
  "operator",
  "values",
  "name",
  "ports",
  "clusterIPs",
  "data",
  "x",
);
const leaf = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom("NoSchedule", "Exists", "In", "10.0.0.1", "10.0.0.0/8", "::1"),
);
const tree = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: "small" },
    leaf,
    fc.array(tie("node"), { maxLength: 3 }),
    fc.dictionary(key, tie("node"), { maxKeys: 4 }),
  ),
})).node;

describe("views under fuzz", () => {
  it("never throw and cite lines inside the input", { timeout: 60_000 }, () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...KINDS),
        fc.dictionary(key, tree, { maxKeys: 4 }),
        (kind, body) => {
          const doc = { apiVersion: "v1", kind, ...body, metadata: { name: "x", namespace: "n" } };
          const text = JSON.stringify(doc, null, 2);
          const [obj] = readKubeObjects(text, "f.json").value;
          assert.ok(obj);
          const r = READERS[kind](obj);
          const lines = text.split("\n").length;
          for (const d of r.diagnostics) {
            assert.ok(d.source && d.source.line >= 1 && d.source.line <= lines, d.message);
            assert.equal(d.source.file, "f.json");
          }
        },
      ),
      { numRuns: 1500 },
    );
  });

  it("nodeMatchesDaemonSet never throws on arbitrary node and DaemonSet views", {
    timeout: 60_000,
  }, () => {
    const labels = fc.dictionary(
      fc.constantFrom("a", "b", "zone", "size"),
      fc.constantFrom("", "1", "x", "10", "-3"),
      { maxKeys: 4 },
    );
    const req = fc.record({
      key: fc.constantFrom("a", "b", "zone", "size", "metadata.name"),
      operator: fc.constantFrom("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"),
      values: fc.array(fc.constantFrom("", "1", "x", "10", "n1", "+5"), { maxLength: 3 }),
    });
    fc.assert(
      fc.property(
        labels,
        labels,
        fc.option(
          fc.array(
            fc.record({
              matchExpressions: fc.array(req, { maxLength: 3 }),
              matchFields: fc.array(req, { maxLength: 2 }),
            }),
            { maxLength: 3 },
          ),
        ),
        fc.array(
          fc.record({
            key: fc.constantFrom("a", "b", "node.kubernetes.io/not-ready"),
            effect: fc.constantFrom("NoSchedule", "PreferNoSchedule", "NoExecute"),
          }),
          { maxLength: 3 },
        ),
        (nodeLabels, selector, terms, taints) => {
          const nodeText = JSON.stringify({
            apiVersion: "v1",
            kind: "Node",
            metadata: { name: "n1", labels: nodeLabels },
            spec: { taints },
          });
          const affinity = terms
            ? {
                nodeAffinity: {
                  requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms },
                },
              }
            : undefined;
          const dsText = JSON.stringify({
            apiVersion: "apps/v1",
            kind: "DaemonSet",
            metadata: { name: "d" },
            spec: {
              template: {
                spec: {
                  nodeSelector: selector,
                  ...(affinity ? { affinity } : {}),
                  containers: [{ name: "c" }],
                },
              },
            },
          });
          const node = readNode(readKubeObjects(nodeText, "n").value[0]!).value!;
          const ds = readDaemonSet(readKubeObjects(dsText, "d").value[0]!).value!;
          const m = nodeMatchesDaemonSet(node, ds);
          // A node that matches must satisfy every nodeSelector label.
          if (m.matches)
            for (const [k, v] of Object.entries(selector)) assert.equal(nodeLabels[k], v);
          else assert.ok(m.reason.length > 0);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
