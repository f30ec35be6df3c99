import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { agentView } from "./agent-view.ts";

const dir = fileURLToPath(new URL("./fixtures/aks/", import.meta.url));
const file = (name: string) => ({ text: readFileSync(`${dir}${name}`, "utf8"), file: name });
const list = (v: ReturnType<typeof agentView>) =>
  (v.outcome?.config.nonMasqueradeCIDRs ?? []).map((e) => e.text);

describe("agentView given a DaemonSet: the files its volume lays out", () => {
  it("Azure ip-masq-agent-v2: both ConfigMaps merged, no longer the RFC 1918 defaults", () => {
    const v = agentView({ daemonSet: file("daemonset.yaml"), config: file("configmaps.yaml") });
    assert.equal(v.flags.fatal, undefined, "--resync-interval is the fork's flag");
    assert.equal(v.outcome?.usedDefaults, false);
    assert.deepEqual(list(v), ["10.0.0.0/8", "172.20.0.0/16", "10.244.0.0/16", "10.224.0.0/12"]);
    // masqLinkLocal is on because the reconciled file turns it on: cited there
    assert.equal(v.outcome?.config.masqLinkLocal, true);
    assert.equal(v.outcome?.config.sources.masqLinkLocal?.line, 32);
    assert.ok(v.diagnostics.some((d) => d.code === "IPMASQ_KEY_OTHER_AGENT"));
  });

  it("the upstream agent reads the file its volume names, whatever the ConfigMap and key", () => {
    const ds = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ip-masq-agent, namespace: kube-system}
spec:
  template:
    spec:
      containers:
        - name: ip-masq-agent
          image: registry.k8s.io/networking/ip-masq-agent:v2.12.0
          volumeMounts: [{name: config, mountPath: /etc/config}]
      volumes:
        - name: config
          configMap:
            name: masq-settings
            optional: true
            items: [{key: agent.yaml, path: ip-masq-agent}]
`;
    const cm = `apiVersion: v1
kind: ConfigMap
metadata: {name: masq-settings, namespace: kube-system}
data:
  agent.yaml: |
    nonMasqueradeCIDRs:
      - 10.4.0.0/14
    NonMasqueradeSrcCIDRs: [10.4.0.5/32]
`;
    const v = agentView({
      daemonSet: { text: ds, file: "ds.yaml" },
      config: { text: cm, file: "cm.yaml" },
    });
    assert.deepEqual(list(v), ["10.4.0.0/14"]);
    assert.equal(v.input?.configMap?.name, "masq-settings");
    assert.equal(v.outcome?.config.nonMasqueradeCIDRs?.[0]?.source?.line, 7);
    // a fork's key is named with its line, never dropped without a word
    const other = v.diagnostics.find((d) => d.code === "IPMASQ_KEY_OTHER_AGENT");
    assert.equal(other?.source?.line, 8);
    // without the DaemonSet, the ConfigMap is not one the agent would find
    const alone = agentView({ config: { text: cm, file: "cm.yaml" } });
    assert.equal(alone.outcome?.usedDefaults, true);
  });
});
