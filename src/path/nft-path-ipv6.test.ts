/**
 * The nftables whole path of an IPv6 packet: the listing's ip6 and inet tables (an inet chain
 * sees both families, an ip table only IPv4), ICMPv6 reject types (icmpx's and icmpv6's), and
 * masquerade to the outgoing device's IPv6 address, over IPv6 routes.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readIpRoute } from "../evidence/ip-route.ts";
import { formatIp, parseIp } from "../net/cidr.ts";
import { readNftRuleset } from "../nftables/read-ruleset.ts";
import { compileNftPath } from "./nft-path.ts";
import type { PathVerdict } from "./path-types.ts";

const ROUTES6 = `fd00:10::/64 dev eth0 proto kernel metric 256 pref medium
fd00:20::/64 dev eth1 proto kernel metric 256 pref medium
fd00:244::/64 dev pod0 proto kernel metric 256 pref medium
default via fd00:10::1 dev eth0 metric 1024 pref medium
local fd00:10::2 dev eth0 table local proto kernel metric 0 pref medium
local fd00:20::2 dev eth1 table local proto kernel metric 0 pref medium
local fd00:244::1 dev pod0 table local proto kernel metric 0 pref medium
`;

const LISTING = `table ip filter {
	chain FORWARD {
		type filter hook forward priority filter; policy drop;
	}
}
table inet fw {
	chain forward {
		type filter hook forward priority filter; policy accept;
		ip6 daddr fd00:20::/64 udp dport 53 reject with icmpx type admin-prohibited
		ip6 daddr fd00:20::/64 tcp dport 443 reject with icmpv6 type policy-fail
	}
}
table ip6 nat {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "eth1" masquerade
	}
}
`;

function verdict(dst: string, proto: "tcp" | "udp", dport: number): PathVerdict {
  const rs = readNftRuleset(LISTING, "nodes/n1/nft-ruleset.txt");
  assert.deepEqual(
    rs.diagnostics.filter((d) => d.severity === "error"),
    [],
  );
  const routes = readIpRoute(ROUTES6, "nodes/n1/ip6-route.txt", { family: 6 }).value;
  const ev = compileNftPath(rs.value!, {
    routing: { routes },
    localAddresses: ["fd00:10::2", "fd00:20::2", "fd00:244::1"].map(parseIp),
    interfaces: [
      { name: "eth0", primary: parseIp("fd00:10::2") },
      { name: "eth1", primary: parseIp("fd00:20::2") },
      { name: "pod0", primary: parseIp("fd00:244::1") },
    ],
  });
  const r = ev.evaluate({
    src: parseIp("fd00:244::5"),
    dst: parseIp(dst),
    proto,
    sport: 40000,
    dport,
    origin: "pod",
  });
  assert.equal(r.outcomes.length, 1);
  return r.outcomes[0]!.verdict;
}

describe("compileNftPath on an IPv6 packet", () => {
  it("rejects with the ICMPv6 type of an inet table's icmpx and icmpv6 rejects", () => {
    const a = verdict("fd00:20::9", "udp", 53);
    assert.equal(a.kind === "rejected" ? a.with : a.kind, "icmp6-adm-prohibited");
    const b = verdict("fd00:20::9", "tcp", 443);
    assert.equal(b.kind === "rejected" ? b.with : b.kind, "icmp6-policy-fail");
  });

  it("passes an ip table's drop by, and masquerades to eth1's IPv6 address", () => {
    const v = verdict("fd00:20::9", "tcp", 80);
    assert.ok(v.kind === "forwarded", v.kind);
    assert.equal(v.dev, "eth1");
    assert.equal(v.src && formatIp(v.src), "fd00:20::2");
    const w = verdict("2001:db8::1", "tcp", 80);
    assert.ok(w.kind === "forwarded", w.kind);
    assert.equal(w.dev, "eth0");
    assert.equal(w.src && formatIp(w.src), "fd00:244::5");
  });
});
