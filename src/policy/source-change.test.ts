/** @module policy/source-change.test — ingress policies that admit pods and not the nodes. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readKubeObjects } from "../evidence/kube-objects.ts";
import { readPod } from "../k8s/objects.ts";
import { type Cidr, formatCidr, parseCidr } from "../net/cidr.ts";
import { readNetworkPolicies } from "./network-policy.ts";
import {
  type DestinationPod,
  describeSourceChangeBlocker,
  sourceChangeBlockers,
} from "./source-change.ts";

/** A database pod in the cluster, reached today from the pods with their own addresses. */
const POD = `apiVersion: v1
kind: Pod
metadata:
  name: ledger-db-0
  namespace: finance
  labels:
    app: ledger-db
spec:
  nodeName: gke-lab-default-0
  containers:
  - name: postgres
    image: postgres:16
    ports:
    - containerPort: 5432
status:
  podIP: 10.8.0.12
  podIPs:
  - ip: 10.8.0.12
`;

const policy = (name: string, from: string) => `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: ${name}
  namespace: finance
spec:
  podSelector:
    matchLabels:
      app: ledger-db
  policyTypes:
  - Ingress
  ingress:
  - ports:
    - protocol: TCP
      port: 5432
${from}`;

const ONLY_POD_RANGE = `    from:
    - ipBlock:
        cidr: 10.4.0.0/14
`;
const BY_LABEL = `    from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: billing
      podSelector:
        matchLabels:
          app: billing
`;
const NODE_SUBNET_TOO = `    from:
    - ipBlock:
        cidr: 10.4.0.0/14
    - ipBlock:
        cidr: 10.128.0.0/20
        except:
        - 10.128.0.3/32
`;

const CHANGED: Cidr[] = [parseCidr("10.0.0.0/8")]; // today's exemption, masqueraded after
const POD_RANGES: Cidr[] = [parseCidr("10.4.0.0/14")];
const NODES: Cidr[] = [parseCidr("10.128.0.2/32"), parseCidr("10.128.0.3/32")];

function world(...docs: string[]) {
  const r = readKubeObjects(docs.join("---\n"), "cluster/finance.yaml");
  assert.deepEqual(r.diagnostics, []);
  const policies = readNetworkPolicies(r.value);
  assert.deepEqual(policies.diagnostics, []);
  const pods: DestinationPod[] = r.value.flatMap((o) => {
    if (o.kind !== "Pod") return [];
    const p = readPod(o).value!;
    return p.podIPs.map((a) => ({ ...p, ip: a.ip, source: a.source }));
  });
  return { policies: policies.value, pods, lines: docs.join("---\n").split("\n") };
}

describe("sourceChangeBlockers", () => {
  it("an ingress ipBlock of the pod range only: a blocker naming every node it refuses", () => {
    const w = world(POD, policy("ledger-from-pods", ONLY_POD_RANGE));
    const [b, ...rest] = sourceChangeBlockers(w.policies, w.pods, CHANGED, POD_RANGES, NODES);
    assert.deepEqual(rest, []);
    assert.equal(b?.policy, "finance/ledger-from-pods");
    assert.equal(b?.pod, "finance/ledger-db-0");
    assert.deepEqual(b?.admits, ["ipBlock 10.4.0.0/14"]);
    assert.deepEqual(b?.refused.map(formatCidr), ["10.128.0.2/32", "10.128.0.3/32"]);
    assert.equal(w.lines[(b?.source.line ?? 0) - 1]?.trim(), "- ports:");
    assert.match(
      describeSourceChangeBlocker(b!),
      /admits only ipBlock 10\.4\.0\.0\/14; the nodes' addresses/,
    );
  });

  it("pod and namespace selectors: a node is not a pod, so the nodes are refused", () => {
    const w = world(POD, policy("ledger-from-billing", BY_LABEL));
    const [b] = sourceChangeBlockers(w.policies, w.pods, CHANGED, POD_RANGES, NODES);
    assert.deepEqual(b?.admits, ["pods selected by namespace (namespaceSelector)"]);
  });

  it("an ipBlock of the node subnet: only the node its except cuts out is refused", () => {
    const w = world(POD, policy("ledger-from-nodes", NODE_SUBNET_TOO));
    const [b] = sourceChangeBlockers(w.policies, w.pods, CHANGED, POD_RANGES, NODES);
    assert.deepEqual(b?.refused.map(formatCidr), ["10.128.0.3/32"]);
    const all = world(POD, policy("x", NODE_SUBNET_TOO.replace(/ {8}except:\n.*\n/, "")));
    assert.deepEqual(sourceChangeBlockers(all.policies, all.pods, CHANGED, POD_RANGES, NODES), []);
  });

  it("nothing when the change leaves the pod's address alone, no policy isolates it, or a rule admits all", () => {
    const w = world(POD, policy("ledger-from-pods", ONLY_POD_RANGE));
    const kept: Cidr[] = [parseCidr("10.20.0.0/16")];
    assert.deepEqual(sourceChangeBlockers(w.policies, w.pods, kept, POD_RANGES, NODES), []);
    const open = world(POD);
    assert.deepEqual(
      sourceChangeBlockers(open.policies, open.pods, CHANGED, POD_RANGES, NODES),
      [],
    );
    const anyone = world(
      POD,
      policy("ledger-open", ""),
      policy("ledger-from-pods", ONLY_POD_RANGE),
    );
    assert.deepEqual(
      sourceChangeBlockers(anyone.policies, anyone.pods, CHANGED, POD_RANGES, NODES),
      [],
    );
  });

  it("an egress-only policy says nothing: egress rules match the destination, not the source", () => {
    const egress = policy("ledger-egress", "").replace(
      "- Ingress\n  ingress:\n  - ports:",
      "- Egress\n  egress:\n  - ports:",
    );
    const w = world(POD, `${egress}    to:\n    - ipBlock:\n        cidr: 10.4.0.0/14\n`);
    assert.deepEqual(sourceChangeBlockers(w.policies, w.pods, CHANGED, POD_RANGES, NODES), []);
  });
});
