import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { agentView } from "./agent-view.ts";
import { readAgentConfigInput } from "./config-source.ts";

const CM_YAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: ip-masq-agent
  namespace: kube-system
data:
  config: |
    nonMasqueradeCIDRs:
      - 10.0.0.0/8
      - 10.128.0.0/20
    masqLinkLocal: false
    resyncInterval: 60s
`;

describe("readAgentConfigInput", () => {
  it("reads a raw config file as the file itself", () => {
    const r = readAgentConfigInput("nonMasqueradeCIDRs: [10.0.0.0/8]\n", "cfg.yaml");
    assert.equal(r.value.origin, "file");
    assert.equal(r.value.file.present, true);
  });

  it("reads data.config of a ConfigMap and cites the lines inside the block", () => {
    const view = agentView({ config: { text: CM_YAML, file: "cluster/cm.yaml" } });
    const list = view.outcome?.config.nonMasqueradeCIDRs ?? [];
    assert.deepEqual(
      list.map((e) => [e.text, e.source?.file, e.source?.line]),
      [
        ["10.0.0.0/8", "cluster/cm.yaml", 9],
        ["10.128.0.0/20", "cluster/cm.yaml", 10],
      ],
    );
    assert.equal(view.input?.configMap?.name, "ip-masq-agent");
  });

  it("reads the ConfigMap as kubectl -o json prints it, citing the config key's line", () => {
    const json = JSON.stringify(
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "ip-masq-agent", namespace: "kube-system" },
        data: { config: "nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 10.0.0.1/8\n" },
      },
      null,
      4,
    );
    const view = agentView({ config: { text: json, file: "cm.json" } });
    assert.equal(
      view.outcome?.error?.message,
      'CIDR "10.0.0.1/8" is not aligned to a CIDR block, ip: "10.0.0.1" network: "10.0.0.0/8"',
    );
    assert.equal(view.outcome?.error?.source?.file, "cm.json");
    assert.equal(view.outcome?.error?.source?.line, 9); // the "config": line
  });

  it("finds the agent's ConfigMap in a List among others", () => {
    const list = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: other, namespace: default}
  data: {config: "nonMasqueradeCIDRs: []"}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: ip-masq-agent, namespace: kube-system}
  data:
    config: |
      nonMasqueradeCIDRs: [192.168.0.0/16]
`;
    const view = agentView({ config: { text: list, file: "all.yaml" } });
    assert.deepEqual(
      view.outcome?.config.nonMasqueradeCIDRs?.map((e) => e.text),
      ["192.168.0.0/16"],
    );
  });

  it("treats a wrong data key as no file: defaults, with a note naming the keys", () => {
    const wrong = CM_YAML.replace("  config: |", "  ip-masq-agent: |");
    const view = agentView({ config: { text: wrong, file: "cm.yaml" } });
    assert.equal(view.outcome?.usedDefaults, true);
    assert.deepEqual(
      view.outcome?.config.nonMasqueradeCIDRs?.map((e) => e.text),
      ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
    );
    const note = view.diagnostics.find((d) => d.code === "IPMASQ_CONFIGMAP_KEY");
    assert.match(note?.message ?? "", /has no data key "config" \(it has: ip-masq-agent\)/);
    assert.equal(note?.source?.line, 6);
  });

  it("reads binaryData.config as the projected file", () => {
    const bin = `apiVersion: v1
kind: ConfigMap
metadata: {name: ip-masq-agent}
binaryData:
  config: ${Buffer.from("masqLinkLocal: true\n").toString("base64")}
`;
    const view = agentView({ config: { text: bin, file: "b.yaml" } });
    assert.equal(view.outcome?.config.masqLinkLocal, true);
  });

  it("uses the reserved ranges when the DaemonSet says so and there is no config", () => {
    const ds = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ip-masq-agent, namespace: kube-system}
spec:
  template:
    spec:
      containers:
      - name: ip-masq-agent
        image: registry.k8s.io/networking/ip-masq-agent:v2.12.0
        args: [--masq-chain=IP-MASQ, --nomasq-all-reserved-ranges]
`;
    const view = agentView({ daemonSet: { text: ds, file: "ds.yaml" } });
    assert.equal(view.flags.flags.masqChain, "IP-MASQ");
    assert.equal(view.outcome?.config.nonMasqueradeCIDRs?.length, 11);
    const override = agentView({
      daemonSet: { text: ds, file: "ds.yaml" },
      flagArgs: ["--nomasq-all-reserved-ranges=false"],
    });
    assert.equal(override.outcome?.config.nonMasqueradeCIDRs?.length, 3);
  });
});

describe("agentView on arbitrary input (fuzz)", () => {
  const pieces = [
    "apiVersion: v1",
    "kind: ConfigMap",
    "kind: List",
    "items:",
    "- ",
    "metadata: {name: ip-masq-agent}",
    "data:",
    "  config: |",
    "  config: ",
    "    nonMasqueradeCIDRs: [10.0.0.0/8]",
    "    - 10.0.0.1/8",
    "binaryData:",
    '  config: "!!!"',
    "{",
    "}",
    '"',
    "\t",
    "---",
    "&a *a",
  ];
  it("never throws, and always answers with a config or an error", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...pieces), { maxLength: 14 }),
        fc.string({ maxLength: 20 }),
        (parts, noise) => {
          const text = parts.join("\n") + noise;
          const view = agentView({
            config: { text, file: "f.yaml" },
            daemonSet: { text, file: "f.yaml" },
          });
          if (view.flags.fatal === undefined) assert.ok(view.outcome);
          for (const d of view.diagnostics) assert.ok(d.message.length > 0);
        },
      ),
      { numRuns: 1500 },
    );
  });

  it("reads a 20000-entry ConfigMap, citing the last entry's line", () => {
    const entries = Array.from(
      { length: 20000 },
      (_, i) => `      - 10.${(i >> 8) & 255}.${i & 255}.0/24`,
    );
    const text = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ip-masq-agent\ndata:\n  config: |\n    cidrLimit: 100000\n    nonMasqueradeCIDRs:\n${entries.join("\n")}\n`;
    const view = agentView({ config: { text, file: "big.yaml" } });
    assert.equal(view.outcome?.error, undefined);
    assert.equal(view.outcome?.config.nonMasqueradeCIDRs?.at(-1)?.source?.line, 20008);
  });
});
