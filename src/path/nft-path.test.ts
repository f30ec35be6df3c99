/**
 * The nftables whole-path evaluator on listings as `nft list ruleset` prints them: base chains of
 * every type at a hook in priority order (an accept ends only its own chain), a drop or reject
 * ends the packet with its type, DNAT in prerouting before the routing decision, nat only for a
 * connection's first packet, masquerade's source from the outgoing interface.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { readIpRoute } from "../evidence/ip-route.ts";
import { readIpRule } from "../evidence/ip-rule.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import { formatIp, parseIp } from "../net/cidr.ts";
import { readNftRuleset } from "../nftables/read-ruleset.ts";
import { compilePath } from "./evaluate-path.ts";
import { compileNftPath, rejectWithNft } from "./nft-path.ts";
import type { PathPacket, PathResult } from "./path-types.ts";
import { NODE_TEST_ROUTES as ROUTES } from "./test-helpers/node-routes.ts";

function evaluate(listing: string, p: Omit<Partial<PathPacket>, "dst"> & { dst: string }) {
  const rs = readNftRuleset(listing, "nodes/n1/nft-ruleset.txt");
  assert.deepEqual(
    rs.diagnostics.filter((d) => d.severity === "error"),
    [],
  );
  const routes = readIpRoute(ROUTES, "nodes/n1/ip-route.txt").value;
  return compileNftPath(rs.value!, {
    routing: { routes },
    localAddresses: [parseIp("10.244.0.1"), parseIp("192.168.10.2")],
    interfaces: [
      { name: "eth0", primary: parseIp("192.168.10.2") },
      { name: "pod0", primary: parseIp("10.244.0.1") },
    ],
  }).evaluate({
    src: parseIp("10.244.0.5"),
    proto: "tcp",
    sport: 40000,
    dport: 80,
    origin: "pod",
    ...p,
    dst: parseIp(p.dst),
  } as PathPacket);
}

const NAT = `table ip nat {
	chain PREROUTING {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 10.96.0.10 tcp dport 80 counter packets 0 bytes 0 dnat to 192.168.10.7:8080
	}
	chain POSTROUTING {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "eth0" ip saddr 10.244.0.0/24 counter packets 0 bytes 0 masquerade
	}
}
`;

describe("compileNftPath", () => {
  it("follows DNAT to the endpoint, routes it out of eth0 and masquerades to eth0's address", () => {
    const r = evaluate(NAT, { dst: "10.96.0.10" });
    assert.equal(r.outcomes.length, 1);
    const o = r.outcomes[0]!;
    assert.equal(o.verdict.kind, "forwarded");
    if (o.verdict.kind !== "forwarded") return;
    assert.equal(o.verdict.dev, "eth0");
    assert.equal(formatIp(o.verdict.dst), "192.168.10.7");
    assert.equal(o.verdict.port, 8080);
    assert.equal(o.verdict.src && formatIp(o.verdict.src), "192.168.10.2");
    const dnat = o.steps.find((s) => s.kind === "dnat");
    assert.equal(dnat?.source.line, 4, "the DNAT is cited at its line");
    assert.ok(o.steps.some((s) => s.kind === "route" && s.dev === "eth0"));
  });

  it("keeps the connection's translation for a later packet, as its first packet got it", () => {
    // the kernel applies the DNAT and masquerade chosen for the first packet to every later one
    // (found by the kernel differential's established connections)
    const r = evaluate(NAT, { dst: "10.96.0.10", ctstate: "ESTABLISHED" });
    assert.equal(r.outcomes.length, 1);
    const v = r.outcomes[0]!.verdict;
    assert.equal(v.kind, "forwarded");
    if (v.kind === "forwarded") {
      assert.equal(formatIp(v.dst), "192.168.10.7");
      assert.equal(v.port, 8080);
      assert.equal(v.src && formatIp(v.src), "192.168.10.2");
    }
    // the nat chains saw the first packet, whose state was new
    const onlyNew = NAT.replace("ip daddr 10.96.0.10", "ct state new ip daddr 10.96.0.10");
    const v2 = evaluate(onlyNew, { dst: "10.96.0.10", ctstate: "ESTABLISHED" }).outcomes[0]!;
    assert.equal(v2.verdict.kind === "forwarded" && formatIp(v2.verdict.dst), "192.168.10.7");
  });

  it("lets a later base chain drop what an earlier one accepted; the drop ends the packet", () => {
    const listing = `table inet early {
	chain fwd {
		type filter hook forward priority -10; policy accept;
		ip daddr 192.168.10.7 accept
	}
}
table ip filter {
	chain FORWARD {
		type filter hook forward priority filter; policy accept;
		ip daddr 192.168.10.7 counter packets 0 bytes 0 reject with icmp type host-prohibited
	}
}
table inet late {
	chain fwd {
		type filter hook forward priority 10; policy drop;
	}
}
`;
    const r = evaluate(listing, { dst: "192.168.10.7" });
    assert.equal(r.outcomes.length, 1);
    const v = r.outcomes[0]!.verdict;
    assert.equal(v.kind, "rejected");
    if (v.kind === "rejected") {
      assert.equal(v.with, "icmp-host-prohibited");
      assert.equal(v.by.line, 10);
    }
    // without the reject, the drop policy of the chain at priority 10 decides
    const r2 = evaluate(listing.replace(/reject with icmp type host-prohibited/, "accept"), {
      dst: "192.168.10.7",
    });
    assert.equal(r2.outcomes[0]!.verdict.kind, "dropped");
  });

  it("delivers to the node through input, where a mark set in prerouting is seen", () => {
    const listing = `table ip mangle {
	chain PREROUTING {
		type filter hook prerouting priority mangle; policy accept;
		ip saddr 10.244.0.5 meta mark set 0x10
	}
}
table ip filter {
	chain INPUT {
		type filter hook input priority filter; policy drop;
		meta mark 0x10 accept
	}
}
`;
    const ok = evaluate(listing, { dst: "10.244.0.1" });
    assert.equal(ok.outcomes[0]!.verdict.kind, "delivered");
    assert.equal(ok.outcomes[0]!.kind, "local");
    const other = evaluate(listing, { dst: "10.244.0.1", src: parseIp("10.244.0.6") });
    assert.equal(other.outcomes[0]!.verdict.kind, "dropped");
  });

  it("follows iptables-nft's mark forms: --set-xmark, CONNMARK restore and save, ct state !", () => {
    const listing = `table ip mangle {
	chain PREROUTING {
		type filter hook prerouting priority mangle; policy accept;
		meta mark set 0xff
		counter packets 0 bytes 0 ct mark set mark
		meta mark set 0x1
		counter packets 0 bytes 0 meta mark set ct mark
		counter packets 0 bytes 0 meta mark set meta mark & 0xffffffcf | 0x20
	}
}
table ip filter {
	chain INPUT {
		type filter hook input priority filter; policy drop;
		ct state ! established,related meta mark 0xef counter packets 0 bytes 0 accept
	}
}
`;
    // 0xff saved to the connection, restored over 0x1, then & ~0x30 | 0x20: 0xef
    const r = evaluate(listing, { dst: "10.244.0.1" });
    assert.equal(r.outcomes.length, 1);
    assert.equal(r.outcomes[0]!.verdict.kind, "delivered");
    // a packet of a known connection
    const est = evaluate(listing, { dst: "10.244.0.1", ctstate: "ESTABLISHED" });
    assert.deepEqual(
      est.outcomes.map((o) => o.verdict.kind),
      ["dropped"],
      "`ct state ! established,related` refuses it whatever its mark",
    );
    const noSave = evaluate(listing.replace(/.*ct mark set mark\n/, ""), { dst: "10.244.0.1" });
    // nothing saved: the new connection's mark 0 restored, & ~0x30 | 0x20 = 0x20
    assert.equal(noSave.outcomes[0]!.verdict.kind, "dropped");
  });

  it("routes the node's packet again after a route chain marks it, before filter output", () => {
    const listing = `table ip mangle {
	chain OUTPUT {
		type route hook output priority mangle; policy accept;
		ip protocol tcp meta mark set 0x10
	}
}
table ip filter {
	chain OUTPUT {
		type filter hook output priority filter; policy accept;
		reject with icmp net-unreachable
	}
}
`;
    const rs = readNftRuleset(listing, "nodes/n1/nft-ruleset.txt").value!;
    const ctx = {
      routing: {
        routes: readIpRoute(ROUTES, "nodes/n1/ip-route.txt").value,
        rules: readIpRule(
          "0:\tfrom all lookup local\n127:\tfrom all fwmark 0x10 blackhole\n32766:\tfrom all lookup main\n",
          "nodes/n1/ip-rule.txt",
        ).value,
      },
      localAddresses: [parseIp("10.244.0.1"), parseIp("192.168.10.2")],
    };
    const r = compileNftPath(rs, ctx).evaluate({
      src: parseIp("192.168.10.2"),
      dst: parseIp("8.8.8.8"),
      proto: "tcp",
      sport: 40000,
      dport: 443,
      origin: "host",
    });
    assert.deepEqual(
      r.outcomes.map((o) => o.verdict.kind === "unroutable" && o.verdict.how),
      ["blackhole"],
    );
  });

  it("masquerades the node's packet to the address of the device its DNAT reroutes it to", () => {
    const listing = `table ip nat {
	chain OUTPUT {
		type nat hook output priority -100; policy accept;
		ip daddr 10.96.0.10 dnat to 10.244.0.7:53
	}
	chain POSTROUTING {
		type nat hook postrouting priority srcnat; policy accept;
		masquerade
	}
}
`;
    const r = evaluate(listing, {
      dst: "10.96.0.10",
      src: parseIp("192.168.10.2"),
      origin: "host",
      proto: "udp",
      dport: 53,
    });
    const v = r.outcomes[0]!.verdict;
    assert.equal(v.kind, "forwarded");
    if (v.kind === "forwarded") {
      assert.equal(v.dev, "pod0");
      assert.equal(v.src && formatIp(v.src), "10.244.0.1");
    }
  });

  it("names nft's reject types as iptables does", () => {
    assert.equal(rejectWithNft(undefined, 4), "icmp-port-unreachable");
    assert.equal(rejectWithNft("tcp reset", 4), "tcp-reset");
    assert.equal(rejectWithNft("icmpx admin-prohibited", 4), "icmp-admin-prohibited");
    assert.equal(rejectWithNft("icmpv6 admin-prohibited", 6), "icmp6-adm-prohibited");
  });
});

const fixture = (name: string) =>
  readFileSync(new URL(`../nftables/fixtures/${name}`, import.meta.url), "utf8");
const NODE_ROUTES = [
  "default via 10.128.0.1 dev eth0",
  "10.4.0.0/24 dev cbr0 proto kernel scope link src 10.4.0.1",
  "10.4.1.0/24 via 10.128.0.3 dev eth0",
  "10.4.2.0/24 via 10.128.0.4 dev eth0",
  "10.128.0.0/24 dev eth0 proto kernel scope link src 10.128.0.2",
  "local 10.4.0.1 dev cbr0 table local proto kernel scope host src 10.4.0.1",
  "local 10.128.0.2 dev eth0 table local proto kernel scope host src 10.128.0.2",
  "",
].join("\n");
const nodeCtx = () => ({
  routing: { routes: readIpRoute(NODE_ROUTES, "nodes/n1/ip-route.txt").value },
  localAddresses: [parseIp("10.4.0.1"), parseIp("10.128.0.2")],
  nodeInternalIp: parseIp("10.128.0.2"),
  interfaces: [
    { name: "eth0", primary: parseIp("10.128.0.2") },
    { name: "cbr0", primary: parseIp("10.4.0.1") },
  ],
});
const words = (r: PathResult) =>
  r.outcomes
    .map((o) => {
      const v = o.verdict;
      const p = o.probability;
      switch (v.kind) {
        case "forwarded":
          return `${p} forwarded ${v.dev} ${v.src ? formatIp(v.src) : "?"} > ${formatIp(v.dst)}:${v.port}`;
        case "rejected":
          return `${p} rejected ${v.with}`;
        default:
          return `${p} ${v.kind}`;
      }
    })
    .sort();

describe("compileNftPath on real listings", () => {
  it("follows the real kube-proxy's Service to each endpoint and rejects a Service without endpoints", () => {
    const text = fixture("kube-proxy-ruleset-a.nft");
    const rs = readNftRuleset(text, "nodes/n1/nft-ruleset.txt").value!;
    const ev = compileNftPath(rs, nodeCtx());
    const lines = text.split("\n");
    const clusterIP = /(\d+\.\d+\.\d+\.\d+) \. tcp \. 80 : goto service-/.exec(text)![1]!;
    const pod = (dst: string, dport: number) =>
      ev.evaluate({
        src: parseIp("10.4.0.9"),
        dst: parseIp(dst),
        proto: "tcp",
        sport: 41000,
        dport,
        origin: "pod",
        inIface: "cbr0",
      });
    const svc = pod(clusterIP, 80);
    assert.deepEqual(words(svc), [
      "0.5 forwarded eth0 10.4.0.9 > 10.4.1.5:8080",
      "0.5 forwarded eth0 10.4.0.9 > 10.4.2.7:8080",
    ]);
    const dnat = svc.outcomes[0]!.steps.find((s) => s.kind === "dnat")!;
    assert.match(lines[dnat.source.line - 1]!, /dnat ip to numgen random mod 2 map/);
    const none = pod("10.96.0.1", 443);
    assert.deepEqual(words(none), ["1 rejected icmp-port-unreachable"]);
    const v = none.outcomes[0]!.verdict;
    assert.ok(v.kind === "rejected");
    assert.match(lines[v.by.line - 1]!, /^\s*reject/);
  });

  it("answers on iptables-nft's listing as the iptables evaluator does on the same rules' dump", () => {
    const nft = compileNftPath(
      readNftRuleset(fixture("iptables-nft.nft"), "nodes/n1/nft-ruleset.txt").value!,
      nodeCtx(),
    );
    const ipt = compilePath(
      parseIptablesSave(fixture("iptables-nft.save.txt"), "nodes/n1/iptables-save.txt").value,
      nodeCtx(),
    );
    const flows: PathPacket[] = [
      ["10.4.0.9", "10.96.0.10", "udp", 53, "cbr0"],
      ["10.4.0.9", "10.20.30.40", "tcp", 5432, "cbr0"],
      ["10.4.0.9", "8.8.8.8", "tcp", 443, "cbr0"],
      ["192.168.7.7", "10.4.0.9", "tcp", 80, "eth0"],
      ["192.168.7.7", "10.128.0.2", "tcp", 22, "eth0"],
      ["192.168.7.7", "10.128.0.2", "tcp", 443, "eth0"],
    ].map(([src, dst, proto, dport, inIface]) => ({
      src: parseIp(src as string),
      dst: parseIp(dst as string),
      proto: proto as string,
      sport: 41000,
      dport: dport as number,
      origin: "pod",
      inIface: inIface as string,
    }));
    for (const f of flows) {
      const a = words(nft.evaluate(f));
      assert.ok(!a.some((w) => w.includes("undecided")), a.join(", "));
      assert.deepEqual(a, words(ipt.evaluate(f)), `${formatIp(f.src)} > ${formatIp(f.dst)}`);
    }
    assert.deepEqual(words(nft.evaluate(flows[3]!)), ["1 rejected icmp-host-prohibited"]);
  });

  it("an ip rule on a fact the packet does not state (its TOS) leaves it undecided, naming the command that decides, as the iptables path does", () => {
    const routing = {
      routes: readIpRoute(ROUTES, "nodes/n1/ip-route.txt").value,
      rules: readIpRule(
        "0:\tfrom all lookup local\n100:\tfrom all tos 0x10 lookup 100\n32766:\tfrom all lookup main\n",
        "nodes/n1/ip-rule.txt",
      ).value,
      rulesFile: "nodes/n1/ip-rule.txt",
    };
    const ctx = { routing, localAddresses: [parseIp("10.244.0.1"), parseIp("192.168.10.2")] };
    const packet: PathPacket = {
      src: parseIp("10.244.0.5"),
      dst: parseIp("8.8.8.8"),
      proto: "tcp",
      sport: 40000,
      dport: 443,
      origin: "pod",
    };
    const listing = `table ip filter {
\tchain FORWARD {
\t\ttype filter hook forward priority filter; policy accept;
\t}
}
`;
    const nft = compileNftPath(readNftRuleset(listing, "nodes/n1/nft-ruleset.txt").value!, ctx);
    const dump =
      "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n";
    const ipt = compilePath(parseIptablesSave(dump, "nodes/n1/iptables-save.txt").value, ctx);
    const verdict = nft.evaluate(packet).outcomes.map((o) => o.verdict);
    assert.equal(verdict.length, 1);
    const v = verdict[0]!;
    assert.equal(v.kind, "undecided");
    assert.ok(v.kind === "undecided");
    assert.equal(v.unknowns[0]?.decide?.file, "nodes/n1/ip-rule.txt");
    assert.match(v.unknowns[0]?.decide?.command ?? "", /^ip rule; ip route show table all/);
    assert.deepEqual(
      verdict,
      ipt.evaluate(packet).outcomes.map((o) => o.verdict),
    );
  });
});
