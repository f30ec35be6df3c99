/**
 * Kernel test: the IPsec replica on real strongSwan charon instances in network namespaces. The
 * probes from the laptop fail exactly for the variant with the problem and pass with its fix; the
 * snapshot's statusall / list-sas / ipsec.conf read back what the gateway really did; `diagnose`
 * gives each fault the same finding ids as the OpenVPN replica with the same fault, and never
 * asks an IPsec snapshot for another kind's files.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseIpsecConf } from "../../agents/strongswan/ipsec-conf.ts";
import { installedChildSas, parseSaStatus } from "../../agents/strongswan/sa-status.ts";
import { analyzeVpn } from "../../cases/vpn/analyze.ts";
import { vpnInputFromSnapshot } from "../../cases/vpn/snapshot-input.ts";
import { formatCidr } from "../../net/cidr.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { kernelSkip } from "../kernel-guard.ts";
import { createLab } from "../netns.ts";
import { IPSEC, IpsecOptions, scenario, strongswanUnavailableReason } from "./ipsec.ts";
import { IPSEC_NS, IPSEC_POD } from "./ipsec-cluster.ts";
import { scenario as openvpnScenario, VpnOptions } from "./vpn.ts";

/** Skips only when not root or strongSwan is missing; in CI a missing strongSwan fails. */
function skipReason(): false | string {
  const k = kernelSkip();
  if (k) return k;
  const s = strongswanUnavailableReason();
  if (!s) return false;
  if (process.env["CI"]) throw new Error(`the IPsec lab must run in CI, but podpath lab ${s}`);
  return `IPsec lab skipped: podpath lab ${s}`;
}

const skip = skipReason();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

export interface IpsecRun {
  readonly dir: string;
  readonly exits: readonly number[];
  readonly pod: (f: string) => string;
  /** diagnose's VPN finding ids on the snapshot, and the files it says are missing. */
  readonly ids: ReadonlySet<string>;
  readonly missing: readonly string[];
  readonly kind: string | undefined;
}

function diagnoseVpn(dir: string) {
  const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(dir)));
  const a = analyzeVpn(input);
  return {
    ids: new Set<string>(a.findings.map((f) => f.id)),
    missing: a.missing.map((m) => `${m.file} ${m.command ?? ""}`),
    kind: a.context?.kind.kind,
  };
}

/** The OpenVPN replica with the same options: its VPN finding ids. */
async function openvpnIds(options: Record<string, string | true>): Promise<ReadonlySet<string>> {
  const lab = await createLab({ prefix: "ppis" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-ipsec-ovpn-test-"));
  dirs.push(dir);
  try {
    await openvpnScenario.run({ lab, outDir: dir, log: () => {} }, VpnOptions.parse(options));
  } finally {
    await lab.destroy();
  }
  return diagnoseVpn(dir).ids;
}

/** Runs the scenario with `options` into a fresh snapshot folder. */
export async function ipsecReplica(options: Record<string, string | true>): Promise<IpsecRun> {
  const lab = await createLab({ prefix: "ppis" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-ipsec-test-"));
  dirs.push(dir);
  let exits: number[] = [];
  try {
    const r = await scenario.run({ lab, outDir: dir, log: () => {} }, IpsecOptions.parse(options));
    exits = r.summary.slice(1).map((l) => Number(/exit (\d+)$/.exec(l)?.[1] ?? -1));
  } finally {
    await lab.destroy();
  }
  const pod = (f: string) => readFileSync(join(dir, `pods/${IPSEC_NS}/${IPSEC_POD}/${f}`), "utf8");
  return { dir, exits, pod, ...diagnoseVpn(dir) };
}

// exits: [ping pod ip (peer), ping web pod, curl Service, dig]
describe("lab ipsec: real charon tunnels, each fault on the wire and gone with its fix", {
  skip,
  concurrency: false,
}, () => {
  it("forwarding off: the pod's own address answers, nothing past it; on: everything", async () => {
    const off = await ipsecReplica({ "ip-forward": "0" });
    assert.deepEqual(off.exits.slice(0, 3), [0, 1, 28]);
    const sa = parseSaStatus(off.pod("ipsec-statusall.txt"), "s").value;
    assert.equal(installedChildSas(sa).length, 1);
    assert.match(off.pod("sysctl.txt"), /net\.ipv4\.ip_forward = 0/);
    assert.equal(off.kind, "ipsec");
    assert.ok(off.ids.has("vpn/forwarding-disabled"));
    assert.ok(off.ids.has("vpn/first-silent-hop"));
    const on = await ipsecReplica({ "ip-forward": "1", manifest: "init-container" });
    assert.deepEqual(on.exits.slice(0, 4), [0, 0, 0, 0]);
    // the tunnel really carried the probes: the CHILD SA's counters moved
    const c = installedChildSas(parseSaStatus(on.pod("swanctl-list-sas.txt"), "l").value)[0];
    assert.ok((c?.packetsIn ?? 0) > 4, `packets in: ${c?.packetsIn}`);
    assert.deepEqual([...on.ids], []);
    for (const r of [off, on])
      for (const m of r.missing) assert.doesNotMatch(m, /openvpn|wg0|wg-show|wg show/i);
  });

  it("forwarding on without the pool's masquerade: silent past the pod; leftupdown's rule: gone", async () => {
    const bare = await ipsecReplica({ "ip-forward": "1", "masquerade-pool": "off" });
    assert.deepEqual(bare.exits.slice(0, 2), [0, 1]);
    assert.doesNotMatch(bare.pod("iptables-save.txt"), /MASQUERADE/);
    assert.ok(bare.ids.has("vpn/client-pool-unroutable"));
    const masq = await ipsecReplica({ "ip-forward": "1", "masquerade-pool": "on" });
    assert.deepEqual(masq.exits.slice(0, 2), [0, 0]);
    assert.match(
      masq.pod("iptables-save.txt"),
      /-A POSTROUTING -s 10\.9\.0\.0\/24 -o eth0 -j MASQUERADE/,
    );
    const conf = parseIpsecConf(masq.pod("ipsec.conf"), "ipsec.conf").value;
    assert.equal(conf.conns[0]?.left.updown?.value, "/etc/ipsec.d/updown-masq.sh");
    assert.ok(!masq.ids.has("vpn/client-pool-unroutable"));
    // set by hand only: not durable, as for OpenVPN
    assert.ok(masq.ids.has("vpn/forwarding-not-durable"));
  });

  it("a client-pool policy drops the masqueraded source; without masquerade the pool passes it", async () => {
    const withMasq = await ipsecReplica({ "ip-forward": "1", policy: true });
    assert.deepEqual(withMasq.exits.slice(0, 2), [0, 1]);
    assert.ok(withMasq.ids.has("vpn/policy-source-mismatch"));
    const routed = await ipsecReplica({
      "ip-forward": "1",
      policy: true,
      "masquerade-pool": "off",
    });
    // the pool's source is admitted, but nothing routes the reply back to 10.9.0.0/24
    assert.deepEqual(routed.exits.slice(0, 2), [0, 1]);
    assert.ok(!routed.ids.has("vpn/policy-source-mismatch"));
    assert.ok(routed.ids.has("vpn/client-pool-unroutable"));
  });

  it("a leftsubnet narrower than the target: the CHILD SA carries only it; the web pod is not tunnelled", async () => {
    const narrow = await ipsecReplica({ "ip-forward": "1", selectors: "narrow" });
    assert.deepEqual(narrow.exits.slice(0, 2), [0, 2]);
    const c = installedChildSas(parseSaStatus(narrow.pod("ipsec-statusall.txt"), "s").value)[0];
    assert.deepEqual(
      c?.localTs.map((t) => formatCidr(t.value.cidr)),
      [IPSEC.narrowSelectors],
    );
  });

  it("selectors the gateway does not offer: IKE up, no CHILD SA, nothing answers", async () => {
    const none = await ipsecReplica({ "ip-forward": "1", selectors: "mismatch" });
    const sa = parseSaStatus(none.pod("swanctl-list-sas.txt"), "l").value;
    assert.equal(sa.ikeSas[0]?.state, "ESTABLISHED");
    assert.equal(installedChildSas(sa).length, 0);
    assert.notEqual(none.exits[0], 0);
    assert.ok(none.ids.has("vpn/tunnel-down"));
    const up = await ipsecReplica({ "ip-forward": "1" });
    assert.ok(!up.ids.has("vpn/tunnel-down"));
  });

  it("each fault gives the same finding ids as the OpenVPN replica with the same fault", async () => {
    for (const options of [
      { "ip-forward": "0" },
      { "ip-forward": "1", "masquerade-pool": "off", manifest: "init-container" },
      { "ip-forward": "1", policy: true, manifest: "init-container" },
      { "ip-forward": "1", manifest: "none" },
    ] as Record<string, string | true>[]) {
      const ipsec = await ipsecReplica(options);
      const openvpn = await openvpnIds(options);
      assert.deepEqual([...ipsec.ids].sort(), [...openvpn].sort(), JSON.stringify(options));
    }
  });
});
