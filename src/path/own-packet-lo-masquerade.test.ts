/**
 * The node's own packet to a Service whose endpoint is the node itself (default/kubernetes on a
 * control-plane node, a hostNetwork pod): kube-proxy marks it for masquerade (iptables mode's
 * `KUBE-SEP-… -s <node> -j KUBE-MARK-MASQ`, nftables mode's hairpin mark), so nat POSTROUTING
 * masquerades it on lo, and then INPUT delivers it. The real kube-proxy and the kernel show this
 * (test/components/kube-proxy-whole-path.test.ts); the source MASQUERADE picks there (the first
 * address of scope global in `ip addr` order) is held to the kernel by
 * own-packet-lo-masquerade.kernel.test.ts. Both whole-path evaluators walk INPUT with that source,
 * or with each address the evidence allows when `ip addr` is not in the snapshot.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readIpAddr } from "../evidence/ip-addr.ts";
import { readIpRoute } from "../evidence/ip-route.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import { formatIp, parseIp } from "../net/cidr.ts";
import { readNftRuleset } from "../nftables/read-ruleset.ts";
import type { NodeEvidence } from "../snapshot/load.ts";
import { compilePath, type PathContext } from "./evaluate-path.ts";
import { compileNftPath } from "./nft-path.ts";
import { pathContextOf } from "./node-path.ts";
import type { PathResult } from "./path-types.ts";
import { NODE_TEST_ROUTES } from "./test-helpers/node-routes.ts";

const NODE = "192.168.10.2";
const SERVICE = "10.96.0.1";

const IPTABLES = [
  "*nat",
  ":PREROUTING ACCEPT [0:0]",
  ":INPUT ACCEPT [0:0]",
  ":OUTPUT ACCEPT [0:0]",
  ":POSTROUTING ACCEPT [0:0]",
  ":KUBE-MARK-MASQ - [0:0]",
  ":KUBE-POSTROUTING - [0:0]",
  ":KUBE-SEP-API - [0:0]",
  `-A OUTPUT -d ${SERVICE}/32 -p tcp -m tcp --dport 443 -j KUBE-SEP-API`,
  "-A POSTROUTING -j KUBE-POSTROUTING",
  "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
  "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
  "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
  "-A KUBE-POSTROUTING -j MASQUERADE --random-fully",
  `-A KUBE-SEP-API -s ${NODE}/32 -j KUBE-MARK-MASQ`,
  `-A KUBE-SEP-API -p tcp -m tcp -j DNAT --to-destination ${NODE}:6443`,
  "COMMIT",
  "",
].join("\n");

const NFT = [
  "table ip kube-proxy {",
  "\tchain nat-output {",
  "\t\ttype nat hook output priority -100; policy accept;",
  `\t\tip daddr ${SERVICE} tcp dport 443 goto endpoint-api`,
  "\t}",
  "",
  "\tchain nat-postrouting {",
  "\t\ttype nat hook postrouting priority srcnat; policy accept;",
  "\t\tmeta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random",
  "\t}",
  "",
  "\tchain endpoint-api {",
  `\t\tip saddr ${NODE} meta mark set meta mark | 0x00004000`,
  `\t\tmeta l4proto tcp dnat to ${NODE}:6443`,
  "\t}",
  "}",
  "",
].join("\n");

const context = () => ({
  routing: { routes: readIpRoute(NODE_TEST_ROUTES, "nodes/n1/ip-route.txt").value },
  localAddresses: [parseIp("10.244.0.1"), parseIp(NODE)],
});

const packet = {
  src: parseIp(NODE),
  dst: parseIp(SERVICE),
  proto: "tcp" as const,
  sport: 40_000,
  dport: 443,
  origin: "host" as const,
};

function assertDelivered(r: PathResult): void {
  assert.deepEqual(
    r.outcomes.map((o) => o.verdict.kind),
    ["delivered"],
    JSON.stringify(
      r.outcomes.map((o) => o.verdict),
      (_, v) => (typeof v === "bigint" ? v.toString() : v),
    ),
  );
}

/** filter INPUT: kube-proxy's KUBE-FIREWALL, and optionally a rule that looks at the source. */
function withInput(extra: readonly string[]): string {
  return [
    IPTABLES.trimEnd(),
    "*filter",
    ":INPUT ACCEPT [0:0]",
    ":FORWARD ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ":KUBE-FIREWALL - [0:0]",
    "-A INPUT -j KUBE-FIREWALL",
    ...extra,
    '-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
    "COMMIT",
    "",
  ].join("\n");
}

/** nftables: the same ruleset with an input chain, optionally dropping a source. */
function nftWithInput(drop?: string): string {
  return [
    NFT.trimEnd(),
    "table ip filter {",
    "\tchain input {",
    "\t\ttype filter hook input priority filter; policy accept;",
    ...(drop ? [`\t\tip saddr ${drop} drop`] : []),
    "\t}",
    "}",
    "",
  ].join("\n");
}

/** `ip addr` of the node, its interfaces in the order given (the kernel's ifindex order). */
function ipAddr(order: "eth0-first" | "pod0-first"): string {
  const lo = [
    "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000",
    "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00",
    "    inet 127.0.0.1/8 scope host lo",
    "       valid_lft forever preferred_lft forever",
  ];
  const eth0 = (n: number) => [
    `${n}: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default qlen 1000`,
    "    link/ether 02:00:00:00:00:02 brd ff:ff:ff:ff:ff:ff",
    `    inet ${NODE}/24 brd 192.168.10.255 scope global eth0`,
    "       valid_lft forever preferred_lft forever",
  ];
  const pod0 = (n: number) => [
    `${n}: pod0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default qlen 1000`,
    "    link/ether 02:00:00:00:00:03 brd ff:ff:ff:ff:ff:ff",
    "    inet 10.244.0.1/24 brd 10.244.0.255 scope global pod0",
    "       valid_lft forever preferred_lft forever",
  ];
  const rest = order === "eth0-first" ? [...eth0(2), ...pod0(3)] : [...pod0(2), ...eth0(3)];
  return [...lo, ...rest, ""].join("\n");
}

/** The context pathContextOf builds from the node's `ip addr` and routes. */
function nodeContext(order: "eth0-first" | "pod0-first"): PathContext {
  const interfaces = readIpAddr(ipAddr(order), "nodes/n1/ip-addr.txt").value;
  const routes = readIpRoute(NODE_TEST_ROUTES, "nodes/n1/ip-route.txt").value;
  return pathContextOf({ name: "n1", files: {}, interfaces, routes } as NodeEvidence, undefined);
}

function masqueradeStep(r: PathResult) {
  const s = r.outcomes[0]?.steps.find((x) => x.kind === "snat");
  assert.ok(s && s.kind === "snat", "a snat step");
  return s;
}

const kinds = (r: PathResult) => r.outcomes.map((o) => o.verdict.kind);

function iptablesPath(text: string, ctx: PathContext) {
  return compilePath(parseIptablesSave(text, "nodes/n1/iptables-save.txt").value, ctx);
}

function nftPath(text: string, ctx: PathContext) {
  const r = readNftRuleset(text, "nodes/n1/nft-ruleset.txt");
  assert.deepEqual(
    r.diagnostics.filter((d) => d.severity === "error"),
    [],
  );
  return compileNftPath(r.value, ctx);
}

const MODES = [
  {
    mode: "iptables",
    path: iptablesPath,
    rules: withInput,
    drop: (a: string) => withInput([`-A INPUT -s ${a}/32 -j DROP`]),
  },
  {
    mode: "nftables",
    path: nftPath,
    rules: () => nftWithInput(),
    drop: (a: string) => nftWithInput(a),
  },
] as const;

describe("the source MASQUERADE gives the node's own packet on lo", () => {
  for (const m of MODES) {
    it(`is the first address of scope global in ip addr order, cited (${m.mode})`, () => {
      for (const [order, want, line] of [
        ["eth0-first", NODE, 7],
        ["pod0-first", "10.244.0.1", 7],
      ] as const) {
        const r = m.path(m.rules([]), nodeContext(order)).evaluate(packet);
        assert.deepEqual(kinds(r), ["delivered"], order);
        const s = masqueradeStep(r);
        assert.equal(s.decision, "masquerade");
        assert.equal(s.to && formatIp(s.to), want, order);
        assert.match(s.note, new RegExp(`nodes/n1/ip-addr\\.txt:${line}`), s.note);
        assert.equal(
          s.source.file,
          m.mode === "iptables" ? "nodes/n1/iptables-save.txt" : "nodes/n1/nft-ruleset.txt",
        );
      }
    });

    it(`is what INPUT's rules see: a rule dropping one address decides by the order (${m.mode})`, () => {
      const rules = m.drop("10.244.0.1");
      assert.deepEqual(kinds(m.path(rules, nodeContext("eth0-first")).evaluate(packet)), [
        "delivered",
      ]);
      assert.deepEqual(kinds(m.path(rules, nodeContext("pod0-first")).evaluate(packet)), [
        "dropped",
      ]);
    });

    it(`without ip addr, is undecided naming ip addr when the node's addresses end differently (${m.mode})`, () => {
      const r = m.path(m.drop("10.244.0.1"), context()).evaluate(packet);
      assert.deepEqual(kinds(r), ["undecided"]);
      const v = r.outcomes[0]!.verdict;
      assert.ok(v.kind === "undecided");
      assert.match(v.reason, /`ip addr` decides/);
      assert.match(masqueradeStep(r).note, /10\.244\.0\.1, 192\.168\.10\.2/);
    });

    it(`without any of the node's addresses, is undecided naming ip addr (${m.mode})`, () => {
      const ctx = { routing: context().routing };
      const r = m.path(m.rules([]), ctx).evaluate(packet);
      assert.deepEqual(kinds(r), ["undecided"]);
      const v = r.outcomes[0]!.verdict;
      assert.ok(v.kind === "undecided");
      assert.match(v.reason, /not in evidence.*`ip addr` decides/);
    });
  }
});

describe("the node's own packet to a Service endpoint on the node, masqueraded on lo", () => {
  it("is delivered (iptables)", () => {
    const dump = parseIptablesSave(IPTABLES, "nodes/n1/iptables-save.txt").value;
    assertDelivered(compilePath(dump, context()).evaluate(packet));
  });

  it("is delivered past KUBE-FIREWALL, whichever of the node's addresses it takes (iptables)", () => {
    assertDelivered(iptablesPath(withInput([]), context()).evaluate(packet));
  });

  it("is delivered (nftables)", () => {
    const r = readNftRuleset(NFT, "nodes/n1/nft-ruleset.txt");
    assert.deepEqual(
      r.diagnostics.filter((d) => d.severity === "error"),
      [],
    );
    assertDelivered(compileNftPath(r.value, context()).evaluate(packet));
  });
});
