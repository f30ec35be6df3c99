/**
 * @module cases/vpn/kinds/openvpn.test — the VPN case on OpenVPN servers beyond the chart (written
 * to a temp folder and loaded like any snapshot): tap mode with `server-bridge`, `topology net30`
 * and `subnet`, client-config-dir files (`pods/NS/POD/ccd/<cn>`: `iroute`, per-client pushes).
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { formatCidr, formatIp } from "../../../net/cidr.ts";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import { analyzeVpn } from "../analyze.ts";
import { vpnInputFromSnapshot } from "../snapshot-input.ts";

const root = mkdtempSync(join(tmpdir(), "podpath-ovpn-kind-"));
after(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
function snapshot(files: Record<string, string>): string {
  const dir = join(root, `s${n++}`);
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return dir;
}

function analyze(files: Record<string, string>) {
  const snap = loadSnapshot(openSnapshot(snapshot(files)));
  const { input, diagnostics } = vpnInputFromSnapshot(snap);
  return { input, diagnostics, answer: analyzeVpn(input) };
}

const POD = "pods/vpn/ovpn-0";
const CLUSTER = `apiVersion: v1
kind: Pod
metadata: {name: ovpn-0, namespace: vpn, labels: {app: ovpn}}
spec: {containers: [{name: openvpn, image: kylemanna/openvpn:2.4}]}
status: {podIP: 10.244.1.10}
`;
const nat = (...rules: string[]) =>
  [
    "*nat",
    ":PREROUTING ACCEPT [0:0]",
    ":INPUT ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ":POSTROUTING ACCEPT [0:0]",
    ...rules,
    "COMMIT",
    "",
  ].join("\n");
const ETH0 = `2: eth0@if9: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1450 qdisc noqueue state UP group default
    link/ether 0a:58:0a:f4:01:0a brd ff:ff:ff:ff:ff:ff link-netnsid 0
    inet 10.244.1.10/24 brd 10.244.1.255 scope global eth0
       valid_lft forever preferred_lft forever
`;
const LO = `1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
    inet 127.0.0.1/8 scope host lo
       valid_lft forever preferred_lft forever
`;

describe("OpenVPN in tap mode", () => {
  const TAP_CONF = `port 1194
proto udp
dev tap0
server-bridge 192.168.77.1 255.255.255.0 192.168.77.200 192.168.77.250
push "route 10.96.0.0 255.240.0.0"
keepalive 10 120
`;
  const TAP_ADDR = `${LO}${ETH0}3: tap0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UNKNOWN group default qlen 1000
    link/ether 9e:4f:1c:22:7d:01 brd ff:ff:ff:ff:ff:ff
`;

  it("takes tap0 as the tunnel device, server-bridge's range as the pool and its gateway as the peer", () => {
    const { answer } = analyze({
      [`${POD}/openvpn.conf`]: TAP_CONF,
      [`${POD}/ip-addr.txt`]: TAP_ADDR,
      [`${POD}/sysctl.txt`]: "net.ipv4.ip_forward = 1\n",
      [`${POD}/iptables-save.txt`]: nat(),
      "cluster/pod.yaml": CLUSTER,
    });
    const kind = answer.context?.kind;
    assert.equal(kind?.kind, "openvpn");
    assert.equal(kind?.tunnelDevice, "tap0");
    // 192.168.77.200-250 in one block: the /26 that holds the whole range
    assert.equal(
      answer.context?.pool && formatCidr(answer.context.pool.value),
      "192.168.77.192/26",
    );
    assert.equal(answer.context?.pool?.source.line, 4);
    assert.equal(kind?.peer && formatIp(kind.peer.value), "192.168.77.1");
    const unroutable = answer.findings.find((f) => f.id === "vpn/client-pool-unroutable");
    assert.match(unroutable?.next[0] ?? "", /-s 192\.168\.77\.192\/26/);
  });

  it("says tap even before tap0 exists (dev-type tap with a device named otherwise)", () => {
    const { answer } = analyze({
      [`${POD}/openvpn.conf`]:
        "dev vpn\ndev-type tap\nserver-bridge 10.9.0.1 255.255.255.0 10.9.0.10 10.9.0.20\n",
      "cluster/pod.yaml": CLUSTER,
    });
    assert.equal(answer.context?.kind.tunnelDevice, "tap0");
  });

  it("keeps tun0 for a tun server", () => {
    const { answer } = analyze({
      [`${POD}/openvpn.conf`]: "dev tun\nserver 10.8.0.0 255.255.255.0\n",
      "cluster/pod.yaml": CLUSTER,
    });
    assert.equal(answer.context?.kind.tunnelDevice, "tun0");
  });
});

describe("OpenVPN topology net30 and subnet", () => {
  // openvpn(8) --topology net30: tun0 is configured `ifconfig 10.8.0.1 10.8.0.2` (point-to-point)
  const NET30_ADDR = `${LO}${ETH0}3: tun0: <POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UNKNOWN group default qlen 500
    link/none
    inet 10.8.0.1 peer 10.8.0.2/32 scope global tun0
       valid_lft forever preferred_lft forever
`;
  const SUBNET_ADDR = `${LO}${ETH0}3: tun0: <POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UNKNOWN group default qlen 500
    link/none
    inet 10.8.0.1/24 scope global tun0
       valid_lft forever preferred_lft forever
`;

  for (const [topology, addr] of [
    ["net30", NET30_ADDR],
    ["subnet", SUBNET_ADDR],
  ] as const) {
    it(`decides the pool from server and the peer 10.8.0.1 under topology ${topology}`, () => {
      const { answer } = analyze({
        [`${POD}/openvpn.conf`]: `dev tun\ntopology ${topology}\nserver 10.8.0.0 255.255.255.0\n`,
        [`${POD}/ip-addr.txt`]: addr,
        "cluster/pod.yaml": CLUSTER,
      });
      assert.equal(answer.context?.pool && formatCidr(answer.context.pool.value), "10.8.0.0/24");
      assert.equal(answer.context?.pool?.source.file, `${POD}/openvpn.conf`);
      assert.equal(
        answer.context?.kind.peer && formatIp(answer.context.kind.peer.value),
        "10.8.0.1",
      );
    });
  }

  it("does not take net30's point-to-point /32 for the pool when no config says it", () => {
    const { answer } = analyze({ [`${POD}/ip-addr.txt`]: NET30_ADDR, "cluster/pod.yaml": CLUSTER });
    assert.equal(answer.context?.kind.kind, "openvpn");
    assert.equal(answer.context?.pool, undefined);
    assert.equal(answer.context?.kind.peer && formatIp(answer.context.kind.peer.value), "10.8.0.1");
  });

  it("takes the pool from tun0 under topology subnet when no config says it", () => {
    const { answer } = analyze({
      [`${POD}/ip-addr.txt`]: SUBNET_ADDR,
      "cluster/pod.yaml": CLUSTER,
    });
    assert.equal(answer.context?.pool && formatCidr(answer.context.pool.value), "10.8.0.0/24");
  });
});

describe("OpenVPN client-config-dir", () => {
  const SERVER = `port 1194
proto udp
dev tun
topology subnet
server 10.8.0.0 255.255.255.0
client-config-dir /etc/openvpn/ccd
route 192.168.10.0 255.255.255.0
push "route 10.96.0.0 255.240.0.0"
`;
  const SITE_A = `# site A: two LANs behind this client
ifconfig-push 10.8.0.101 255.255.255.0
iroute 192.168.10.0 255.255.255.0
iroute 192.168.20.0 255.255.255.0
push "route 10.244.0.0 255.255.0.0"
`;
  const POOL_MASQ = "-A POSTROUTING -s 10.8.0.0/24 -o eth0 -j MASQUERADE";

  it("finds an iroute no server route covers, citing the client's file", () => {
    const { answer, input } = analyze({
      [`${POD}/openvpn.conf`]: SERVER,
      [`${POD}/ccd/site-a`]: SITE_A,
      [`${POD}/iptables-save.txt`]: nat(POOL_MASQ),
      "cluster/pod.yaml": CLUSTER,
    });
    assert.equal(input.pods.find((p) => p.name === "ovpn-0")?.openvpnClients?.length, 1);
    const unrouted = answer.findings.filter((f) => f.id === "vpn/iroute-unrouted");
    assert.equal(unrouted.length, 1, JSON.stringify(unrouted));
    assert.match(unrouted[0]!.title, /192\.168\.20\.0\/24 behind client site-a/);
    assert.deepEqual(
      { file: unrouted[0]!.evidence[0]!.file, line: unrouted[0]!.evidence[0]!.line },
      { file: `${POD}/ccd/site-a`, line: 4 },
    );
    assert.match(unrouted[0]!.next[0]!, /route 192\.168\.20\.0 255\.255\.255\.0/);
  });

  it("asks the return path to cover the networks behind clients, not only the pool", () => {
    const { answer } = analyze({
      [`${POD}/openvpn.conf`]: SERVER,
      [`${POD}/ccd/site-a`]: SITE_A,
      [`${POD}/iptables-save.txt`]: nat(POOL_MASQ),
      "cluster/pod.yaml": CLUSTER,
    });
    const titles = answer.findings
      .filter((f) => f.id === "vpn/client-pool-unroutable")
      .map((f) => f.title);
    assert.deepEqual(titles, [
      "The network 192.168.10.0/24 behind a client has no way back",
      "The network 192.168.20.0/24 behind a client has no way back",
    ]);

    const covered = analyze({
      [`${POD}/openvpn.conf`]: SERVER,
      [`${POD}/ccd/site-a`]: SITE_A,
      [`${POD}/iptables-save.txt`]: nat("-A POSTROUTING -o eth0 -j MASQUERADE"),
      "cluster/pod.yaml": CLUSTER,
    });
    assert.ok(!covered.answer.findings.some((f) => f.id === "vpn/client-pool-unroutable"));
  });

  it("adds each client's pushed routes to the server's", () => {
    const { answer } = analyze({
      [`${POD}/openvpn.conf`]: SERVER,
      [`${POD}/ccd/site-a`]: SITE_A,
      "cluster/pod.yaml": CLUSTER,
    });
    const kind = answer.context?.kind;
    assert.deepEqual(
      kind?.pushedRoutes.map((r) => `${formatCidr(r.value)} ${r.source.file}:${r.source.line}`),
      [`10.96.0.0/12 ${POD}/openvpn.conf:8`, `10.244.0.0/16 ${POD}/ccd/site-a:5`],
    );
    assert.equal(kind?.tunnelled.kind, "prefixes");
  });

  it("asks for the client files when client-config-dir is set and none is beside the pod", () => {
    const { answer } = analyze({ [`${POD}/openvpn.conf`]: SERVER, "cluster/pod.yaml": CLUSTER });
    const m = answer.missing.find((x) => x.file === `${POD}/ccd/<client-cn>`);
    assert.match(m?.command ?? "", /ls \/etc\/openvpn\/ccd/);
    const given = analyze({
      [`${POD}/openvpn.conf`]: SERVER,
      [`${POD}/ccd/site-a`]: SITE_A,
      "cluster/pod.yaml": CLUSTER,
    });
    assert.ok(!given.answer.missing.some((x) => x.file.includes("/ccd/")));
  });

  it("takes redirect-gateway pushed to one client as everything tunnelled", () => {
    const { answer } = analyze({
      [`${POD}/openvpn.conf`]: SERVER,
      [`${POD}/ccd/laptop`]: 'push "redirect-gateway def1 bypass-dhcp"\n',
      "cluster/pod.yaml": CLUSTER,
    });
    const t = answer.context?.kind.tunnelled;
    assert.equal(t?.kind, "all");
    assert.equal(t?.kind === "all" ? t.source.file : "", `${POD}/ccd/laptop`);
    assert.equal(answer.context?.kind.onlyServicesRouted, false);
  });
});
