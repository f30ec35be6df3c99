/** @module evidence/ip-route.test — readIpRoute on real iproute2 output, and lookupRoute. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { formatCidr, formatIp, parseIp } from "../net/cidr.ts";
import { lookupRoute, type Route, readIpRoute, routeDestination } from "./ip-route.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`fixtures/${name}`, import.meta.url), "utf8");
const dst = (r: Route | undefined) => (r ? formatCidr(routeDestination(r)) : undefined);

describe("readIpRoute", () => {
  it("reads `ip route`: every line, with types, gateways, metrics and flags", () => {
    const text = fixture("ip-route.txt");
    const { value, diagnostics } = readIpRoute(text, "ip-route.txt");
    assert.deepEqual(diagnostics, []);
    assert.equal(value.length, text.trim().split("\n").length);
    const def = value.find((r) => r.dst === "default");
    assert.equal(def?.via && formatIp(def.via), "10.244.1.1");
    assert.equal(def?.dev, "eth0");
    assert.equal(def?.family, 4);
    const stat = value.find((r) => dst(r) === "10.20.0.0/16");
    assert.equal(stat?.proto, "static");
    assert.equal(stat?.metric, 100);
    assert.deepEqual(
      value.filter((r) => r.type !== "unicast").map((r) => [r.type, dst(r)]),
      [
        ["prohibit", "10.97.0.0/16"],
        ["unreachable", "10.98.0.0/16"],
        ["blackhole", "10.99.0.0/16"],
      ],
    );
    const link = value.find((r) => dst(r) === "10.244.1.0/24");
    assert.equal(link?.scope, "link");
    assert.equal(link?.src && formatIp(link.src), "10.244.1.5");
    for (const r of value)
      assert.equal(text.split("\n")[r.source.line - 1]?.trimEnd(), r.source.text);
  });

  it("reads `ip -o route` and `ip -d route` to the same routes as `ip route`", () => {
    const plain = readIpRoute(fixture("ip-route.txt"), "a").value;
    const oneline = readIpRoute(fixture("ip-o-route.txt"), "b").value;
    const detailed = readIpRoute(fixture("ip-d-route.txt"), "c");
    assert.deepEqual(detailed.diagnostics, []);
    const key = (r: Route) =>
      `${r.type} ${dst(r)} ${r.via ? formatIp(r.via) : "-"} ${r.dev ?? "-"} ${r.metric ?? 0}`;
    assert.deepEqual(oneline.map(key), plain.map(key));
    assert.deepEqual(detailed.value.map(key), plain.map(key));
  });

  it("reads `ip route show table all` with local, broadcast, table 100, throw and IPv6 routes", () => {
    const { value, diagnostics } = readIpRoute(fixture("ip-route-table-all.txt"), "all");
    assert.deepEqual(diagnostics, []);
    const t100 = value.filter((r) => r.table === "100");
    assert.deepEqual(
      t100.map((r) => [r.type, dst(r)]),
      [
        ["unicast", "10.8.0.0/24"],
        ["throw", "10.9.0.0/16"],
      ],
    );
    assert.deepEqual(t100[0]?.flags, ["onlink"]);
    assert.ok(value.some((r) => r.type === "broadcast" && r.table === "local"));
    const v6default = value.find((r) => r.family === 6 && r.dst === "default");
    assert.equal(v6default?.metric, 1024);
    assert.equal(v6default?.attributes.pref, "medium");
    assert.ok(value.some((r) => r.type === "multicast" && dst(r) === "ff00::/8"));
  });

  it("reads multipath routes in both the indented and the -o form", () => {
    for (const name of ["ip-route-node.txt", "ip-o-route-node.txt"]) {
      const { value, diagnostics } = readIpRoute(fixture(name), name);
      assert.deepEqual(diagnostics, []);
      const mp = value.find((r) => dst(r) === "10.50.0.0/16");
      assert.deepEqual(
        mp?.nexthops?.map((n) => [n.via && formatIp(n.via), n.dev, n.weight]),
        [
          ["10.244.1.5", "veth1", 1],
          ["10.244.1.6", "veth1", 2],
        ],
      );
      const lines = fixture(name).split("\n");
      assert.ok(lines[mp!.source.line - 1]?.startsWith("10.50.0.0/16"));
      assert.deepEqual(value.find((r) => dst(r) === "10.60.0.0/16")?.flags, ["linkdown"]);
      assert.equal(value.length, lines.filter((l) => /^\S/.test(l)).length);
    }
  });

  it("reads nexthop-object routes, tun routes and IPv6 lifetimes from a node", () => {
    const { value, diagnostics } = readIpRoute(fixture("ip-route-node.txt"), "n");
    assert.deepEqual(diagnostics, []);
    const nh = value.find((r) => dst(r) === "10.70.0.0/16");
    assert.equal(nh?.attributes.nhid, "7");
    assert.equal(nh?.via && formatIp(nh.via), "10.20.30.40");
    assert.equal(nh?.dev, "ext0");
    const peer = value.find((r) => dst(r) === "10.8.0.2/32");
    assert.equal(peer?.src && formatIp(peer.src), "10.8.0.1");
    assert.deepEqual(peer?.flags, ["linkdown"]);
    const v6 = readIpRoute(fixture("ip-6-route-node.txt"), "v6");
    assert.deepEqual(v6.diagnostics, []);
    const r = v6.value.find((x) => dst(x) === "fd00:99::/64");
    assert.equal(r?.attributes.mtu, "lock 1400");
    assert.match(r?.attributes.expires ?? "", /^\d+sec$/);
    assert.equal(r?.metric, 1024);
    assert.equal(v6.value.filter((x) => dst(x) === "fe80::/64").length, 2);
  });

  it("takes the family of a bare default from options, and the table from options", () => {
    const { value } = readIpRoute("default dev tun0 scope link\n", "x", {
      family: 6,
      table: "100",
    });
    assert.equal(value[0]?.family, 6);
    assert.equal(value[0]?.table, "100");
  });

  it("reads `ip route get` output with its cache line", () => {
    const text = "10.20.30.40 via 10.244.1.1 dev eth0 src 10.244.1.5 uid 0 \n    cache \n";
    const { value, diagnostics } = readIpRoute(text, "get");
    assert.deepEqual(diagnostics, []);
    assert.equal(dst(value[0]), "10.20.30.40/32");
    assert.deepEqual(value[0]?.flags, ["cache"]);
    assert.equal(value[0]?.attributes.uid, "0");
  });

  it("reads the flags `ip route get` prints after cache for local and broadcast answers", () => {
    const text =
      "local 10.8.0.6 dev lo table local src 10.8.0.6 uid 0 \n    cache <local> \n" +
      "broadcast 10.8.0.255 dev tun0 table local src 10.8.0.6 uid 1000 \n    cache <local,brd> \n";
    const { value, diagnostics } = readIpRoute(text, "get");
    assert.deepEqual(diagnostics, []);
    assert.deepEqual(
      value.map((r) => [r.type, r.table, r.attributes["cache-flags"], r.source.line]),
      [
        ["local", "local", "local", 1],
        ["broadcast", "local", "local,brd", 3],
      ],
    );
  });

  it("reports unreadable lines with file, line and what was expected, and keeps going", () => {
    const text =
      "default via 10.0.0.1 dev eth0\n10.0.0.300/8 dev eth0\nblackhole\n10.1.0.0/16 via nothing\n10.2.0.0/16 dev eth0 bogus\n10.3.0.0/16 dev eth0 metric x\n";
    const { value, diagnostics } = readIpRoute(text, "r.txt");
    assert.deepEqual(value.map(dst), ["0.0.0.0/0", "10.2.0.0/16"]);
    assert.deepEqual(
      diagnostics.map((d) => [d.code, d.source?.line]),
      [
        ["ROUTE_SYNTAX", 2],
        ["ROUTE_SYNTAX", 3],
        ["ROUTE_SYNTAX", 4],
        ["ROUTE_UNKNOWN_ATTRIBUTE", 5],
        ["ROUTE_SYNTAX", 6],
      ],
    );
    assert.match(diagnostics[0]!.message, /expected a destination CIDR or "default"/);
    assert.match(diagnostics[2]!.message, /expected an address after "via"/);
    assert.ok(diagnostics.every((d) => d.source?.file === "r.txt"));
  });
});

describe("lookupRoute", () => {
  const all = readIpRoute(fixture("ip-route-table-all.txt"), "all").value;
  const pick = (ip: string, table?: string) => lookupRoute(all, parseIp(ip), table);

  it("prefers the longest prefix over a lower metric", () => {
    assert.equal(dst(pick("10.20.30.40")), "10.20.30.0/24");
    assert.equal(dst(pick("10.20.1.1")), "10.20.0.0/16");
  });

  it("falls back to the default route", () => assert.equal(pick("8.8.8.8")?.dst, "default"));

  it("answers local addresses from the local table first", () => {
    const r = pick("10.244.1.6");
    assert.equal(r?.type, "local");
    assert.equal(r?.table, "local");
  });

  it("returns blackhole, unreachable and prohibit routes as the kernel would", () => {
    assert.equal(pick("10.99.1.1")?.type, "blackhole");
    assert.equal(pick("10.98.1.1")?.type, "unreachable");
    assert.equal(pick("10.97.1.1")?.type, "prohibit");
  });

  it("looks in one table when asked, and a throw route ends that lookup", () => {
    assert.equal(dst(pick("10.8.0.9", "100")), "10.8.0.0/24");
    assert.equal(pick("10.9.0.1", "100"), undefined);
    assert.equal(pick("10.20.30.40", "100"), undefined);
  });

  it("breaks prefix ties by metric", () => {
    const routes = readIpRoute(
      "10.5.0.0/16 via 10.0.0.1 dev a metric 200\n10.5.0.0/16 via 10.0.0.2 dev b metric 100\n10.5.0.0/16 via 10.0.0.3 dev c metric 300\n",
      "m",
    ).value;
    assert.equal(lookupRoute(routes, parseIp("10.5.1.1"))?.dev, "b");
  });

  it("keeps families apart", () => {
    assert.equal(dst(pick("fd00:20::1")), "fd00:20::/48");
    assert.equal(pick("fd00:99::1")?.dst, "default");
    assert.equal(pick("fd00:99::1")?.family, 6);
  });
});
