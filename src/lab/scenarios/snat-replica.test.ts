/**
 * The shared SNAT replica's pure parts: the options' helpers, the pod attachments' `ip -batch`
 * lines, and the on-prem site (YAML or one line of JSON) read back by podpath's RemoteSite reader.
 * The replica on the real kernel is exercised by each owner's scenario test (aws-vpc-cni,
 * kubenet, bridge-cni, calico, flannel, cilium).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { readRemoteSites } from "../../evidence/remote-site.ts";
import { attachmentLines, attachmentLines6, cidrList, isTrue, onpremSite } from "./snat-replica.ts";

describe("snat replica (pure)", () => {
  it("reads comma lists and CLI booleans", () => {
    assert.deepEqual(cidrList(" 10.0.0.0/8, ,192.168.0.0/16,"), ["10.0.0.0/8", "192.168.0.0/16"]);
    assert.deepEqual(cidrList(""), []);
    assert.equal(isTrue(true), true);
    assert.equal(isTrue("true"), true);
    assert.equal(isTrue("false"), false);
    assert.equal(isTrue(undefined), false);
  });

  it("hangs a bridged pod on the node's bridge with a /24 and a routed pod by its /32", () => {
    const b = attachmentLines(
      { kind: "bridge", bridge: "cni0", gateway: "10.88.0.1" },
      "v0",
      "10.88.0.5",
    );
    assert.ok(b.node.includes("link set v0 master cni0"));
    assert.ok(b.node.includes("addr add 10.88.0.1/24 dev cni0"));
    assert.deepEqual(b.pod, [
      "addr add 10.88.0.5/24 dev eth0",
      "link set eth0 up",
      "route add default via 10.88.0.1",
    ]);
    const gw = "169.254.1.1";
    const r = attachmentLines(
      { kind: "routed", gateway: gw, hostMac: "ee:ee:ee:ee:ee:ee", staticNeigh: false },
      "cali0",
      "10.245.12.4",
    );
    assert.ok(r.node.includes("route add 10.245.12.4/32 dev cali0 scope link"));
    assert.ok(r.node.includes("link set cali0 address ee:ee:ee:ee:ee:ee"));
    assert.equal(r.pod.filter((l) => l.startsWith("neigh")).length, 0);
    const n = attachmentLines(
      { kind: "routed", gateway: gw, hostMac: "02:00:00:00:00:01", staticNeigh: true },
      "eni0",
      "100.64.1.50",
    );
    assert.ok(n.pod.includes(`neigh add ${gw} lladdr 02:00:00:00:00:01 dev eth0 nud permanent`));
  });

  it("writes the on-prem site that podpath reads back, as YAML or one line of JSON", () => {
    const back = ["192.168.0.0/16"];
    const bare = readRemoteSites(onpremSite(back), "remote/onprem-dc1.yaml");
    assert.deepEqual(bare.diagnostics, []);
    assert.equal(bare.value.length, 1);
    const yaml = onpremSite(back, { vpn: true, allowlist: true });
    const json = onpremSite(back, { vpn: true, allowlist: true, json: true });
    assert.equal(json.trimEnd().split("\n").length, 1);
    assert.deepEqual(JSON.parse(json), parse(yaml));
    const full = parse(yaml) as Record<string, unknown>;
    assert.deepEqual(Object.keys(full), [
      "kind",
      "name",
      "prefixes",
      "routesBack",
      "vpn",
      "allowlists",
    ]);
    assert.equal("vpn" in (parse(onpremSite(back, { allowlist: true })) as object), false);
    assert.deepEqual(readRemoteSites(json, "remote/onprem-dc1.yaml").diagnostics, []);
  });
});

describe("snat replica IPv6 side (pure)", () => {
  it("hangs a bridged pod by its /64 on the bridge and a routed pod by its /128 with a static neighbour", () => {
    const v6 = { podIp: "fd00:88::5", gateway: "fd00:88::1" };
    const b = attachmentLines6({ kind: "bridge", bridge: "cni0", gateway: "10.88.0.1" }, "v0", v6);
    assert.deepEqual(b.node, ["addr add fd00:88::1/64 dev cni0 nodad"]);
    assert.deepEqual(b.pod, [
      "addr add fd00:88::5/64 dev eth0 nodad",
      "route add default via fd00:88::1",
    ]);
    const r = attachmentLines6(
      { kind: "routed", gateway: "169.254.1.1", hostMac: "ee:ee:ee:ee:ee:ee", staticNeigh: false },
      "cali0",
      v6,
    );
    assert.deepEqual(r.node, ["route add fd00:88::5/128 dev cali0"]);
    assert.ok(
      r.pod.includes("neigh add fd00:88::1 lladdr ee:ee:ee:ee:ee:ee dev eth0 nud permanent"),
    );
  });

  it("the dual-stack site names the IPv6 host and prefix beside the IPv4 ones", () => {
    const site = readRemoteSites(
      onpremSite(["192.168.0.0/16", "fd00:192:168::/48"], { allowlist: true, ipv6: true }),
      "r.yaml",
    );
    assert.deepEqual(site.diagnostics, []);
    const parsed = parse(onpremSite([], { allowlist: true, ipv6: true })) as {
      prefixes: string[];
      allowlists: { destinations: string[] }[];
    };
    assert.deepEqual(parsed.prefixes, ["10.20.0.0/16", "fd00:20::/64"]);
    assert.deepEqual(parsed.allowlists[0]?.destinations, ["10.20.30.40/32", "fd00:20::30:40/128"]);
  });
});
