/** @module evidence/ip-addr.test — readIpAddr on real `ip addr` output in its four forms. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { formatCidr, formatIp } from "../net/cidr.ts";
import { type NetInterface, primaryAddress, readIpAddr } from "./ip-addr.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`fixtures/${name}`, import.meta.url), "utf8");
const addrs = (i: NetInterface | undefined) =>
  (i?.addresses ?? []).map(
    (a) => `${formatIp(a.local)} ${formatCidr(a.cidr)}${a.secondary ? " secondary" : ""}`,
  );
const eth0 = (list: readonly NetInterface[]) => list.find((i) => i.name === "eth0");

describe("readIpAddr", () => {
  const want = [
    "10.244.1.5 10.244.1.0/24",
    "10.244.1.6 10.244.1.0/24 secondary",
    "fd00:10::5 fd00:10::/64",
  ];

  it("reads `ip addr`: link header, MAC, veth peer and addresses with lines", () => {
    const text = fixture("ip-addr.txt");
    const { value, diagnostics } = readIpAddr(text, "ip-addr.txt");
    assert.deepEqual(diagnostics, []);
    assert.deepEqual(
      value.map((i) => i.name),
      ["lo", "eth0"],
    );
    const e = eth0(value)!;
    assert.equal(e.index, 2);
    assert.match(e.peer ?? "", /^if\d+$/);
    assert.equal(e.peerIndex, Number(e.peer?.slice(2)));
    assert.equal(e.mtu, 1500);
    assert.equal(e.state, "UP");
    assert.equal(e.linkType, "ether");
    assert.match(e.mac ?? "", /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    assert.deepEqual(e.flags, ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]);
    assert.deepEqual(addrs(e).slice(0, 3), want);
    assert.equal(e.addresses[0]?.label, "eth0");
    assert.equal(e.addresses[0]?.scope, "global");
    assert.deepEqual(e.addresses[2]?.flags, ["nodad"]);
    const lines = text.split("\n");
    for (const a of e.addresses)
      assert.match(lines[a.source.line - 1] ?? "", new RegExp(formatIp(a.local)));
  });

  it("reads `ip -o addr`, `ip -br addr` and `ip -j addr` to the same addresses", () => {
    for (const name of ["ip-o-addr.txt", "ip-br-addr.txt", "ip-j-addr.json"]) {
      const { value, diagnostics } = readIpAddr(fixture(name), name);
      assert.deepEqual(diagnostics, [], name);
      assert.deepEqual(
        value.map((i) => i.name),
        ["lo", "eth0"],
        name,
      );
      // -br does not mark secondaries; the others do
      const got = addrs(eth0(value)).slice(0, 3);
      assert.deepEqual(
        name === "ip-br-addr.txt" ? got : got,
        name === "ip-br-addr.txt" ? want.map((w) => w.replace(" secondary", "")) : want,
        name,
      );
    }
    const j = eth0(readIpAddr(fixture("ip-j-addr.json"), "j").value)!;
    const plain = eth0(readIpAddr(fixture("ip-addr.txt"), "p").value)!;
    assert.equal(j.mac, plain.mac);
    assert.equal(j.peerIndex, plain.peerIndex);
    assert.equal(j.mtu, 1500);
  });

  it("reads labels, interfaces without addresses, and non-veth peers on a node", () => {
    for (const name of ["ip-addr-node.txt", "ip-j-addr-node.json"]) {
      const { value, diagnostics } = readIpAddr(fixture(name), name);
      assert.deepEqual(diagnostics, []);
      const lo = value.find((i) => i.name === "lo");
      assert.deepEqual(
        lo?.addresses.map((a) => a.label),
        ["lo", "lo:vip", undefined],
      );
      const gw = value.find((i) => i.name === "gw0");
      assert.equal(gw?.addresses.length, 1);
      const down = value.find((i) => i.state === "DOWN");
      assert.deepEqual(down?.addresses, []);
    }
    const plain = readIpAddr(fixture("ip-addr-node.txt"), "n").value;
    assert.equal(plain.find((i) => i.name === "gw0")?.state, "LOWERLAYERDOWN");
  });

  it("reads a real tun device's point-to-point address in every form", () => {
    for (const name of [
      "ip-addr-node.txt",
      "ip-o-addr-node.txt",
      "ip-br-addr-node.txt",
      "ip-j-addr-node.json",
    ]) {
      const { value, diagnostics } = readIpAddr(fixture(name), name);
      assert.deepEqual(diagnostics, [], name);
      const tun = value.find((i) => i.name === "tun0");
      const a = tun?.addresses[0];
      assert.equal(a && formatIp(a.local), "10.8.0.1", name);
      assert.equal(a?.peer && formatIp(a.peer), "10.8.0.2", name);
      assert.equal(a && formatCidr(a.cidr), "10.8.0.2/32", name);
      assert.equal(formatIp(primaryAddress(tun!, 4)!.local), "10.8.0.1", name);
    }
  });

  it("reads point-to-point addresses (a tun device)", () => {
    const text =
      "5: tun0: <POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UNKNOWN group default qlen 500\n    link/none \n    inet 10.8.0.1 peer 10.8.0.2/32 scope global tun0\n       valid_lft forever preferred_lft forever\n";
    const { value, diagnostics } = readIpAddr(text, "t");
    assert.deepEqual(diagnostics, []);
    const a = value[0]?.addresses[0];
    assert.equal(value[0]?.linkType, "none");
    assert.equal(a && formatIp(a.local), "10.8.0.1");
    assert.equal(a?.peer && formatIp(a.peer), "10.8.0.2");
    assert.equal(a && formatCidr(a.cidr), "10.8.0.2/32");
  });

  it("reports unreadable lines with the line and what was expected, and keeps the rest", () => {
    const text =
      "1: lo: <LOOPBACK,UP> mtu 65536\n    inet 10.0.0.300/8 scope host lo\n    inet 127.0.0.1/8 scope host lo\n!!garbage!!\n";
    const { value, diagnostics } = readIpAddr(text, "bad.txt");
    assert.equal(value[0]?.addresses.length, 1);
    assert.deepEqual(
      diagnostics.map((d) => d.source?.line),
      [2, 4],
    );
    assert.match(diagnostics[0]!.message, /expected an IPv4 address\/prefix/);
    assert.match(diagnostics[1]!.message, /expected "N: name: <FLAGS>/);
  });

  it("reports broken JSON with its line", () => {
    const { value, diagnostics } = readIpAddr('[{"ifindex":1,\n"ifname": }]', "j.json");
    assert.deepEqual(value, []);
    assert.equal(diagnostics[0]?.source?.line, 2);
  });
});

describe("primaryAddress", () => {
  it("takes the first global primary address: what MASQUERADE uses", () => {
    const e = eth0(readIpAddr(fixture("ip-addr.txt"), "a").value)!;
    assert.equal(formatIp(primaryAddress(e, 4)!.local), "10.244.1.5");
    assert.equal(formatIp(primaryAddress(e, 6)!.local), "fd00:10::5");
  });

  it("passes over host-scope, secondary and tentative addresses", () => {
    const lo = readIpAddr(fixture("ip-addr.txt"), "a").value.find((i) => i.name === "lo")!;
    assert.equal(primaryAddress(lo, 4), undefined);
    const text =
      "3: x: <UP> mtu 1500\n    inet 10.1.0.9/24 scope global secondary x\n    inet6 fd00::9/64 scope global tentative\n";
    const x = readIpAddr(text, "x").value[0]!;
    assert.equal(primaryAddress(x, 4), undefined);
    assert.equal(primaryAddress(x, 6), undefined);
  });
});
