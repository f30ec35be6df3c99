/**
 * Azure ip-masq-agent-v2's rules on a real kernel, installed as the lab installs them (the fork's
 * EnsureChain, EnsureRule and restore): iptables-save shows exactly the lines podpath expects for
 * the fork (quoted jump comment, plain MASQUERADE), in IPv4 and IPv6, and the installed chain
 * compares in sync with the fork's expected chain; a second sync adds no second jump. Pure parts
 * (the merged config of the two AKS files, the objects) are checked without the kernel.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { readAzureV2Config } from "../../agents/ip-masq-agent/azure-v2-config.ts";
import { azureV2Chain } from "../../agents/ip-masq-agent/azure-v2-rules.ts";
import { defaultMasqConfig } from "../../agents/ip-masq-agent/config.ts";
import { compareAgentChain } from "../../agents/ip-masq-agent/drift.ts";
import { DEFAULT_AGENT_FLAGS } from "../../agents/ip-masq-agent/flags.ts";
import { agentSavedLines } from "../../agents/ip-masq-agent/rules.ts";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { parseIptablesSave } from "../../iptables/save-parser.ts";
import { kernelSkip } from "../kernel-guard.ts";
import { createLab, type Lab } from "../netns.ts";
import {
  aksAgentConfig,
  aksAgentObjects,
  aksUserText,
  installAzureV2Rules,
  reconciledText,
} from "./masquerade-aks.ts";
import { kubectlList } from "./masquerade-cluster.ts";

const USER = aksUserText(["10.0.0.0/8", "fd00:10::/64"]);
const RECONCILED = reconciledText(["10.4.0.0/14", "10.128.0.0/20"]);
const skip = kernelSkip();

describe("AKS flavour of the masquerade lab (pure)", () => {
  it("merges the user's and the reconciled file as the fork does", () => {
    const r = aksAgentConfig(USER, RECONCILED, true, defaultMasqConfig());
    assert.equal(r.error, undefined);
    assert.deepEqual(
      (r.config.nonMasqueradeCIDRs ?? []).map((e) => e.text),
      ["10.0.0.0/8", "fd00:10::/64", "10.4.0.0/14", "10.128.0.0/20"],
    );
    assert.equal(r.config.masqLinkLocal, true);
    // without --enable-ipv6 the fork exits; the previous rules stay
    const off = aksAgentConfig(USER, RECONCILED, false, defaultMasqConfig());
    assert.match(off.error?.message ?? "", /ipv6 is not enabled/);
  });

  it("the objects it writes read back, through the DaemonSet's volume, as the same config", () => {
    const text = kubectlList(
      aksAgentObjects(
        { nodes: [], agentConfig: USER, createdAt: "2026-01-01T00:00:00Z", enableIpv6: true },
        USER,
        RECONCILED,
      ),
    );
    const objects = readKubeObjects(text, "cluster/azure-ip-masq-agent.yaml").value;
    const ds = objects.find((o) => o.kind === "DaemonSet");
    const r = readAzureV2Config(ds, objects);
    assert.deepEqual(
      r.files.map((f) => [f.name, f.configMap]),
      [
        ["ip-masq-agent", "azure-ip-masq-agent-config"],
        ["ip-masq-agent-reconciled", "azure-ip-masq-agent-config-reconciled"],
      ],
    );
    assert.equal(r.flags.flags.enableIpv6, true);
    assert.equal((r.outcome.config.nonMasqueradeCIDRs ?? []).length, 4);
  });
});

describe("Azure ip-masq-agent-v2 rules on a real kernel", { skip }, () => {
  let lab: Lab | undefined;
  before(async () => {
    lab = await createLab();
  });
  after(async () => {
    await lab?.destroy();
  });

  for (const family of [4, 6] as const) {
    it(`IPv${family}: iptables-save shows the fork's lines exactly, in sync, one jump after two syncs`, async () => {
      const ns = await lab!.addNamespace(`aks${family}`);
      const { config } = aksAgentConfig(USER, RECONCILED, true, defaultMasqConfig());
      await installAzureV2Rules(ns, config, family, true);
      await installAzureV2Rules(ns, config, family, true);
      const tool = family === 4 ? "iptables-save" : "ip6tables-save";
      const r = await ns.exec([tool, "-t", "nat"]);
      assert.equal(r.code, 0, r.stderr);
      const lines = r.stdout.split("\n");
      const chain = azureV2Chain(config, family, { ...DEFAULT_AGENT_FLAGS, enableIpv6: true })!;
      for (const want of agentSavedLines(chain)) {
        assert.ok(lines.includes(want), `missing:\n${want}\n---\n${r.stdout}`);
      }
      assert.equal(lines.filter((l) => l.startsWith("-A POSTROUTING")).length, 1);
      const dump = parseIptablesSave(r.stdout, "iptables-save.txt", { family }).value;
      const cmp = compareAgentChain(chain, dump);
      assert.deepEqual(cmp.drift, []);
    });
  }
});
