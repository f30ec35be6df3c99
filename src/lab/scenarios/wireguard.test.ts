/**
 * Kernel test: the WireGuard replica on a real tunnel (wireguard-go + wg in network namespaces).
 * Each fault is found with its problem and gone with its fix, `verify` calls the fix intended, and
 * the same fault gives the same finding ids as the OpenVPN replica. Skips (with the reason) when
 * not root, or when wireguard-go is not built (scripts/build-components.sh); in CI it must run.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { componentSkip } from "../../../test/components/component-guard.ts";
import { vpnFindings } from "../../cases/vpn/analyze.ts";
import { verifyVpnChange } from "../../cases/vpn/proof.ts";
import { vpnInputFromSnapshot } from "../../cases/vpn/snapshot-input.ts";
import type { FindingId } from "../../model/types.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { createLab } from "../netns.ts";
import { scenario as openvpnScenario, VpnOptions } from "./vpn.ts";
import { scenario, WireguardOptions } from "./wireguard.ts";

const skip = componentSkip("wireguard-go");
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Replica {
  readonly ids: Set<FindingId>;
  readonly dir: string;
}

async function wireguard(options: Record<string, string | true>): Promise<Replica> {
  const lab = await createLab({ prefix: "ppwg" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-wg-test-"));
  dirs.push(dir);
  try {
    await scenario.run({ lab, outDir: dir, log: () => {} }, WireguardOptions.parse(options));
  } finally {
    await lab.destroy();
  }
  const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(dir)));
  return { ids: new Set(vpnFindings(input).map((f) => f.id)), dir };
}

async function openvpn(options: Record<string, string | true>): Promise<Set<FindingId>> {
  const lab = await createLab({ prefix: "ppwo" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-wg-ovpn-test-"));
  dirs.push(dir);
  try {
    await openvpnScenario.run({ lab, outDir: dir, log: () => {} }, VpnOptions.parse(options));
  } finally {
    await lab.destroy();
  }
  const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(dir)));
  return new Set(vpnFindings(input).map((f) => f.id));
}

const load = (dir: string) => loadSnapshot(openSnapshot(dir));
const sorted = (s: Set<FindingId>) => [...s].sort();

describe("lab wireguard: findings appear with the problem and disappear with the fix", {
  skip,
  concurrency: false,
}, () => {
  it("forwarding off → forwarding-disabled; the pod-sysctls fix → gone, and verify calls it intended", async () => {
    const off = await wireguard({ "ip-forward": "0" });
    assert.ok(off.ids.has("vpn/forwarding-disabled"), sorted(off.ids).join());
    assert.ok(off.ids.has("vpn/first-silent-hop"));
    const fixed = await wireguard({ "ip-forward": "1", manifest: "pod-sysctls" });
    assert.deepEqual(sorted(fixed.ids), []);
    const record = verifyVpnChange(load(off.dir), load(fixed.dir));
    assert.equal(record?.verdict, "intended", record?.verdictText);
    // the same fault in the OpenVPN replica gives the same ids
    assert.deepEqual(sorted(off.ids), sorted(await openvpn({ "ip-forward": "0" })));
  });

  it("no masquerade in PostUp → client-pool-unroutable, as OpenVPN's; with it → gone", async () => {
    const bare = await wireguard({
      "ip-forward": "1",
      "masquerade-pool": "off",
      manifest: "init-container",
    });
    assert.ok(bare.ids.has("vpn/client-pool-unroutable"), sorted(bare.ids).join());
    const ovpn = await openvpn({
      "ip-forward": "1",
      "masquerade-pool": "off",
      manifest: "init-container",
    });
    assert.deepEqual(sorted(bare.ids), sorted(ovpn));
    const masq = await wireguard({ "ip-forward": "1", manifest: "init-container" });
    assert.ok(!masq.ids.has("vpn/client-pool-unroutable"));
  });

  it("a policy on the client pool with masquerade → policy-source-mismatch; routed pool → gone", async () => {
    const withMasq = await wireguard({
      "ip-forward": "1",
      policy: true,
      manifest: "init-container",
    });
    assert.ok(withMasq.ids.has("vpn/policy-source-mismatch"), sorted(withMasq.ids).join());
    const routed = await wireguard({
      "ip-forward": "1",
      policy: true,
      "masquerade-pool": "off",
      manifest: "init-container",
    });
    assert.ok(!routed.ids.has("vpn/policy-source-mismatch"));
  });

  it("a pod address outside the clients' AllowedIPs → destination-not-tunnelled; inside → gone", async () => {
    const narrow = await wireguard({
      "ip-forward": "1",
      manifest: "init-container",
      "allowed-ips": "services",
    });
    assert.ok(narrow.ids.has("vpn/destination-not-tunnelled"), sorted(narrow.ids).join());
    assert.ok(!narrow.ids.has("vpn/forwarding-disabled"));
    const wide = await wireguard({ "ip-forward": "1", manifest: "init-container" });
    assert.ok(!wide.ids.has("vpn/destination-not-tunnelled"));
  });
});
