import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Finding, FindingId } from "../model/types.ts";
import { diagnose } from "../questions/diagnose.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { causeOf, flattenGroup, flowOf, groupByCause, nodesOf, rootCauseOf } from "./causality.ts";

const finding = (
  id: FindingId,
  subject: string,
  title: string,
  explanation = "",
  severity: Finding["severity"] = "error",
): Finding => ({ id, severity, title, subject, explanation, evidence: [], next: [] });

const exempt = (node: string, src: string, entry = " (exempted by 10.0.0.0/8)") =>
  finding(
    "masq/exempt-destination",
    `node/${node}`,
    `Pod traffic to 10.20.30.40 keeps its pod source address ${src}${entry}`,
  );
const noRoute = (src: string) =>
  finding(
    "masq/no-return-route",
    "remote/onprem-dc1",
    "onprem-dc1 has no way back to the pod range",
    `Packets to 10.20.30.40 arrive at onprem-dc1 with source ${src}, but its routes back cover only 10.128.0.0/20.`,
  );
const wirePod = (src: string, severity: Finding["severity"] = "error") =>
  finding("masq/wire-pod-source", `flow/${src}->10.20.30.40`, "pod address", "", severity);
const agentMissing = (pool: string, nodes: string) =>
  finding(
    "masq/agent-missing",
    `pool/${pool}`,
    `ip-masq-agent does not run on node pool ${pool}`,
    `The DaemonSet kube-system/ip-masq-agent does not place its pod on ${nodes}: node x matches none.`,
  );

describe("what a finding is about", () => {
  it("reads the flow from a flow subject, an exempt destination's title, a missing route's explanation", () => {
    assert.deepEqual(flowOf(wirePod("10.4.0.5")), { src: "10.4.0.5", dst: "10.20.30.40" });
    assert.deepEqual(flowOf(exempt("n1", "10.4.0.5")), { src: "10.4.0.5", dst: "10.20.30.40" });
    assert.deepEqual(flowOf(exempt("n1", "10.4.0.5", "")), { src: "10.4.0.5", dst: "10.20.30.40" });
    assert.deepEqual(flowOf(noRoute("10.4.1.5")), { src: "10.4.1.5", dst: "10.20.30.40" });
    assert.equal(flowOf(agentMissing("a", "n1")), undefined);
  });

  it("reads the nodes from a node subject and a missing agent's explanation", () => {
    assert.deepEqual(nodesOf(exempt("n1", "10.4.0.5")), ["n1"]);
    assert.deepEqual(nodesOf(agentMissing("legacy", "n1, n2, n3")), ["n1", "n2", "n3"]);
    const running = finding(
      "masq/agent-missing",
      "pool/b",
      "t",
      "The DaemonSet kube-system/ip-masq-agent should run on n4, n5, but no agent pod is running there.",
    );
    assert.deepEqual(nodesOf(running), ["n4", "n5"]);
    assert.deepEqual(nodesOf(noRoute("10.4.0.5")), []);
  });
});

describe("which finding follows from which", () => {
  it("the missing route back and the wire's unanswered pod address follow from the exemption of the same flow", () => {
    const cause = exempt("n1", "10.4.0.5");
    const all = [noRoute("10.4.0.5"), wirePod("10.4.0.5"), cause, noRoute("10.4.9.9")];
    assert.equal(causeOf(all[0]!, all), cause);
    assert.equal(causeOf(all[1]!, all), cause);
    assert.equal(causeOf(all[3]!, all), undefined, "another source address: another flow");
    assert.equal(causeOf(wirePod("10.4.0.5", "info"), all), undefined, "answered: no consequence");
  });

  it("an exemption on a node the agent does not run on follows from the missing agent", () => {
    const missing = agentMissing("legacy", "gke-legacy-1, gke-legacy-2");
    const onLegacy = exempt("gke-legacy-2", "10.4.1.5");
    const elsewhere = exempt("gke-default-0", "10.4.0.5");
    const all = [onLegacy, elsewhere, missing];
    assert.equal(causeOf(onLegacy, all), missing);
    assert.equal(causeOf(elsewhere, all), undefined);
  });

  it("rules drift on a node causes its exemption only when the ConfigMap names no such entry", () => {
    const drift = finding("masq/intent-rules-drift", "node/n1", "drift");
    const byRules = exempt("n1", "10.4.0.5", "");
    const byConfig = exempt("n1", "10.4.0.5");
    assert.equal(causeOf(byRules, [drift, byRules]), drift);
    assert.equal(causeOf(byConfig, [drift, byConfig]), undefined);
  });

  it("groups: causes first, each consequence once under its cause, chains nested", () => {
    const missing = agentMissing("legacy", "gke-legacy-1");
    const ex = exempt("gke-legacy-1", "10.4.1.5");
    const route = noRoute("10.4.1.5");
    const wire = wirePod("10.4.1.5");
    const other = finding("masq/remote-allowlist-rejects", "remote/onprem-dc1", "allowlist");
    const info = finding("masq/wire-node-source", "flow/10.128.0.2->10.20.30.40", "n", "", "info");
    const groups = groupByCause([info, route, other, wire, ex, missing]);
    assert.deepEqual(
      groups.map((g) => g.finding),
      [missing, other, info],
    );
    assert.equal(groups[0]!.consequences.length, 1);
    assert.equal(groups[0]!.consequences[0]!.finding, ex);
    assert.deepEqual(flattenGroup(groups[0]!), [missing, ex, route, wire]);
    assert.equal(rootCauseOf(wire, [info, route, other, wire, ex, missing]), missing);
    assert.equal(rootCauseOf(other, [other]), other);
  });

  it("a root's group is ordered by its worst severity", () => {
    const ex = { ...exempt("n1", "10.4.0.5"), severity: "warning" as const };
    const route = noRoute("10.4.0.5");
    const lone = finding("masq/wire-node-source", "flow/a->b", "x", "", "warning");
    const groups = groupByCause([lone, route, ex]);
    assert.deepEqual(
      groups.map((g) => g.finding),
      [ex, lone],
    );
  });
});

describe("causality on the examples' real findings", () => {
  const findingsOf = async (dir: string) =>
    (await diagnose(loadSnapshot(openSnapshot(dir)))).findings;

  it("the seed example: the exemption, with the missing route back and the wire under it", async () => {
    const groups = groupByCause(await findingsOf("examples/snat-exception-list"));
    assert.equal(groups[0]!.finding.id, "masq/exempt-destination");
    assert.deepEqual(
      groups[0]!.consequences.map((c) => c.finding.id),
      ["masq/no-return-route", "masq/wire-pod-source"],
    );
    assert.deepEqual(
      groups.slice(1).map((g) => g.finding.id),
      ["masq/wire-node-source"],
    );
  });

  it("three pools: the agent missing on pool legacy is the root of the legacy node's exemption", async () => {
    const groups = groupByCause(await findingsOf("src/cases/masquerade/fixtures/three-pools"));
    assert.equal(groups[0]!.finding.id, "masq/agent-missing");
    assert.equal(groups[0]!.finding.subject, "pool/legacy");
    assert.deepEqual(
      flattenGroup(groups[0]!).map((f) => f.id),
      ["masq/agent-missing", "masq/exempt-destination", "masq/no-return-route"],
    );
  });

  it("VPN: the first silent hop follows from forwarding off in the VPN pod", async () => {
    const groups = groupByCause(await findingsOf("examples/vpn-forwarding-off"));
    assert.equal(groups.length, 1);
    assert.deepEqual(
      flattenGroup(groups[0]!).map((f) => f.id),
      ["vpn/forwarding-disabled", "vpn/first-silent-hop"],
    );
  });
});
