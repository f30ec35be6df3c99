/**
 * Flannel's config and rules: the upstream manifest (flannel v0.28.9 Documentation/kube-flannel.yml,
 * copied verbatim into fixtures/) read as flanneld reads it, and the rules of masqRules loaded with
 * the real iptables-restore: iptables-save prints them back line for line.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { attributeRule, factsOfRule } from "../../iptables/owners.ts";
import { parseIptablesSave } from "../../iptables/save-parser.ts";
import { iptablesNamespace } from "../../iptables/test-helpers/iptables-netns.ts";
import { kernelSkip } from "../../lab/kernel-guard.ts";
import { readFlannelFlags } from "./daemonset.ts";
import { readFlannelNetConf } from "./netconf.ts";
import { flannelMasqRules, flannelRestoreText } from "./rules.ts";

const FILE = "cluster/kube-flannel.yaml";
const upstream = readFileSync(
  new URL("./fixtures/kube-flannel-v0.28.9.yml", import.meta.url),
  "utf8",
);
const objectsOf = (t: string) => readKubeObjects(t, FILE).value;

describe("readFlannelNetConf", () => {
  it("reads the upstream net-conf.json with the lines of Network and Backend", () => {
    const { value, diagnostics } = readFlannelNetConf(objectsOf(upstream));
    assert.deepEqual(diagnostics, []);
    assert.equal(value?.networkText, "10.244.0.0/16");
    assert.equal(value?.backendType, "vxlan");
    assert.equal(value?.enableIPv4, true);
    assert.equal(value?.enableNFTables, false);
    const lineOf = (re: RegExp) => upstream.split("\n").findIndex((l) => re.test(l)) + 1;
    assert.equal(value?.sources.get("Network")?.line, lineOf(/"Network": "10\.244\.0\.0\/16"/));
    assert.equal(value?.sources.get("Backend")?.line, lineOf(/"Type": "vxlan"/));
  });
  it("matches keys as Go does (case-insensitively) and defaults the backend to udp", () => {
    const t = upstream
      .replace('"Network"', '"network"')
      .replace(/"Backend": \{\n\s+"Type": "vxlan"\n\s+\}/, '"X": 1');
    const { value } = readFlannelNetConf(objectsOf(t));
    assert.equal(value?.networkText, "10.244.0.0/16");
    assert.equal(value?.backendType, "udp");
  });
  it("names what flanneld refuses, with the line", () => {
    const { value, diagnostics } = readFlannelNetConf(
      objectsOf(upstream.replace('"Network": "10.244.0.0/16"', '"Network": "10.244.0.0/33"')),
    );
    assert.equal(value?.network, undefined);
    assert.equal(diagnostics.length, 1);
    assert.equal(diagnostics[0]?.source?.file, FILE);
    assert.match(diagnostics[0]?.message ?? "", /not an IPv4 CIDR/);
  });
  it("never throws on mutated manifests", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: upstream.length }),
        fc.string({ maxLength: 6 }),
        (at, s) => {
          const t = upstream.slice(0, at) + s + upstream.slice(at + 1);
          const r = readFlannelNetConf(objectsOf(t));
          for (const d of r.diagnostics) assert.equal(d.source?.file, FILE);
          readFlannelFlags(objectsOf(t));
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe("readFlannelFlags", () => {
  it("finds --ip-masq on the upstream DaemonSet, with its line", () => {
    const f = readFlannelFlags(objectsOf(upstream));
    assert.equal(f?.ipMasq, true);
    assert.equal(f?.container, "kube-flannel");
    const line = upstream.split("\n").findIndex((l) => l.trim() === "- --ip-masq") + 1;
    assert.equal(f?.ipMasqSource?.line, line);
  });
  it("reads Go's bool flag forms; absent means false", () => {
    assert.equal(
      readFlannelFlags(objectsOf(upstream.replace(/^\s+- --ip-masq\n/m, "")))?.ipMasq,
      false,
    );
    assert.equal(
      readFlannelFlags(objectsOf(upstream.replace("- --ip-masq\n", "- --ip-masq=false\n")))?.ipMasq,
      false,
    );
    assert.equal(
      readFlannelFlags(objectsOf(upstream.replace("- --ip-masq\n", "- -ip-masq=t\n")))?.ipMasq,
      true,
    );
  });
});

describe("flannelMasqRules", () => {
  it("writes masqRules' rules in its order, attributed to Flannel", () => {
    const rules = flannelMasqRules({
      family: 4,
      network: "10.244.0.0/16",
      podSubnet: "10.244.1.0/24",
    });
    assert.equal(rules.length, 7);
    assert.equal(
      rules[5],
      '-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 -m comment --comment "flanneld masq" -j MASQUERADE --random-fully',
    );
    const dump = parseIptablesSave(
      flannelRestoreText({ family: 4, network: "10.244.0.0/16", podSubnet: "10.244.1.0/24" }),
      "x",
    ).value;
    for (const c of dump.tables.get("nat")?.chains.values() ?? []) {
      for (const r of c.rules) assert.equal(attributeRule(factsOfRule(r)).owner, "flannel");
    }
    const v6 = flannelMasqRules({
      family: 6,
      network: "fd00:10::/56",
      podSubnet: "fd00:10:0:1::/64",
      randomFully: false,
    });
    assert.match(v6[5] ?? "", /! -d ff00::\/8 .* -j MASQUERADE$/);
  });
});

describe("flannel's rules on the real iptables", { skip: kernelSkip() }, () => {
  const suite = iptablesNamespace("ppfl");
  it("iptables-save prints them back line for line", async () => {
    const input = { family: 4 as const, network: "10.244.0.0/16", podSubnet: "10.244.1.0/24" };
    const r = await suite.ns.exec(["iptables-restore", "--noflush"], {
      input: flannelRestoreText(input),
    });
    assert.equal(r.code, 0, r.stderr);
    const saved = (await suite.ns.exec(["iptables-save", "-t", "nat"])).stdout
      .split("\n")
      .filter((l) => /^-A (POSTROUTING|FLANNEL-POSTRTG) /.test(l));
    assert.deepEqual(saved, flannelMasqRules(input));
  });
});
