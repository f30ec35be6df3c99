/**
 * @module cases/vpn/kinds/wireguard.test — the VPN case on WireGuard snapshots (written to a temp
 * folder and loaded like any snapshot): the pool from wg0.conf, masquerade from its PostUp (or
 * its absence), the clients' AllowedIPs, `wg show` handshakes, a snapshot of a lone
 * pods/<ns>/<pod>/helm-values.yaml, and `plan vpn` in the pod's own terms — never a request for
 * OpenVPN's files or chart values.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { isEmptySnapshot, loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import { analyzeVpn } from "../analyze.ts";
import { resolveVpn } from "../input.ts";
import { planVpn } from "../plan.ts";
import { vpnInputFromSnapshot } from "../snapshot-input.ts";

const root = mkdtempSync(join(tmpdir(), "podpath-wg-kind-"));
after(() => rmSync(root, { recursive: true, force: true }));
const fixture = (name: string) =>
  readFileSync(new URL(`../../../agents/wireguard/fixtures/${name}`, import.meta.url), "utf8");

let n = 0;
function snapshot(files: Record<string, string>): string {
  const dir = join(root, `s${n++}`);
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return dir;
}

function analyze(dir: string) {
  const snap = loadSnapshot(openSnapshot(dir));
  const { input, diagnostics } = vpnInputFromSnapshot(snap);
  return { snap, input, diagnostics, answer: analyzeVpn(input) };
}

const POD = "pods/vpn/wg-0";
const WG_CONF_NO_MASQ = `[Interface]
Address = 10.13.13.1/24
ListenPort = 51820
PrivateKey = c2VjcmV0LW5ldmVyLXByaW50ZWQtaW4tYW4tYW5zd2Vy
PostUp = iptables -A FORWARD -i %i -j ACCEPT
PostDown = iptables -D FORWARD -i %i -j ACCEPT

[Peer]
PublicKey = pMkrA2Abxx+zwg2pW02QOwX/gk5qYrmUHwq2KYE5Xwg=
AllowedIPs = 10.13.13.2/32
`;
const NAT_EMPTY =
  "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n";
const DEPLOYMENT = (extra: string) => `apiVersion: apps/v1
kind: Deployment
metadata: {name: wg, namespace: vpn}
spec:
  selector: {matchLabels: {app: wg}}
  template:
    metadata: {labels: {app: wg}}
    spec:
${extra}      containers:
        - name: wireguard
          image: lscr.io/linuxserver/wireguard:1.0.20210914
          env:
            - {name: PEERS, value: "2"}
            - {name: INTERNAL_SUBNET, value: 10.13.13.0}
            - {name: ALLOWEDIPS, value: "10.13.13.0/24, 10.96.0.0/12"}
---
apiVersion: v1
kind: Pod
metadata: {name: wg-0, namespace: vpn, labels: {app: wg}}
spec: {containers: [{name: wireguard, image: lscr.io/linuxserver/wireguard:1.0.20210914}]}
status: {podIP: 10.244.1.10}
`;

describe("the VPN case on a WireGuard pod", () => {
  it("finds forwarding off and the pool without masquerade, and fixes it with PostUp", () => {
    const dir = snapshot({
      [`${POD}/wg0.conf`]: WG_CONF_NO_MASQ,
      [`${POD}/sysctl.txt`]: "net.ipv4.ip_forward = 0\n",
      [`${POD}/iptables-save.txt`]: NAT_EMPTY,
      "cluster/wg.yaml": DEPLOYMENT(""),
    });
    const { answer } = analyze(dir);
    assert.equal(answer.context?.kind.kind, "wireguard");
    assert.equal(answer.context?.pool?.source.file, `${POD}/wg0.conf`);
    const ids = answer.findings.map((f) => f.id);
    assert.ok(ids.includes("vpn/forwarding-disabled"), ids.join());
    const unroutable = answer.findings.find((f) => f.id === "vpn/client-pool-unroutable");
    assert.match(
      unroutable?.next[0] ?? "",
      /PostUp = iptables -t nat -A POSTROUTING -s 10\.13\.13\.0\/24/,
    );
    const text = JSON.stringify({ f: answer.findings, m: answer.missing }, (_k, v) =>
      typeof v === "bigint" ? String(v) : v,
    );
    assert.ok(!/openvpn/i.test(text), "nothing of OpenVPN is asked");
    assert.ok(!text.includes("c2VjcmV0LW5ldmVy"), "the private key is never printed");
    // no wg show in the snapshot: asked for in WireGuard's terms
    assert.ok(answer.missing.some((m) => m.file === `${POD}/wg-show.txt`));
  });

  it("reads masquerade from the pod's nat table, and its PostUp when the table is not there", () => {
    const conf = WG_CONF_NO_MASQ.replace(
      "PostUp = iptables -A FORWARD -i %i -j ACCEPT",
      "PostUp = iptables -A FORWARD -i %i -j ACCEPT; iptables -t nat -A POSTROUTING -s 10.13.13.0/24 -o eth0 -j MASQUERADE",
    );
    const dir = snapshot({
      [`${POD}/wg0.conf`]: conf,
      [`${POD}/sysctl.txt`]: "net.ipv4.ip_forward = 1\n",
      "cluster/wg.yaml": DEPLOYMENT(""),
    });
    const { input } = analyze(dir);
    const plan = planVpn(resolveVpn(input)!, input.objects);
    assert.equal(plan.returnPath.needed, false);
    assert.match(plan.returnPath.explanation, /wg0\.conf PostUp/);
  });

  it("names a probed destination outside the clients' AllowedIPs", () => {
    const dir = snapshot({
      [`${POD}/wg0.conf`]: WG_CONF_NO_MASQ,
      "cluster/wg.yaml": DEPLOYMENT(""),
      "probes/client.txt": [
        "$ ping -c 1 -W 2 10.13.13.1",
        "PING 10.13.13.1 (10.13.13.1) 56(84) bytes of data.",
        "64 bytes from 10.13.13.1: icmp_seq=1 ttl=64 time=1.42 ms",
        "",
        "--- 10.13.13.1 ping statistics ---",
        "1 packets transmitted, 1 received, 0% packet loss, time 0ms",
        "$ ping -c 1 -W 2 10.244.2.20",
        "PING 10.244.2.20 (10.244.2.20) 56(84) bytes of data.",
        "",
        "--- 10.244.2.20 ping statistics ---",
        "1 packets transmitted, 0 received, 100% packet loss, time 0ms",
        "",
      ].join("\n"),
      "cluster/node.yaml":
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nspec: {podCIDR: 10.244.2.0/24}\n",
    });
    const f = analyze(dir).answer.findings.find((x) => x.id === "vpn/destination-not-tunnelled");
    assert.ok(f, "the pod address 10.244.2.20 is outside 10.13.13.0/24, 10.96.0.0/12");
    assert.match(f.title, /10\.244\.2\.20/);
    assert.ok(
      f.evidence.some((e) => e.file === "cluster/wg.yaml"),
      "cites the ALLOWEDIPS line",
    );
  });

  it("says the tunnel is down when wg show has no handshake, and nothing when it has one", () => {
    const down = snapshot({ [`${POD}/wg-show.txt`]: fixture("wg-show-no-handshake.txt") });
    const up = snapshot({ [`${POD}/wg-show.txt`]: fixture("wg-show-up.txt") });
    assert.ok(analyze(down).answer.findings.some((f) => f.id === "vpn/tunnel-down"));
    assert.ok(!analyze(up).answer.findings.some((f) => f.id === "vpn/tunnel-down"));
  });

  it("decides nothing from a wg show excerpt that lists no peer (the paste may have cut them off)", () => {
    const head = fixture("wg-show-no-handshake.txt").split("\n").slice(0, 3).join("\n");
    assert.doesNotMatch(head, /peer:/);
    const cut = snapshot({ [`${POD}/wg-show.txt`]: `${head}\n` });
    assert.ok(!analyze(cut).answer.findings.some((f) => f.id === "vpn/tunnel-down"));
  });

  it("takes a snapshot of only pods/<ns>/<pod>/helm-values.yaml (wg-access-server)", () => {
    const dir = snapshot({
      [`${POD}/helm-values.yaml`]: "config:\n  vpn:\n    cidr: 10.44.0.0/24\n",
    });
    const { snap, answer } = analyze(dir);
    assert.equal(isEmptySnapshot(snap), false);
    assert.equal(answer.context?.kind.kind, "wireguard");
    assert.equal(answer.context?.pool?.source.file, `${POD}/helm-values.yaml`);
    assert.ok(!answer.missing.some((m) => /openvpn/.test(m.file)));
  });
});

describe("plan vpn for a WireGuard pod", () => {
  it("proposes nothing for forwarding when an init container already sets it", () => {
    const init = `      initContainers:
        - name: sysctls
          image: busybox:1.36
          command: [sh, -c, "sysctl -w net.ipv4.conf.all.forwarding=1"]
          securityContext: {privileged: true}
`;
    const dir = snapshot({
      [`${POD}/wg0.conf`]: WG_CONF_NO_MASQ,
      [`${POD}/sysctl.txt`]: "net.ipv4.ip_forward = 1\n",
      "cluster/wg.yaml": DEPLOYMENT(init),
    });
    const { input } = analyze(dir);
    const plan = planVpn(resolveVpn(input)!, input.objects);
    assert.equal(plan.alreadySet.length, 1);
    assert.ok(plan.strategies.every((s) => !s.applicable && !s.patch && !s.helmValues));
    assert.ok(!JSON.stringify(plan.strategies).includes("ipForwardInitContainer"));
  });

  it("offers pod sysctls and an init container, never OpenVPN chart values", () => {
    const dir = snapshot({
      [`${POD}/wg0.conf`]: WG_CONF_NO_MASQ,
      [`${POD}/sysctl.txt`]: "net.ipv4.ip_forward = 0\n",
      [`${POD}/iptables-save.txt`]: NAT_EMPTY,
      "cluster/wg.yaml": DEPLOYMENT(""),
    });
    const { input } = analyze(dir);
    const plan = planVpn(resolveVpn(input)!, input.objects);
    const by = Object.fromEntries(plan.strategies.map((s) => [s.strategy, s]));
    assert.equal(by["pod-sysctls"]?.applicable, true);
    assert.equal(by["init-container"]?.applicable, true);
    assert.equal(by["chart-value"]?.applicable, false);
    assert.match(by["chart-value"]?.whyNot ?? "", /WireGuard/);
    assert.match(
      plan.returnPath.command ?? "",
      /^PostUp = iptables -t nat -A POSTROUTING -s 10\.13\.13\.0\/24/,
    );
    assert.doesNotMatch(JSON.stringify(plan), /openvpn/i);
  });
});
