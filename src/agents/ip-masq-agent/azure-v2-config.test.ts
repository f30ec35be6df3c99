import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { readAgentIntent } from "../../cases/masquerade/intent.ts";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { readAzureV2Config } from "./azure-v2-config.ts";
import { azureV2FlagsFromArgs } from "./azure-v2-flags.ts";
import { azureV2Chain } from "./azure-v2-rules.ts";
import { mergeConfigDir } from "./config-merge.ts";
import { configDirLayout } from "./config-volume.ts";
import { DEFAULT_AGENT_FLAGS } from "./flags.ts";
import { flavourOf } from "./flavour.ts";

const dir = fileURLToPath(new URL("./fixtures/aks/", import.meta.url));
const read = (name: string, text = readFileSync(`${dir}${name}`, "utf8")) =>
  readKubeObjects(text, name).value;
const ds = read("daemonset.yaml")[0]!;
const maps = read("configmaps.yaml");
const cidrs = (c: { nonMasqueradeCIDRs: readonly { text: string }[] | null }) =>
  (c.nonMasqueradeCIDRs ?? []).map((e) => e.text);
const flags = { nomasqAllReservedRanges: false, enableIpv6: false };

describe("Azure ip-masq-agent-v2 config from AKS objects", () => {
  it("lays out the projected volume as the kubelet does, each file from its ConfigMap key", () => {
    const layout = configDirLayout(ds, 0, maps, "/etc/config");
    assert.deepEqual(
      layout.files.map((f) => [f.name, f.configMap, f.key]),
      [
        ["ip-masq-agent", "azure-ip-masq-agent-config", "ip-masq-agent"],
        [
          "ip-masq-agent-reconciled",
          "azure-ip-masq-agent-config-reconciled",
          "ip-masq-agent-reconciled",
        ],
      ],
    );
    assert.equal(layout.podBlocked, undefined);
    // where the DaemonSet projects the reconciled key
    assert.equal(layout.files[1]!.declaredAt.file, "daemonset.yaml");
    assert.match(layout.files[1]!.declaredAt.text ?? "", /key: ip-masq-agent-reconciled/);
  });

  it("merges every file's list, ORs masqLinkLocal, and cites each CIDR on its ConfigMap line", () => {
    const r = readAzureV2Config(ds, maps);
    assert.equal(r.outcome.error, undefined);
    assert.equal(r.outcome.usedDefaults, false);
    assert.deepEqual(cidrs(r.outcome.config), [
      "10.0.0.0/8",
      "172.20.0.0/16",
      "10.244.0.0/16",
      "10.224.0.0/12",
    ]);
    assert.equal(r.outcome.config.masqLinkLocal, true);
    const reconciled = r.outcome.config.nonMasqueradeCIDRs!.find((e) => e.text === "10.224.0.0/12");
    assert.equal(reconciled?.source?.file, "configmaps.yaml");
    assert.equal(reconciled?.source?.line, 31);
    assert.match(reconciled?.source?.text ?? "", /- 10\.224\.0\.0\/12/);
    assert.equal(r.flags.resyncIntervalSeconds, 60);
  });

  it("targets the user's ConfigMap, never the reconciled one, and names what it cannot drop", () => {
    const r = readAzureV2Config(ds, maps);
    assert.equal(r.target.name, "azure-ip-masq-agent-config");
    assert.equal(r.target.key, "ip-masq-agent");
    assert.deepEqual(
      r.target.fixed.map((f) => [f.text, f.configMap]),
      [
        ["10.244.0.0/16", "azure-ip-masq-agent-config-reconciled"],
        ["10.224.0.0/12", "azure-ip-masq-agent-config-reconciled"],
      ],
    );
  });

  it("names a fork's key the agent does not read, with its line", () => {
    const r = readAzureV2Config(ds, maps);
    const d = r.diagnostics.find((x) => x.code === "IPMASQ_KEY_OTHER_AGENT");
    assert.ok(d, JSON.stringify(r.diagnostics));
    assert.match(d.message, /NonMasqueradeSrcCIDRs.*Tencent TKE/);
    assert.equal(d.source?.line, 17);
  });

  it("reads only the reconciled file when the user's optional ConfigMap is absent", () => {
    const only = maps.filter((m) => m.name.endsWith("-reconciled"));
    const r = readAzureV2Config(ds, only);
    assert.deepEqual(cidrs(r.outcome.config), ["10.244.0.0/16", "10.224.0.0/12"]);
    assert.equal(r.target.name, "azure-ip-masq-agent-config");
    assert.equal(r.target.object, undefined);
  });

  it("the upstream defaults apply only when no ip-masq* file is found", () => {
    const r = readAzureV2Config(ds, []);
    assert.equal(r.outcome.usedDefaults, true);
    assert.deepEqual(cidrs(r.outcome.config), ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]);
    assert.match(r.defaultsReason ?? "", /no ConfigMap data/);
  });

  it("without the DaemonSet, reads AKS's ConfigMaps as every data key a file, and says so", () => {
    const r = readAzureV2Config(undefined, maps);
    assert.equal(cidrs(r.outcome.config).length, 4);
    assert.ok(r.diagnostics.some((d) => d.code === "IPMASQ_LAYOUT_ASSUMED"));
  });

  it("readAgentIntent picks the fork from the image and keeps the upstream path otherwise", () => {
    const intent = readAgentIntent([ds, ...maps]);
    assert.equal(intent.flavour, "azure-v2");
    assert.equal(intent.configMap?.name, "azure-ip-masq-agent-config");
    assert.equal(intent.flags.randomFully, false);
    assert.equal(intent.planTarget?.key, "ip-masq-agent");
    assert.equal(cidrs(intent.config).length, 4);
  });
});

describe("the fork's merge (syncConfig)", () => {
  it("a file without nonMasqueradeCIDRs still replaces the defaults with an empty list", () => {
    const r = mergeConfigDir([{ name: "ip-masq-agent", content: "masqLinkLocal: true\n" }], flags);
    assert.equal(r.usedDefaults, false);
    assert.deepEqual(cidrs(r.config), []);
  });

  it("skips files without the ip-masq prefix and reads the rest sorted by name", () => {
    const r = mergeConfigDir(
      [
        { name: "ip-masq-b", content: "nonMasqueradeCIDRs: [10.2.0.0/16, 10.1.0.0/16]" },
        { name: "config", content: "nonMasqueradeCIDRs: [10.9.0.0/16]" },
        { name: "ip-masq-a", content: '{"nonMasqueradeCIDRs": ["10.1.0.0/16"]}' },
      ],
      flags,
    );
    assert.deepEqual(r.skipped, ["config"]);
    assert.deepEqual(cidrs(r.config), ["10.1.0.0/16", "10.2.0.0/16"]);
  });

  it("stops at the first refused file with the agent's fatal text", () => {
    const r = mergeConfigDir(
      [
        { name: "ip-masq-agent", content: "nonMasqueradeCIDRs: [10.0.0.1/8]" },
        { name: "ip-masq-z", content: "nonMasqueradeCIDRs: [fd00::/8]" },
      ],
      flags,
    );
    assert.equal(r.error?.file, "ip-masq-agent");
    assert.equal(
      r.error?.message,
      'the daemon encountered an error: error syncing configuration: config file "ip-masq-agent" is invalid: CIDR "10.0.0.1/8" is not aligned to a CIDR block, ip: "10.0.0.1" network: "10.0.0.0/8"',
    );
  });

  it("IPv6 lists need --enable-ipv6, then go to ip6tables only", () => {
    const files = [
      { name: "ip-masq-agent", content: "nonMasqueradeCIDRs: [fd00:10::/64, 10.0.0.0/8]" },
    ];
    assert.match(mergeConfigDir(files, flags).error?.message ?? "", /ipv6 is not enabled/);
    const on = azureV2FlagsFromArgs(["--enable-ipv6"]).value.flags;
    const r = mergeConfigDir(files, { ...flags, enableIpv6: true });
    const v6 = azureV2Chain(r.config, 6, on);
    assert.deepEqual(
      v6?.rules.map((x) => x.destination ?? x.kind),
      ["fe80::/10", "fd00:10::/64", "masquerade"],
    );
    assert.equal(azureV2Chain(r.config, 6, DEFAULT_AGENT_FLAGS), undefined);
  });
});

describe("the fork's flags and rules", () => {
  it("has no --random-fully: it stops the agent; --resync-interval is whole seconds", () => {
    assert.match(azureV2FlagsFromArgs(["--random-fully"]).value.fatal ?? "", /not defined/);
    assert.equal(azureV2FlagsFromArgs(["--resync-interval", "30"]).value.resyncIntervalSeconds, 30);
    assert.match(azureV2FlagsFromArgs(["--resync-interval=1m"]).value.fatal ?? "", /parse error/);
  });

  it("writes a plain MASQUERADE and the jump comment with its literal quotes", () => {
    const r = mergeConfigDir(
      [{ name: "ip-masq-agent", content: "nonMasqueradeCIDRs: [10.0.0.0/8]" }],
      flags,
    );
    const c = azureV2Chain(r.config, 4, azureV2FlagsFromArgs([]).value.flags)!;
    assert.equal(
      c.jump.saved,
      '-A POSTROUTING -m comment --comment "\\"ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom IP-MASQ-AGENT chain\\"" -m addrtype ! --dst-type LOCAL -j IP-MASQ-AGENT',
    );
    assert.equal(
      c.rules.at(-1)?.saved,
      '-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE',
    );
  });
});

describe("flavour and volume edge cases", () => {
  it("tells the fork from the image, else the DaemonSet's name", () => {
    assert.equal(flavourOf("mcr.microsoft.com/aks/ip-masq-agent-v2:v0.1.15"), "azure-v2");
    assert.equal(flavourOf("registry.k8s.io/networking/ip-masq-agent:v2.9.3"), "upstream");
    assert.equal(flavourOf("example.com/other:1", "azure-ip-masq-agent"), "azure-v2");
    assert.equal(flavourOf("example.com/other:1", "x"), undefined);
  });

  it("names the fork's own example's indentation slip (name beside configMap:)", () => {
    const text = readFileSync(`${dir}daemonset.yaml`, "utf8").replace(
      /- configMap:\n {18}name: azure-ip-masq-agent-config\n {18}optional: true\n {18}items:\n {20}- key: ip-masq-agent\n {22}path: ip-masq-agent\n {22}mode: 444\n/,
      "- configMap:\n                name: azure-ip-masq-agent-config\n                optional: true\n                items:\n                  - key: ip-masq-agent\n                    path: ip-masq-agent\n",
    );
    const slipped = read("daemonset.yaml", text)[0]!;
    const layout = configDirLayout(slipped, 0, maps, "/etc/config");
    assert.ok(layout.diagnostics.some((d) => d.code === "IPMASQ_PROJECTION_SHAPE"));
  });

  it("a ConfigMap that is not optional and absent blocks the pod", () => {
    const text = readFileSync(`${dir}daemonset.yaml`, "utf8").replace(
      / {18}optional: true/,
      "                  optional: false",
    );
    const strict = read("daemonset.yaml", text)[0]!;
    const layout = configDirLayout(strict, 0, [], "/etc/config");
    assert.match(layout.podBlocked ?? "", /azure-ip-masq-agent-config" not found/);
  });

  it("a configMap volume without items projects every key; a subPath mount one file", () => {
    const text = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ip-masq-agent, namespace: kube-system}
spec:
  template:
    spec:
      containers:
        - name: ip-masq-agent
          image: registry.k8s.io/networking/ip-masq-agent:v2.9.3
          volumeMounts:
            - {name: cfg, mountPath: /etc/config/ip-masq-agent, subPath: custom}
      volumes:
        - name: cfg
          configMap: {name: azure-ip-masq-agent-config}
`;
    const cm = read(
      "cm.yaml",
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: azure-ip-masq-agent-config, namespace: kube-system}\ndata:\n  custom: 'nonMasqueradeCIDRs: [10.0.0.0/8]'\n",
    );
    const layout = configDirLayout(read("ds.yaml", text)[0]!, 0, cm, "/etc/config");
    assert.deepEqual(
      layout.files.map((f) => [f.name, f.key]),
      [["ip-masq-agent", "custom"]],
    );
  });
});
