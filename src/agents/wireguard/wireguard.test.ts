/**
 * @module agents/wireguard/wireguard.test — the WireGuard readers on real output (`wg show` and
 * `wg showconf` from wireguard-go and wireguard-tools: fixtures/make-fixtures.sh), a wg-quick
 * config as linuxserver/wireguard writes it, image env and wg-access-server values.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { formatCidr, formatIp, parseCidr } from "../../net/cidr.ts";
import { readAccessServerValues } from "./access-server-values.ts";
import { parseWgConfig } from "./config.ts";
import { hookMasquerade, hookRules } from "./hooks.ts";
import { wgImageOf, wgImageSettings } from "./images.ts";
import { readWgShow } from "./show.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`fixtures/${name}`, import.meta.url), "utf8");

describe("parseWgConfig", () => {
  it("reads Address, ListenPort, hooks and peers, and keeps no private key", () => {
    const { value, diagnostics } = parseWgConfig(fixture("wg0.conf"), "wg0.conf");
    assert.deepEqual(diagnostics, []);
    assert.equal(formatIp(value.addresses[0]!.value.ip), "10.13.13.1");
    assert.equal(formatCidr(value.addresses[0]!.value.network), "10.13.13.0/24");
    assert.equal(value.addresses[0]!.source.line, 3);
    assert.equal(value.listenPort?.value, 51820);
    assert.equal(value.privateKeyAt?.line, 5);
    assert.equal(value.privateKeyAt?.text, "PrivateKey = (hidden)");
    assert.ok(
      !JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? String(v) : v)).includes(
        "never prints it",
      ),
      "the key's value is not kept",
    );
    assert.equal(value.hooks.filter((h) => h.hook === "PostUp").length, 3);
    assert.equal(value.peers.length, 1);
    assert.equal(formatCidr(value.peers[0]!.allowedIps[0]!.value), "10.13.13.2/32");
  });

  it("reads wg showconf output the same way", () => {
    const { value, diagnostics } = parseWgConfig(fixture("wg-showconf.txt"), "wg-showconf.txt");
    assert.deepEqual(diagnostics, []);
    assert.equal(value.peers.length, 2);
    assert.equal(value.peers[0]!.endpoint?.value.startsWith("192.0.2.10:"), true);
  });

  it("names the line of a malformed value and keeps the rest", () => {
    const text =
      "[Interface]\nAddress = 10.8.0.1/40, 10.8.0.1/24\nListenPort = x\n[Peer]\nAllowedIPs = nope\n";
    const { value, diagnostics } = parseWgConfig(text, "wg0.conf");
    assert.equal(value.addresses.length, 1);
    assert.deepEqual(
      diagnostics.map((d) => d.source?.line),
      [2, 3, 5],
    );
  });
});

describe("hookRules / hookMasquerade", () => {
  it("reads PostUp's iptables commands with the iptables argument reader (%i is the device)", () => {
    const cfg = parseWgConfig(fixture("wg0.conf"), "wg0.conf").value;
    const rules = hookRules(cfg.hooks, "wg0");
    const fwd = rules.find((r) => r.chain === "FORWARD" && r.hook === "PostUp");
    assert.equal(fwd?.parts.inIface?.name, "wg0");
    const masq = hookMasquerade(rules, parseCidr("10.13.13.0/24"));
    assert.equal(masq?.hook, "PostUp");
    assert.equal(masq?.parts.outIface?.name, "eth");
    assert.equal(masq?.parts.outIface?.wildcard, true);
  });

  it("needs -s to cover the pool, and does not count PostDown's -D or a negated source", () => {
    const text = [
      "[Interface]",
      "PostUp = iptables -t nat -A POSTROUTING -s 10.8.0.0/25 -o eth0 -j MASQUERADE",
      "PostUp = iptables -t nat -A POSTROUTING ! -s 10.8.0.0/24 -j MASQUERADE",
      "PostDown = iptables -t nat -D POSTROUTING -s 10.8.0.0/24 -j MASQUERADE",
    ].join("\n");
    const rules = hookRules(parseWgConfig(text, "wg0.conf").value.hooks);
    assert.equal(rules.length, 3);
    assert.equal(hookMasquerade(rules, parseCidr("10.8.0.0/24")), undefined);
    assert.ok(hookMasquerade(rules, parseCidr("10.8.0.0/26")));
  });
});

describe("readWgShow", () => {
  it("reads a live tunnel: handshake and transfer counters per peer", () => {
    const { value, diagnostics } = readWgShow(fixture("wg-show-up.txt"), "wg-show.txt");
    assert.deepEqual(diagnostics, []);
    const wg0 = value.interfaces[0]!;
    assert.equal(wg0.name, "wg0");
    assert.equal(wg0.listeningPort?.value, 51820);
    assert.equal(wg0.peers.length, 2);
    assert.ok((wg0.peers[0]!.handshakeAgoSeconds?.value ?? -1) >= 0);
    assert.ok((wg0.peers[0]!.receivedBytes?.value ?? 0) > 0);
    assert.equal(wg0.peers[1]!.handshakeAgoSeconds, undefined);
  });

  it("shows no handshake before any traffic", () => {
    const { value } = readWgShow(fixture("wg-show-no-handshake.txt"), "wg-show.txt");
    assert.ok(value.interfaces[0]!.peers.every((p) => p.handshakeAgoSeconds === undefined));
  });

  it("reads wireguard-tools' time and size units", () => {
    const text =
      "interface: wg0\npeer: K=\n  latest handshake: 1 day, 2 hours, 3 minutes, 4 seconds ago\n  transfer: 1.50 KiB received, 2.00 MiB sent\n";
    const p = readWgShow(text, "wg-show.txt").value.interfaces[0]!.peers[0]!;
    assert.equal(p.handshakeAgoSeconds?.value, 86400 + 7200 + 180 + 4);
    assert.equal(p.receivedBytes?.value, 1536);
    assert.equal(p.sentBytes?.value, 2 * 1024 * 1024);
  });
});

describe("wgImageSettings", () => {
  const deployment = (image: string, env: Record<string, string>) =>
    readKubeObjects(
      JSON.stringify({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "wg", namespace: "vpn" },
        spec: {
          template: {
            spec: {
              containers: [
                {
                  name: "wg",
                  image,
                  env: Object.entries(env).map(([name, value]) => ({ name, value })),
                },
              ],
            },
          },
        },
      }),
      "cluster/wg.json",
    ).value[0]!;
  const path = ["spec", "template", "spec", "containers", 0];

  it("reads wg-easy's WG_DEFAULT_ADDRESS (10.8.0.x) and WG_ALLOWED_IPS", () => {
    const s = wgImageSettings(
      deployment("ghcr.io/wg-easy/wg-easy:14", {
        WG_DEFAULT_ADDRESS: "10.6.0.x",
        WG_ALLOWED_IPS: "10.96.0.0/12, 10.244.0.0/16",
      }),
      path,
    )!;
    assert.equal(formatCidr(s.pool!.value), "10.6.0.0/24");
    assert.deepEqual(
      s.allowedIps.map((a) => formatCidr(a.value)),
      ["10.96.0.0/12", "10.244.0.0/16"],
    );
  });

  it("applies linuxserver's defaults and knows server mode needs PEERS", () => {
    const s = wgImageSettings(deployment("lscr.io/linuxserver/wireguard:latest", {}), path)!;
    assert.equal(formatCidr(s.pool!.value), "10.13.13.0/24");
    assert.equal(s.poolIsDefault, true);
    assert.equal(s.serverMode, false);
    assert.deepEqual(
      s.allowedIps.map((a) => formatCidr(a.value)),
      ["0.0.0.0/0", "::/0"],
    );
  });

  it("recognises the images by reference", () => {
    assert.equal(wgImageOf("place1/wg-access-server:0.4.6"), "wg-access-server");
    assert.equal(wgImageOf("nginx:1.27"), undefined);
  });
});

describe("readAccessServerValues", () => {
  it("reads config.vpn.cidr, allowedIPs and nat44 with their lines", () => {
    const text =
      "config:\n  vpn:\n    cidr: 10.44.0.0/24\n    allowedIPs:\n      - 10.96.0.0/12\n    nat44: false\n";
    const { value, diagnostics } = readAccessServerValues(text, "helm-values.yaml");
    assert.deepEqual(diagnostics, []);
    assert.equal(formatCidr(value.pool!.value), "10.44.0.0/24");
    assert.equal(value.pool!.source.line, 3);
    assert.equal(formatCidr(value.allowedIps[0]!.value), "10.96.0.0/12");
    assert.equal(value.nat44?.value, false);
  });

  it("warns about a cidr that is not a prefix", () => {
    const { value, diagnostics } = readAccessServerValues("vpn:\n  cidr: ten\n", "v.yaml");
    assert.equal(value.pool, undefined);
    assert.equal(diagnostics[0]?.source?.line, 2);
  });
});
