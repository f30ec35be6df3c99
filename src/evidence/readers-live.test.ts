/**
 * @module evidence/readers-live.test — the readers against the real tools, run now: a pod, node and
 * remote namespace are built (as in fixtures/make-fixtures.sh), `ip`, `sysctl` and `conntrack`
 * are run inside them, and what the readers return is checked against what was configured.
 * Kernel test: needs root; fails in CI without it, skips locally.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { createLab, type Lab, type Namespace } from "../lab/netns.ts";
import { formatCidr, formatIp, parseIp } from "../net/cidr.ts";
import { readConntrack, translatedSource } from "./conntrack.ts";
import { primaryAddress, readIpAddr } from "./ip-addr.ts";
import { lookupRoute, readIpRoute, routeDestination } from "./ip-route.ts";
import { readSysctl } from "./sysctl.ts";

const skip = kernelSkip();

async function must(ns: Namespace, argv: readonly string[]): Promise<string> {
  const r = await ns.exec(argv, { timeoutMs: 15_000 });
  assert.equal(r.code, 0, `${argv.join(" ")} in ${ns.name}: ${r.stderr}`);
  return r.stdout;
}

describe("readers on live tool output", { skip }, () => {
  let lab: Lab;
  let pod: Namespace;
  let node: Namespace;
  let remote: Namespace;

  before(async () => {
    lab = await createLab({ prefix: "ppa" });
    pod = await lab.addNamespace("pod");
    node = await lab.addNamespace("node");
    remote = await lab.addNamespace("remote");
    await lab.link(pod, "eth0", node, "veth1");
    await lab.link(node, "ext0", remote, "eth0");
    const steps: [Namespace, string][] = [
      [pod, "ip link set lo up"],
      [pod, "ip link set eth0 up"],
      [pod, "sysctl -qw net.ipv6.conf.all.disable_ipv6=0"],
      [pod, "ip addr add 10.244.1.5/24 dev eth0"],
      [pod, "ip addr add 10.244.1.6/24 dev eth0"],
      [pod, "ip -6 addr add fd00:10::5/64 dev eth0 nodad"],
      [pod, "ip route add default via 10.244.1.1 dev eth0"],
      [pod, "ip route add 10.20.30.0/24 via 10.244.1.1 dev eth0 metric 50"],
      [pod, "ip route add blackhole 10.99.0.0/16"],
      [pod, "ip route add 10.8.0.0/24 via 10.244.1.1 dev eth0 onlink table 100"],
      [pod, "sysctl -qw net.ipv4.ip_forward=0"],
      [node, "ip link set lo up"],
      [node, "ip link set veth1 up"],
      [node, "ip link set ext0 up"],
      [node, "ip addr add 10.244.1.1/24 dev veth1"],
      [node, "ip addr add 10.20.30.1/24 dev ext0"],
      [
        node,
        "ip route add 10.50.0.0/16 nexthop via 10.244.1.5 dev veth1 weight 1 nexthop via 10.244.1.6 dev veth1 weight 2",
      ],
      [node, "sysctl -qw net.ipv4.ip_forward=1"],
      [node, "iptables -t nat -A POSTROUTING -s 10.244.1.0/24 -d 10.20.30.0/24 -j MASQUERADE"],
      [remote, "ip link set lo up"],
      [remote, "ip link set eth0 up"],
      [remote, "ip addr add 10.20.30.40/24 dev eth0"],
    ];
    for (const [ns, cmd] of steps) await must(ns, cmd.split(" "));
    await must(pod, ["ping", "-c", "1", "-W", "2", "-I", "10.244.1.6", "10.20.30.40"]);
  });

  after(async () => {
    await lab?.destroy();
  });

  it("ip route, ip -o route, ip route show table all, ip -d route", async () => {
    for (const argv of [
      ["ip", "route"],
      ["ip", "-o", "route"],
      ["ip", "-d", "route"],
    ]) {
      const out = await must(pod, argv);
      const { value, diagnostics } = readIpRoute(out, "live");
      assert.deepEqual(diagnostics, [], argv.join(" "));
      assert.equal(value.length, out.trim().split("\n").length);
      assert.equal(formatIp(lookupRoute(value, parseIp("10.20.30.40"))!.via!), "10.244.1.1");
      assert.equal(
        formatCidr(routeDestination(lookupRoute(value, parseIp("10.20.30.40"))!)),
        "10.20.30.0/24",
      );
      assert.equal(lookupRoute(value, parseIp("10.99.0.1"))?.type, "blackhole");
      assert.equal(lookupRoute(value, parseIp("1.1.1.1"))?.dst, "default");
    }
    const all = readIpRoute(await must(pod, ["ip", "route", "show", "table", "all"]), "all");
    assert.deepEqual(all.diagnostics, []);
    assert.equal(lookupRoute(all.value, parseIp("10.244.1.6"))?.type, "local");
    assert.deepEqual(lookupRoute(all.value, parseIp("10.8.0.7"), "100")?.flags, ["onlink"]);
    const mp = readIpRoute(await must(node, ["ip", "-o", "route"]), "node");
    assert.equal(mp.value.find((r) => r.nexthops)?.nexthops?.length, 2);
  });

  it("ip -6 route", async () => {
    const { value, diagnostics } = readIpRoute(await must(pod, ["ip", "-6", "route"]), "v6", {
      family: 6,
    });
    assert.deepEqual(diagnostics, []);
    assert.ok(value.every((r) => r.family === 6));
    assert.ok(value.some((r) => r.dst !== "default" && formatCidr(r.dst) === "fd00:10::/64"));
  });

  it("ip addr in all four forms agrees on eth0's addresses", async () => {
    const forms = [
      ["ip", "addr"],
      ["ip", "-o", "addr"],
      ["ip", "-br", "addr"],
      ["ip", "-j", "addr"],
    ];
    const seen: string[][] = [];
    for (const argv of forms) {
      const { value, diagnostics } = readIpAddr(await must(pod, argv), "live");
      assert.deepEqual(diagnostics, [], argv.join(" "));
      const eth0 = value.find((i) => i.name === "eth0")!;
      seen.push(
        eth0.addresses
          .filter((a) => a.scope !== "link")
          .map((a) => `${formatIp(a.local)}/${a.cidr.prefix}`)
          .slice(0, 3),
      );
      assert.equal(formatIp(primaryAddress(eth0, 4)!.local), "10.244.1.5");
    }
    for (const s of seen) assert.deepEqual(s, ["10.244.1.5/24", "10.244.1.6/24", "fd00:10::5/64"]);
    const plain = readIpAddr(await must(pod, ["ip", "addr"]), "p").value.find(
      (i) => i.name === "eth0",
    )!;
    const nodeSide = readIpAddr(await must(node, ["ip", "addr"]), "n").value.find(
      (i) => i.name === "veth1",
    )!;
    // The pod's eth0@ifN names the node-side veth's index: how a pod is matched to its host interface.
    assert.equal(plain.peerIndex, nodeSide.index);
  });

  it("sysctl -a, sysctl KEY, sysctl -n KEY and /proc/sys agree per namespace", async () => {
    for (const [ns, want] of [
      [pod, "0"],
      [node, "1"],
    ] as const) {
      const all = readSysctl(await must(ns, ["sysctl", "-a"]), "a");
      assert.deepEqual(
        all.diagnostics.filter((d) => d.severity !== "info"),
        [],
      );
      assert.equal(all.value.get("net.ipv4.ip_forward")?.value, want);
      assert.equal(
        readSysctl(await must(ns, ["sysctl", "net.ipv4.ip_forward"]), "k").value.get(
          "net.ipv4.ip_forward",
        )?.value,
        want,
      );
      const n = await must(ns, ["sysctl", "-n", "net.ipv4.ip_forward"]);
      assert.equal(
        readSysctl(n, "n", { keys: ["net.ipv4.ip_forward"] }).value.get("net.ipv4.ip_forward")
          ?.value,
        want,
      );
      const proc = await must(ns, ["cat", "/proc/sys/net/ipv4/ip_forward"]);
      assert.equal(
        readSysctl(proc, "proc/sys/net/ipv4/ip_forward").value.get("net.ipv4.ip_forward")?.value,
        want,
      );
    }
  });

  it("conntrack -L shows the masqueraded ping, and translatedSource names the node address", async () => {
    const r = await node.exec(["conntrack", "-L"], { timeoutMs: 15_000 });
    assert.equal(r.code, 0, r.stderr);
    const { value, diagnostics } = readConntrack(r.stdout + r.stderr, "conntrack");
    assert.deepEqual(diagnostics, []);
    const ping = value.find((e) => e.proto === "icmp" && formatIp(e.orig.dst) === "10.20.30.40");
    assert.ok(ping, r.stdout);
    assert.equal(formatIp(ping.orig.src), "10.244.1.6");
    assert.equal(formatIp(translatedSource(ping)!), "10.20.30.1");
    const ext = await must(node, ["conntrack", "-L", "-o", "extended"]);
    assert.ok(readConntrack(ext, "x").value.some((e) => e.l3 === 4 && e.proto === "icmp"));
  });
});
