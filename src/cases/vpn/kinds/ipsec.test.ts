/**
 * Tests of the IPsec tunnel kind on real inputs: the gateway's ipsec.conf, charon's statusall and
 * list-sas (strongSwan 5.9.8, agents/strongswan/fixtures) and the pod's `ip addr` from the ipsec
 * lab (with kernel-libipsec's ipsec0). What the kind says the pool, peer, device and tunnelled
 * prefixes are, which files it claims, and that it names only its own files when one is missing.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { readIpAddr } from "../../../evidence/ip-addr.ts";
import { formatCidr, formatIp } from "../../../net/cidr.ts";
import type { VpnPodEvidence } from "../input.ts";
import { tunnelDownFindings } from "../tunnel-down.ts";
import { ipsecKind } from "./ipsec.ts";
import type { KindContext, KindFile } from "./kind.ts";

const ss = (f: string) =>
  readFileSync(new URL(`../../../agents/strongswan/fixtures/${f}`, import.meta.url), "utf8");
const dir = "pods/vpn/vpn-strongswan-0";
const ipAddrText = readFileSync(new URL("testdata/ipsec-ip-addr.txt", import.meta.url), "utf8");
const evidence: VpnPodEvidence = {
  namespace: "vpn",
  name: "vpn-strongswan-0",
  ipAddr: {
    file: `${dir}/ip-addr.txt`,
    interfaces: readIpAddr(ipAddrText, `${dir}/ip-addr.txt`).value,
  },
};
const GATEWAY = `conn rw
    left=%any
    leftsubnet=10.0.0.0/8
    leftupdown=/etc/ipsec.d/updown-masq.sh
    right=%any
    rightsourceip=10.9.0.0/24
    rightdns=10.96.0.10
    auto=add
`;

function viewWith(files: KindFile[]) {
  const reading = ipsecKind.readPod({
    namespace: "vpn",
    name: "vpn-strongswan-0",
    files,
    objects: [],
    values: [],
    onlyPodOfNamespace: true,
  });
  const ctx: KindContext = {
    namespace: "vpn",
    name: "vpn-strongswan-0",
    evidence: { ...evidence, ...(reading ? { readings: [reading] } : {}) },
    input: { pods: [], objects: [], probes: [] },
  };
  return { reading, view: reading ? reading.view(ctx) : ipsecKind.view(ctx) };
}

describe("ipsecKind", () => {
  it("claims its own files and leaves OpenVPN's and WireGuard's alone", () => {
    for (const f of [
      "ipsec.conf",
      "swanctl.conf",
      "ipsec-statusall.txt",
      "swanctl-list-sas",
      "xfrm-policy.txt",
      "xfrm-state.txt",
    ])
      assert.ok(ipsecKind.ownsFile(f, ""), f);
    assert.ok(ipsecKind.ownsFile("vpn.conf", GATEWAY));
    assert.ok(ipsecKind.ownsFile("strongswan.conf", "charon {\n  load_modular = yes\n}\n"));
    assert.ok(!ipsecKind.ownsFile("openvpn.conf", "server 10.8.0.0 255.255.255.0\ndev tun0\n"));
    assert.ok(!ipsecKind.ownsFile("wg0.conf", "[Interface]\nAddress = 10.13.13.1/24\n"));
    assert.ok(!ipsecKind.ownsFile("wg-show.txt", "interface: wg0\n"));
  });

  it("reads the pool from rightsourceip, the peer from eth0, the device ipsec0, DNS from rightdns", () => {
    const { view } = viewWith([{ file: `${dir}/ipsec.conf`, text: GATEWAY }]);
    assert.equal(formatCidr(view.pool!.value), "10.9.0.0/24");
    assert.equal(view.pool!.source.line, 6);
    assert.equal(formatIp(view.peer!.value), "10.244.1.10");
    assert.equal(view.tunnelDevice, "ipsec0");
    assert.deepEqual(
      view.pushedDns.map((d) => formatIp(d.value)),
      ["10.96.0.10"],
    );
    assert.equal(view.tunnelled.kind, "prefixes");
    assert.match(view.masqueradeFix(view.pool!.value).command, /updown-masq\.sh/);
    assert.match(view.masqueradeFix(view.pool!.value).command, /-C POSTROUTING .* \|\| iptables/);
  });

  it("prefers the selectors charon negotiated over the configured ones", () => {
    const narrowed = ss("statusall-server.txt").replace(
      "rw{1}:   10.0.0.0/8",
      "rw{1}:   10.244.1.0/24",
    );
    const { view } = viewWith([
      { file: `${dir}/ipsec.conf`, text: GATEWAY },
      { file: `${dir}/ipsec-statusall.txt`, text: narrowed },
    ]);
    assert.deepEqual(
      view.tunnelled.kind === "prefixes"
        ? view.tunnelled.prefixes.map((p) => [formatCidr(p.value), p.source.file])
        : [],
      [["10.244.1.0/24", `${dir}/ipsec-statusall.txt`]],
    );
  });

  it("takes the far side's rightsubnet as the pool of a site-to-site conn", () => {
    const site =
      "conn onprem\n  left=%any\n  leftsubnet=10.244.0.0/16\n  right=198.51.100.20\n  rightsubnet=10.20.0.0/16\n  auto=start\n";
    const { view } = viewWith([{ file: `${dir}/ipsec.conf`, text: site }]);
    assert.equal(formatCidr(view.pool!.value), "10.20.0.0/16");
  });

  it("falls back to the kernel's xfrm out policies for the tunnelled prefixes", () => {
    const { view } = viewWith([{ file: `${dir}/xfrm-policy.txt`, text: ss("xfrm-policy.txt") }]);
    assert.deepEqual(
      view.tunnelled.kind === "prefixes"
        ? view.tunnelled.prefixes.map((p) => formatCidr(p.value))
        : [],
      ["fd00:9::/64", "10.244.1.0/24", "10.244.0.0/16"],
    );
  });

  it("says the tunnel is down without a CHILD SA, and without any IKE SA, citing statusall", () => {
    // the kind gives its tunnel state; the case decides vpn/tunnel-down from it
    const down = (files: { file: string; text: string }[]) =>
      tunnelDownFindings(viewWith(files).view, "pod/vpn/x");
    const up = viewWith([{ file: `${dir}/ipsec-statusall.txt`, text: ss("statusall-server.txt") }]);
    assert.equal(up.view.tunnelState?.kind, "up");
    assert.deepEqual(tunnelDownFindings(up.view, "pod/vpn/x"), []);
    assert.equal(viewWith([]).view.tunnelState?.kind, "unknown");
    const noChild = down([
      { file: `${dir}/ipsec-statusall.txt`, text: ss("statusall-no-child.txt") },
    ]);
    assert.deepEqual(
      noChild.map((f) => [f.id, f.evidence[0]?.line]),
      [["vpn/tunnel-down", 16]],
    );
    assert.match(noChild[0]!.title, /no CHILD SA/);
    const text = ss("statusall-no-child.txt").replace(
      /Security Associations[\s\S]*$/,
      "Security Associations (0 up, 0 connecting):\n  none\n",
    );
    const none = down([{ file: `${dir}/ipsec-statusall.txt`, text }]);
    assert.deepEqual(
      none.map((f) => f.id),
      ["vpn/tunnel-down"],
    );
    assert.match(none[0]!.title, /no established IKE SA/);
  });

  it("decides nothing from a statusall excerpt cut before its SA list", () => {
    const full = ss("statusall-no-child.txt");
    const cut = full.slice(0, full.indexOf("Security Associations"));
    assert.ok(cut.length > 0);
    const { view } = viewWith([{ file: `${dir}/ipsec-statusall.txt`, text: cut }]);
    assert.equal(view.tunnelState?.kind, "unknown");
    assert.deepEqual(tunnelDownFindings(view, "pod/vpn/x"), []);
  });

  it("asks only for its own files when status or config is missing", () => {
    const { reading, view } = viewWith([]);
    assert.equal(reading, undefined);
    assert.match(view.configMissing.file, /\/ipsec\.conf$/);
    assert.match(view.configMissing.command ?? "", /cat \/etc\/ipsec\.conf/);
    const { view: confOnly } = viewWith([{ file: `${dir}/ipsec.conf`, text: GATEWAY }]);
    const walk = { hops: [] } as unknown as Parameters<typeof confOnly.missing>[0]["walk"];
    const miss = confOnly.missing({ walk, subject: "pod/vpn/x", forwarding: "on" });
    assert.deepEqual(
      miss.map((m) => m.file),
      [`${dir}/ipsec-statusall.txt`],
    );
    for (const m of [...miss, view.configMissing])
      assert.doesNotMatch(`${m.file} ${m.command ?? ""}`, /openvpn|wg0|wg show|wireguard/i);
  });

  it("detects the kind from its reading, from ipsec0, or from a strongSwan image", () => {
    const { reading } = viewWith([{ file: `${dir}/ipsec.conf`, text: GATEWAY }]);
    const input = { pods: [], objects: [], probes: [] };
    assert.equal(
      ipsecKind.detect({ evidence: { ...evidence, readings: [reading!] }, manifests: [], input })
        ?.strength,
      "config",
    );
    assert.equal(ipsecKind.detect({ evidence, manifests: [], input })?.strength, "device");
  });
});
