import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { readKubeObjects } from "../evidence/kube-objects.ts";
import { parseCidr, parseIp } from "../net/cidr.ts";
import { formatConnections, parseConnections, subtract, union } from "./connection-set.ts";
import { EndpointError, evaluateNetworkPolicies } from "./evaluate.ts";
import { ipBlockMatches, translationEffect } from "./ip-block-match.ts";
import { buildPolicyWorld } from "./policy-world.ts";

const MANIFEST = `apiVersion: v1
kind: Namespace
metadata:
  name: db
  labels: {team: data}
---
apiVersion: v1
kind: Namespace
metadata:
  name: vpn
  labels: {team: net}
---
apiVersion: v1
kind: Pod
metadata:
  name: postgres-0
  namespace: db
  labels: {app: postgres, tier: data}
spec:
  containers:
  - name: pg
    ports:
    - {name: pg, containerPort: 5432}
    - {name: metrics, containerPort: 9187, protocol: TCP}
status:
  podIP: 10.4.1.7
---
apiVersion: v1
kind: Pod
metadata:
  name: openvpn-7f9c
  namespace: vpn
  labels: {app: openvpn}
spec:
  containers: [{name: openvpn}]
status:
  podIP: 10.4.2.9
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: postgres-ingress
  namespace: db
spec:
  podSelector:
    matchExpressions:
    - {key: app, operator: In, values: [postgres, pgbouncer]}
  ingress:
  - from:
    - namespaceSelector:
        matchLabels: {team: net}
      podSelector:
        matchLabels: {app: openvpn}
    ports:
    - port: pg
  - from:
    - ipBlock:
        cidr: 10.8.0.0/16
        except: [10.8.9.0/24]
    ports:
    - {port: 5000, endPort: 5500}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: vpn-egress
  namespace: vpn
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress:
  - to:
    - namespaceSelector:
        matchExpressions:
        - {key: team, operator: NotIn, values: [secret]}
`;

const objects = readKubeObjects(MANIFEST, "cluster/policies.yaml").value;

describe("evaluateNetworkPolicies", () => {
  it("allows the VPN pod to postgres on the named port, citing the rule's file and line", () => {
    const v = evaluateNetworkPolicies(objects, {
      from: "vpn/openvpn-7f9c",
      to: "db/postgres-0",
      port: 5432,
    });
    assert.equal(v.allowed, true);
    assert.equal(formatConnections(v.connections), "TCP 5432");
    const allow = v.ingress.citations.find((c) => c.effect === "allows");
    assert.equal(
      allow?.text,
      "NetworkPolicy 'db/postgres-ingress' allows connections by Ingress rule #1",
    );
    assert.deepEqual([allow?.source.file, allow?.source.line], ["cluster/policies.yaml", 49]);
    assert.equal(
      v.egress.citations[0]?.text,
      "NetworkPolicy 'vpn/vpn-egress' allows connections by Egress rule #1",
    );
  });

  it("denies another port and says which rule selected the peer", () => {
    const v = evaluateNetworkPolicies(objects, {
      from: "vpn/openvpn-7f9c",
      to: "db/postgres-0",
      port: 9187,
    });
    assert.equal(v.allowed, false);
    assert.ok(v.explanation.some((l) => l.includes("Ingress (Denied)")));
    assert.ok(
      v.explanation.some((l) =>
        l.startsWith(
          "  NetworkPolicy 'db/postgres-ingress' selects db/postgres-0[Pod], and Ingress rule #1 selects vpn/openvpn-7f9c[Pod], but the protocols and ports do not match (rule #1 opens TCP 5432) [cluster/policies.yaml:49]",
        ),
      ),
      v.explanation.join("\n"),
    );
  });

  it("matches ipBlock with except and endPort ranges for external sources (pod IPs resolve to pods)", () => {
    const at = (ip: string, port: number) =>
      evaluateNetworkPolicies(objects, { from: ip, to: "10.4.1.7", port }).allowed;
    assert.equal(at("10.8.0.5", 5000), true);
    assert.equal(at("10.8.0.5", 5500), true);
    assert.equal(at("10.8.0.5", 5501), false);
    assert.equal(at("10.8.9.5", 5000), false);
    assert.equal(at("10.9.0.1", 5000), false);
  });

  it("isolates egress only for policies that declare it; ingress-only pods keep default allow", () => {
    const v = evaluateNetworkPolicies(objects, {
      from: "db/postgres-0",
      to: "1.1.1.1",
      protocol: "UDP",
      port: 53,
    });
    assert.equal(v.allowed, true);
    assert.equal(v.egress.isolated, false);
    assert.ok(v.explanation.includes("Egress (Allowed) due to the system default (Allow all)"));
    const out = evaluateNetworkPolicies(objects, {
      from: "vpn/openvpn-7f9c",
      to: "1.1.1.1",
      port: 443,
    });
    assert.equal(out.allowed, false);
    assert.match(
      out.explanation.join("\n"),
      /selects vpn\/openvpn-7f9c\[Pod\], but 1\.1\.1\.1\[External\] is not allowed by any Egress rule \[cluster\/policies\.yaml:63\]/,
    );
  });

  it("lets ipBlock match pod IPs only when asked (CNI-specific)", () => {
    const pod = { ...objects[3]! };
    const world = buildPolicyWorld(objects).value;
    const vpn = world.pods.find((p) => p.name === "openvpn-7f9c")!;
    const moved = { ...vpn, ips: [parseIp("10.8.1.1")] };
    assert.ok(pod);
    assert.equal(
      evaluateNetworkPolicies(world, { from: moved, to: "db/postgres-0", port: 5000 }).allowed,
      false,
    );
    assert.equal(
      evaluateNetworkPolicies(
        world,
        { from: moved, to: "db/postgres-0", port: 5000 },
        { ipBlockMatchesPodIps: true },
      ).allowed,
      true,
    );
  });

  it("throws a coded error for an unknown endpoint name", () => {
    assert.throws(
      () => evaluateNetworkPolicies(objects, { from: "nope/x", to: "db/postgres-0" }),
      EndpointError,
    );
  });

  it("reports invalid selectors and CIDRs with file and line, and keeps going", () => {
    const text = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad, namespace: a}
spec:
  podSelector:
    matchExpressions: [{key: app, operator: Equals, values: [x]}]
  ingress:
  - from:
    - ipBlock: {cidr: 10.0.0.0/33}
    - podSelector: {}
`;
    const built = buildPolicyWorld(readKubeObjects(text, "p.yaml").value);
    const msgs = built.diagnostics.map((d) => d.message).join("\n");
    assert.match(msgs, /p\.yaml:5: matchExpression .* is invalid/);
    assert.match(msgs, /p\.yaml:9: ipBlock\.cidr "10\.0\.0\.0\/33"/);
    assert.equal(built.value.policies[0]?.ingress[0]?.peers?.length, 1);
  });
});

describe("ipBlockMatches and translationEffect", () => {
  const world = buildPolicyWorld(objects).value;
  it("finds the rule written for the client pool, with its line", () => {
    const m = ipBlockMatches(world.policies, parseCidr("10.8.0.0/24"), { direction: "ingress" });
    assert.equal(m.length, 1);
    assert.equal(m[0]?.policy, "db/postgres-ingress");
    assert.equal(m[0]?.rule, 2);
    assert.equal(m[0]?.coverage, "all");
    assert.equal(m[0]?.source.line, 57);
    assert.equal(ipBlockMatches(world.policies, parseCidr("10.8.8.0/23"))[0]?.coverage, "part");
    assert.deepEqual(ipBlockMatches(world.policies, parseCidr("10.8.9.0/25")), []);
  });

  it("shows the rule lost when the pod masquerades the pool to its own address", () => {
    const e = translationEffect(world.policies, parseCidr("10.8.0.0/24"), parseIp("10.4.2.9"));
    assert.equal(e.lost.length, 1);
    assert.equal(e.gained.length, 0);
    assert.equal(e.before, "10.8.0.0/24");
    assert.equal(e.after, "10.4.2.9");
  });
});

describe("connection sets", () => {
  const arbSet = fc
    .array(
      fc.tuple(
        fc.constantFrom("TCP", "UDP", "SCTP"),
        fc.integer({ min: 1, max: 65535 }),
        fc.integer({ min: 0, max: 300 }),
      ),
      { maxLength: 6 },
    )
    .map(
      (xs) =>
        parseConnections(
          xs.map(([p, a, n]) => `${p}:[${a}-${Math.min(65535, a + n)}]`).join(", ") ||
            "No Connections",
        )!,
    );
  it("round-trips through the netpol-analyzer text form", () => {
    fc.assert(
      fc.property(
        arbSet,
        (s) => formatConnections(parseConnections(formatConnections(s))!) === formatConnections(s),
      ),
    );
  });
  it("subtract then union restores the union", () => {
    fc.assert(
      fc.property(
        arbSet,
        arbSet,
        (a, b) => formatConnections(union(subtract(a, b), b)) === formatConnections(union(a, b)),
      ),
    );
  });
});

describe("readers never throw on arbitrary input", () => {
  it("manifest reader and policy world", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), (t) => {
        const r = readKubeObjects(t, "f.yaml");
        buildPolicyWorld(r.value);
      }),
    );
  });
  it("policy shapes from arbitrary JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (spec, rule) => {
        const text = JSON.stringify({
          kind: "NetworkPolicy",
          metadata: { name: "x", namespace: "n" },
          spec: { podSelector: spec, ingress: [rule], egress: rule },
        });
        const world = buildPolicyWorld(readKubeObjects(text, "f.json").value).value;
        for (const p of world.policies) assert.equal(p.namespace, "n");
      }),
    );
  });
});
