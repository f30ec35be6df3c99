/**
 * plan vpn for an IPsec pod, on snapshots assembled from the ipsec lab's real outputs (the
 * gateway's ipsec.conf, statusall, sysctl, iptables-save, ip addr of charon 5.9.8 in a namespace)
 * and the lab's manifests: forwarding made durable in the pod's own terms, nothing proposed once
 * it is, the pool's masquerade recognised, and nothing of another kind in any of it.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { IPSEC_NS, IPSEC_POD, ipsecClusterFiles } from "../../../lab/scenarios/ipsec-cluster.ts";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import { analyzeVpn } from "../analyze.ts";
import { resolveVpn } from "../input.ts";
import { planVpn, type VpnPlan } from "../plan.ts";
import { vpnInputFromSnapshot } from "../snapshot-input.ts";

const data = (f: string) => readFileSync(new URL(`testdata/${f}`, import.meta.url), "utf8");
const tmp = mkdtempSync(join(tmpdir(), "podpath-ipsec-plan-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A snapshot of the lab's gateway with the manifest fix given; `masquerade` false drops the rule. */
function snapshot(
  name: string,
  manifest: "none" | "init-container" | "pod-sysctls",
  masquerade = true,
) {
  const dir = join(tmp, name);
  const pod = `pods/${IPSEC_NS}/${IPSEC_POD}`;
  const files: Record<string, string> = {
    ...ipsecClusterFiles({
      pool: "10.9.0.0/24",
      vpnPodIp: "10.244.1.10",
      targetPodIp: "10.244.2.20",
      dnsPodIp: "10.244.3.53",
      webServiceIp: "10.96.0.20",
      dnsServiceIp: "10.96.0.10",
      podCidr: "10.244.0.0/16",
      manifest,
      policy: false,
    }),
    [`${pod}/ipsec.conf`]: data("ipsec-gateway.conf"),
    [`${pod}/ipsec-statusall.txt`]: data("ipsec-statusall.txt"),
    [`${pod}/sysctl.txt`]: data("ipsec-sysctl.txt"),
    [`${pod}/ip-addr.txt`]: data("ipsec-ip-addr.txt"),
    [`${pod}/iptables-save.txt`]: masquerade
      ? data("ipsec-iptables-save.txt")
      : data("ipsec-iptables-save.txt").replace(/^-A POSTROUTING.*\n/m, ""),
  };
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return dir;
}

function planOf(dir: string): VpnPlan {
  const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(dir)));
  return planVpn(resolveVpn(input)!, input.objects);
}

const OTHER_KINDS = /openvpn|ovpn|wg0|wg-quick|wireguard|ipForwardInitContainer|configure\.sh/i;

describe("plan vpn for an IPsec gateway", () => {
  it("forwarding set by hand: the init container and pod sysctls, no chart switch, nothing of OpenVPN", () => {
    const plan = planOf(snapshot("by-hand", "none"));
    assert.deepEqual(plan.alreadySet, []);
    const by = Object.fromEntries(plan.strategies.map((s) => [s.strategy, s]));
    assert.equal(by["init-container"]?.applicable, true);
    assert.equal(by["pod-sysctls"]?.applicable, true);
    assert.equal(by["chart-value"]?.applicable, false);
    assert.match(by["chart-value"]?.whyNot ?? "", /no strongSwan or libreswan chart/);
    assert.equal(plan.returnPath.needed, false, plan.returnPath.explanation);
    assert.doesNotMatch(JSON.stringify(plan), OTHER_KINDS);
  });

  for (const fix of ["init-container", "pod-sysctls"] as const) {
    it(`already durable (${fix}): nothing proposed for forwarding`, () => {
      const plan = planOf(snapshot(`durable-${fix}`, fix));
      assert.equal(plan.alreadySet[0]?.kind, fix);
      for (const s of plan.strategies) {
        assert.equal(s.applicable, false, s.strategy);
        assert.equal(s.patch, undefined);
        assert.deepEqual(s.commands, []);
      }
    });
  }

  it("without the pool's masquerade: the idempotent rule for leftupdown, and the same finding as OpenVPN's", () => {
    const dir = snapshot("no-masq", "init-container", false);
    const plan = planOf(dir);
    assert.equal(plan.returnPath.needed, true);
    assert.match(
      plan.returnPath.command ?? "",
      /^iptables -t nat -C POSTROUTING -s 10\.9\.0\.0\/24 -o eth0 -j MASQUERADE 2>\/dev\/null \|\| iptables -t nat -A/,
    );
    assert.match(plan.returnPath.command ?? "", /leftupdown/);
    const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(dir)));
    const a = analyzeVpn(input);
    assert.equal(a.context?.kind.kind, "ipsec");
    assert.deepEqual(
      a.findings.map((f) => f.id),
      ["vpn/client-pool-unroutable"],
    );
    for (const m of a.missing) assert.doesNotMatch(`${m.file} ${m.command ?? ""}`, OTHER_KINDS);
  });
});
