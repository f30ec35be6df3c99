/** @module k8s/daemonset-scheduling.test — the DaemonSet controller's node predicate. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { readKubeObjects } from "../evidence/kube-objects.ts";
import {
  automaticDaemonSetTolerations,
  nodeMatchesDaemonSet,
  toleratesTaint,
} from "./daemonset-scheduling.ts";
import { type DaemonSetView, type NodeView, readDaemonSet, readNode } from "./objects.ts";

const fixture = readFileSync(
  new URL("../evidence/fixtures/kube/nodes-daemonset.yaml", import.meta.url),
  "utf8",
);
const objs = readKubeObjects(fixture, "cluster/nodes.yaml").value;
const nodes = objs.filter((o) => o.kind === "Node").map((o) => readNode(o).value!);
const masqAgent = readDaemonSet(objs.find((o) => o.kind === "DaemonSet")!).value!;

function node(labels: Record<string, string>, taints = "", name = "n1"): NodeView {
  const l = Object.entries(labels)
    .map(([k, v]) => `    ${k}: "${v}"`)
    .join("\n");
  const text = `apiVersion: v1\nkind: Node\nmetadata:\n  name: ${name}\n  labels:\n${l || "    {}"}\nspec:\n${taints ? `  taints:\n${taints}` : "  taints: []\n"}`;
  return readNode(
    readKubeObjects(text.replace("  labels:\n    {}", "  labels: {}"), "n.yaml").value[0]!,
  ).value!;
}

function ds(spec: string, hostNetwork = false): DaemonSetView {
  const text = `apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d, namespace: kube-system}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      hostNetwork: ${hostNetwork}\n      containers: [{name: c, image: i}]\n${spec}`;
  const r = readDaemonSet(readKubeObjects(text, "ds.yaml").value[0]!);
  assert.deepEqual(r.diagnostics, []);
  return r.value!;
}

const affinity = (exprs: string) =>
  `      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n            nodeSelectorTerms:\n${exprs}`;

describe("nodeMatchesDaemonSet", () => {
  it("places ip-masq-agent on a labelled default-pool node", () => {
    const labelled = { ...nodes[0]!, labels: { ...nodes[0]!.labels, "kubernetes.io/os": "linux" } };
    assert.deepEqual(nodeMatchesDaemonSet(labelled, masqAgent), { matches: true });
  });

  it("names the missing nodeSelector label and cites the manifest line", () => {
    const r = nodeMatchesDaemonSet(nodes[1]!, masqAgent);
    assert.equal(r.matches, false);
    assert.ok(!r.matches);
    assert.equal(r.rule, "nodeSelector");
    assert.match(r.reason, /has no label node.kubernetes.io\/masq-agent-ds-ready/);
    assert.equal(fixture.split("\n")[r.source!.line - 1]?.trim(), "nodeSelector:");
  });

  it("checks required node affinity after nodeSelector", () => {
    const r = nodeMatchesDaemonSet(nodes[0]!, masqAgent); // no kubernetes.io/os label
    assert.ok(!r.matches);
    assert.equal(r.rule, "nodeAffinity");
    assert.match(r.reason, /kubernetes.io\/os In \(linux\)/);
    assert.equal(fixture.split("\n")[r.source!.line - 1]?.trim(), "- key: kubernetes.io/os");
  });

  describe("node affinity operators", () => {
    const n = node({ zone: "a", size: "10", "has-gpu": "" }, "", "node-7");
    const term = (e: string) => affinity(`            - matchExpressions:\n              - ${e}\n`);
    const cases: [string, boolean][] = [
      ["{key: zone, operator: In, values: [a, b]}", true],
      ["{key: zone, operator: In, values: [b]}", false],
      ["{key: zone, operator: NotIn, values: [b]}", true],
      ["{key: zone, operator: NotIn, values: [a]}", false],
      ["{key: missing, operator: NotIn, values: [a]}", true],
      ["{key: has-gpu, operator: Exists}", true],
      ["{key: missing, operator: Exists}", false],
      ["{key: missing, operator: DoesNotExist}", true],
      ["{key: zone, operator: DoesNotExist}", false],
      ["{key: size, operator: Gt, values: ['9']}", true],
      ["{key: size, operator: Gt, values: ['10']}", false],
      ["{key: size, operator: Lt, values: ['11']}", true],
      ["{key: zone, operator: Gt, values: ['1']}", false],
      ["{key: size, operator: Gt, values: ['1', '2']}", false],
      ["{key: zone, operator: In, values: []}", false],
    ];
    for (const [expr, want] of cases) {
      it(`${expr} → ${want ? "matches" : "does not match"}`, () => {
        assert.equal(nodeMatchesDaemonSet(n, ds(term(expr))).matches, want);
      });
    }

    it("ORs terms and ANDs expressions within a term", () => {
      const two = affinity(
        "            - matchExpressions:\n              - {key: zone, operator: In, values: [b]}\n            - matchExpressions:\n              - {key: zone, operator: In, values: [a]}\n              - {key: size, operator: Exists}\n",
      );
      assert.equal(nodeMatchesDaemonSet(n, ds(two)).matches, true);
      const and = affinity(
        "            - matchExpressions:\n              - {key: zone, operator: In, values: [a]}\n              - {key: size, operator: In, values: ['11']}\n",
      );
      assert.equal(nodeMatchesDaemonSet(n, ds(and)).matches, false);
    });

    it("matches metadata.name through matchFields, and nothing else", () => {
      const f = (e: string) => affinity(`            - matchFields:\n              - ${e}\n`);
      assert.equal(
        nodeMatchesDaemonSet(n, ds(f("{key: metadata.name, operator: In, values: [node-7]}")))
          .matches,
        true,
      );
      assert.equal(
        nodeMatchesDaemonSet(n, ds(f("{key: metadata.name, operator: NotIn, values: [node-7]}")))
          .matches,
        false,
      );
      assert.equal(
        nodeMatchesDaemonSet(n, ds(f("{key: metadata.labels, operator: In, values: [x]}"))).matches,
        false,
      );
    });

    it("an empty term or an empty term list matches no node", () => {
      assert.equal(nodeMatchesDaemonSet(n, ds(affinity("            - {}\n"))).matches, false);
      assert.equal(nodeMatchesDaemonSet(n, ds(affinity("              []\n"))).matches, false);
    });
  });

  describe("taints and tolerations", () => {
    const tainted = (t: string) => node({}, `  - ${t}\n`);
    const tol = (t: string) => `      tolerations:\n      - ${t}\n`;

    it("an untolerated NoSchedule or NoExecute taint keeps the pod off, with the node's line", () => {
      for (const effect of ["NoSchedule", "NoExecute"]) {
        const r = nodeMatchesDaemonSet(
          tainted(`{key: dedicated, value: db, effect: ${effect}}`),
          ds(""),
        );
        assert.ok(!r.matches);
        assert.equal(r.rule, "taint");
        assert.match(r.reason, new RegExp(`dedicated=db:${effect}`));
        assert.match(r.source?.text ?? "", /^ {2}- \{key: dedicated/);
      }
    });

    it("PreferNoSchedule never blocks", () => {
      assert.equal(
        nodeMatchesDaemonSet(tainted("{key: x, effect: PreferNoSchedule}"), ds("")).matches,
        true,
      );
    });

    it("Equal needs the same key and value; Exists only the key; empty key with Exists tolerates all", () => {
      const t = tainted("{key: dedicated, value: db, effect: NoSchedule}");
      assert.equal(
        nodeMatchesDaemonSet(t, ds(tol("{key: dedicated, operator: Equal, value: db}"))).matches,
        true,
      );
      assert.equal(nodeMatchesDaemonSet(t, ds(tol("{key: dedicated, value: db}"))).matches, true);
      assert.equal(
        nodeMatchesDaemonSet(t, ds(tol("{key: dedicated, operator: Equal, value: web}"))).matches,
        false,
      );
      assert.equal(
        nodeMatchesDaemonSet(t, ds(tol("{key: dedicated, operator: Exists}"))).matches,
        true,
      );
      assert.equal(
        nodeMatchesDaemonSet(t, ds(tol("{key: other, operator: Exists}"))).matches,
        false,
      );
      assert.equal(nodeMatchesDaemonSet(t, ds(tol("{operator: Exists}"))).matches, true);
      assert.equal(
        nodeMatchesDaemonSet(t, ds(tol("{operator: Exists, effect: NoExecute}"))).matches,
        false,
      );
      assert.equal(
        nodeMatchesDaemonSet(t, ds(tol("{key: dedicated, operator: Exists, effect: NoSchedule}")))
          .matches,
        true,
      );
    });

    it("tolerates the controller's automatic taints without any toleration in the manifest", () => {
      for (const key of ["not-ready", "unreachable"]) {
        assert.equal(
          nodeMatchesDaemonSet(
            tainted(`{key: node.kubernetes.io/${key}, effect: NoExecute}`),
            ds(""),
          ).matches,
          true,
        );
      }
      for (const key of ["disk-pressure", "memory-pressure", "pid-pressure", "unschedulable"]) {
        assert.equal(
          nodeMatchesDaemonSet(
            tainted(`{key: node.kubernetes.io/${key}, effect: NoSchedule}`),
            ds(""),
          ).matches,
          true,
        );
      }
      // not-ready as NoSchedule is not among them
      assert.equal(
        nodeMatchesDaemonSet(
          tainted("{key: node.kubernetes.io/not-ready, effect: NoSchedule}"),
          ds(""),
        ).matches,
        false,
      );
    });

    it("tolerates network-unavailable only for host-network pods", () => {
      const t = tainted("{key: node.kubernetes.io/network-unavailable, effect: NoSchedule}");
      assert.equal(nodeMatchesDaemonSet(t, ds("", false)).matches, false);
      assert.equal(nodeMatchesDaemonSet(t, ds("", true)).matches, true);
      assert.equal(
        automaticDaemonSetTolerations(true).length,
        automaticDaemonSetTolerations(false).length + 1,
      );
    });

    it("ip-masq-agent tolerates every NoSchedule taint, so the GPU pool fails on its label only", () => {
      const gpu = {
        ...nodes[1]!,
        labels: {
          ...nodes[1]!.labels,
          "kubernetes.io/os": "linux",
          "node.kubernetes.io/masq-agent-ds-ready": "true",
        },
      };
      assert.deepEqual(nodeMatchesDaemonSet(gpu, masqAgent), { matches: true });
      assert.equal(toleratesTaint(masqAgent.tolerations[0]!, gpu.taints[0]!), true);
    });
  });
});
