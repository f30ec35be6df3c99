/**
 * The node's own packet to a Service whose endpoint is the node itself, held to the kernel: in a
 * lab namespace shaped as a node (lo, and interfaces with global addresses created in a chosen
 * order), kube-proxy's rules are loaded with the real iptables-restore (iptables mode: OUTPUT
 * DNAT to the node, `KUBE-SEP-… -s <node> -j KUBE-MARK-MASQ`, KUBE-POSTROUTING's MASQUERADE,
 * KUBE-FIREWALL) or `nft -f` (nftables mode's hairpin mark and masquerade); a real TCP connection
 * from the namespace to the Service address is accepted by a listener on the node's address, which
 * reports the source it sees. The kernel's masquerade on lo takes the first primary address of
 * scope global in ifindex order (lo's 127.0.0.1 is scope host; a global address on lo comes
 * first): that source, and delivery, are
 * what both whole-path evaluators must answer from the namespace's own `ip addr`, `ip route`,
 * iptables-save and `nft list ruleset`. Kernel test: needs root; fails in CI without it, skips
 * locally.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { readIpAddr } from "../evidence/ip-addr.ts";
import { readIpRoute } from "../evidence/ip-route.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import { hasCommand } from "../iptables/test-helpers/iptables-netns.ts";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { createLab, type Lab, mustExec, type Namespace } from "../lab/netns.ts";
import { rootNamespaceHash } from "../lab/root-state.ts";
import { formatIp, parseIp } from "../net/cidr.ts";
import { readNftRuleset } from "../nftables/read-ruleset.ts";
import type { NodeEvidence } from "../snapshot/load.ts";
import { compilePath } from "./evaluate-path.ts";
import { compileNftPath } from "./nft-path.ts";
import { pathContextOf } from "./node-path.ts";
import type { PathEvaluator, PathResult } from "./path-types.ts";

const NODE = "192.168.10.2";
const SERVICE = "10.96.0.1";

/** The node's interfaces: name and address, created in the order of each case. */
const IFACES = {
  eth0: `${NODE}/24`,
  pod0: "10.244.0.1/24",
  other0: "10.1.0.1/24",
} as const;
type Iface = keyof typeof IFACES;

const IPTABLES = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-NPX46M4PTMTKRN6Y - [0:0]
:KUBE-SEP-API - [0:0]
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SERVICES -d ${SERVICE}/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y
-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment "default/kubernetes:https -> ${NODE}:6443" -j KUBE-SEP-API
-A KUBE-SEP-API -s ${NODE}/32 -m comment --comment "default/kubernetes:https" -j KUBE-MARK-MASQ
-A KUBE-SEP-API -p tcp -m comment --comment "default/kubernetes:https" -m tcp -j DNAT --to-destination ${NODE}:6443
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -j KUBE-FIREWALL
-A OUTPUT -j KUBE-FIREWALL
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
COMMIT
`;

const NFT = `table ip kube-proxy {
	chain nat-output {
		type nat hook output priority -100; policy accept;
		ip daddr ${SERVICE} tcp dport 443 goto endpoint-api
	}

	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
	}

	chain endpoint-api {
		ip saddr ${NODE} meta mark set meta mark | 0x00004000
		meta l4proto tcp dnat to ${NODE}:6443
	}
}
`;

/** Listens on the node's address, connects to the Service, prints the source the listener saw. */
const PROBE = `
const net = require("node:net");
const srv = net.createServer((s) => { process.stdout.write(s.remoteAddress + "\\n"); s.destroy(); srv.close(); c.destroy(); });
let c;
srv.listen(6443, "${NODE}", () => {
  c = net.connect(443, "${SERVICE}");
  c.on("error", (e) => { process.stderr.write(String(e) + "\\n"); process.exit(2); });
});
setTimeout(() => { process.stderr.write("no connection\\n"); process.exit(3); }, 10000).unref();
`;

const skip =
  kernelSkip() ||
  (hasCommand("iptables-restore") && hasCommand("nft") ? false : "iptables or nft is missing");

/** A node namespace whose interfaces are created (so numbered) in `order`. */
async function nodeNamespace(
  lab: Lab,
  role: string,
  order: readonly Iface[],
  loAddress: string | undefined,
): Promise<Namespace> {
  const ns = await lab.addNamespace(role);
  await mustExec(ns, ["ip", "link", "set", "lo", "up"]);
  if (loAddress) await mustExec(ns, ["ip", "addr", "add", loAddress, "dev", "lo"]);
  for (const i of order) {
    await mustExec(ns, ["ip", "link", "add", i, "type", "veth", "peer", "name", `${i}p`]);
    await mustExec(ns, ["ip", "addr", "add", IFACES[i], "dev", i]);
    await mustExec(ns, ["ip", "link", "set", i, "up"]);
    await mustExec(ns, ["ip", "link", "set", `${i}p`, "up"]);
  }
  await mustExec(ns, ["ip", "route", "add", "default", "via", "192.168.10.1", "dev", "eth0"]);
  return ns;
}

/** The source the listener saw for the connection to the Service. */
async function probe(ns: Namespace): Promise<string> {
  const r = await ns.exec([process.execPath, "-e", PROBE], { timeoutMs: 20_000 });
  assert.equal(r.code, 0, `the connection to ${SERVICE}:443: ${r.stderr}`);
  return r.stdout.trim().replace(/^::ffff:/, "");
}

/** The evaluator built from what the namespace's own tools print. */
async function evaluator(ns: Namespace, mode: "iptables" | "nftables"): Promise<PathEvaluator> {
  const addr = await mustExec(ns, ["ip", "addr"]);
  const route = await mustExec(ns, ["ip", "route", "show", "table", "all"]);
  const interfaces = readIpAddr(addr, "nodes/n1/ip-addr.txt").value;
  const routes = readIpRoute(route, "nodes/n1/ip-route.txt").value;
  const ctx = pathContextOf(
    { name: "n1", files: {}, interfaces, routes } as NodeEvidence,
    undefined,
  );
  if (mode === "iptables") {
    const save = await mustExec(ns, ["iptables-save"]);
    return compilePath(parseIptablesSave(save, "nodes/n1/iptables-save.txt").value, ctx);
  }
  const list = await mustExec(ns, ["nft", "list", "ruleset"]);
  return compileNftPath(readNftRuleset(list, "nodes/n1/nft-ruleset.txt").value, ctx);
}

function masqueradedTo(r: PathResult): string | undefined {
  const s = r.outcomes[0]?.steps.find((x) => x.kind === "snat");
  return s?.kind === "snat" && s.to ? formatIp(s.to) : undefined;
}

/** `lo`: a global address on lo itself (a VIP), which comes before every other interface's. */
const CASES: readonly { order: readonly Iface[]; lo?: string; want: string }[] = [
  { order: ["other0", "eth0", "pod0"], want: "10.1.0.1" },
  { order: ["pod0", "other0", "eth0"], want: "10.244.0.1" },
  { order: ["pod0", "eth0"], lo: "10.9.9.9/32", want: "10.9.9.9" },
];

describe("the node's own packet masqueraded on lo, on the kernel", { skip }, () => {
  let lab: Lab | undefined;
  let rootBefore = "";
  before(async () => {
    rootBefore = await rootNamespaceHash();
    lab = await createLab();
  });
  after(async () => {
    await lab?.destroy();
    if (rootBefore)
      assert.equal(await rootNamespaceHash(), rootBefore, "the root namespace changed");
  });

  for (const mode of ["iptables", "nftables"] as const) {
    it(`takes the first global address in ifindex order and is delivered, as podpath says (${mode})`, async () => {
      for (const [n, c] of CASES.entries()) {
        const ns = await nodeNamespace(lab!, `${mode.slice(0, 3)}${n}`, c.order, c.lo);
        if (mode === "iptables") await mustExec(ns, ["iptables-restore"], IPTABLES);
        else await mustExec(ns, ["nft", "-f", "-"], NFT);
        const seen = await probe(ns);
        // the kernel: delivered, with the source of the first interface holding a global address
        assert.equal(seen, c.want, `${c.order.join(",")}: the listener saw ${seen}`);
        const r = (await evaluator(ns, mode)).evaluate({
          src: parseIp(NODE),
          dst: parseIp(SERVICE),
          proto: "tcp",
          sport: 40_000,
          dport: 443,
          origin: "host",
        });
        assert.deepEqual(
          r.outcomes.map((o) => o.verdict.kind),
          ["delivered"],
          c.order.join(","),
        );
        assert.equal(masqueradedTo(r), seen, c.order.join(","));
      }
    });
  }
});
