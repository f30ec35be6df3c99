/**
 * @module cases/masquerade/ipv6-path.kernel.test — diagnose reads an IPv6 flow's whole way through
 * its node from the node's IPv6 evidence: a dual-stack node made in a lab network namespace, its
 * rules loaded with the real ip6tables-restore and read back with ip6tables-save, its routes and
 * rules as `ip -6 route show table all` and `ip -6 rule` print them (what `collect --node-state`
 * gathers). A dual-stack pod's IPv6 packet to a blocked IPv6 destination gets `masq/filter-blocks`
 * citing the ip6tables-save line; its IPv4 packet, which the IPv4 rules let through, does not.
 * Kernel test: needs root; fails in CI without it, skips locally.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { writeSnapshotFile } from "../../lab/artifacts.ts";
import { kernelSkip } from "../../lab/kernel-guard.ts";
import { createLab, type Lab, type Namespace } from "../../lab/netns.ts";
import { parseIp } from "../../net/cidr.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";

const skip = kernelSkip();
const NODE = "dual-0";
const POD_V4 = "10.4.0.5";
const POD_V6 = "fd00:4::5";

/** The node's IPv6 rules: pods may not reach the database range on 5432; pods masquerade out. */
const IP6_RULES = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -s fd00:4::/64 -d 2001:db8:20::/48 -p tcp -m tcp --dport 5432 -m comment --comment "no pods to the database range" -j REJECT --reject-with icmp6-adm-prohibited
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -s fd00:4::/64 ! -d fd00:4::/64 -o eth0 -j MASQUERADE
COMMIT
`;

/** The IPv4 rules let the same flow through (only masquerade). */
const IP4_RULES = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -s 10.4.0.0/24 ! -d 10.4.0.0/24 -o eth0 -j MASQUERADE
COMMIT
`;

const CLUSTER_NODES = `apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Node
    metadata:
      name: ${NODE}
    spec:
      podCIDR: 10.4.0.0/24
      podCIDRs: [10.4.0.0/24, "fd00:4::/64"]
    status:
      addresses:
        - { address: 10.128.0.2, type: InternalIP }
        - { address: "2001:db8:128::2", type: InternalIP }
`;

const CLUSTER_PODS = `apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: { name: app, namespace: default }
    spec:
      nodeName: ${NODE}
      containers: [{ name: app, image: app:1 }]
    status:
      phase: Running
      hostIP: 10.128.0.2
      podIP: ${POD_V4}
      podIPs: [{ ip: ${POD_V4} }, { ip: "${POD_V6}" }]
`;

async function run(ns: Namespace, argv: readonly string[], input?: string): Promise<string> {
  const r = await ns.exec(argv, input === undefined ? {} : { input });
  assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

describe("diagnose on a dual-stack node's IPv6 evidence", { skip }, () => {
  let lab: Lab | undefined;
  const root = mkdtempSync(join(tmpdir(), "pp-ipv6-path-"));

  before(async () => {
    lab = await createLab({ prefix: "ppv6d" });
    const ns = await lab.addNamespace("node");
    const router = await lab.addNamespace("router");
    const pod = await lab.addNamespace("pod");
    await lab.link(ns, "eth0", router, "eth0");
    await lab.link(ns, "cbr0", pod, "eth0");
    for (const far of [router, pod]) await run(far, ["ip", "link", "set", "eth0", "up"]);
    for (const argv of [
      ["ip", "link", "set", "lo", "up"],
      ["ip", "addr", "add", "10.128.0.2/24", "dev", "eth0"],
      ["ip", "-6", "addr", "add", "2001:db8:128::2/64", "dev", "eth0", "nodad"],
      ["ip", "link", "set", "eth0", "up"],
      ["ip", "addr", "add", "10.4.0.1/24", "dev", "cbr0"],
      ["ip", "-6", "addr", "add", "fd00:4::1/64", "dev", "cbr0", "nodad"],
      ["ip", "link", "set", "cbr0", "up"],
      ["ip", "route", "add", "default", "via", "10.128.0.1", "dev", "eth0"],
      ["ip", "-6", "route", "add", "default", "via", "2001:db8:128::1", "dev", "eth0"],
      ["sysctl", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"],
    ]) {
      await run(ns, argv);
    }
    await run(ns, ["iptables-restore"], IP4_RULES);
    await run(ns, ["ip6tables-restore"], IP6_RULES);
    // what collect --node-state runs on a node, each into its snapshot file
    const reads: [string, readonly string[]][] = [
      ["iptables-save", ["iptables-save"]],
      ["ip6tables-save", ["ip6tables-save"]],
      ["ip-addr", ["ip", "addr"]],
      ["ip-route", ["ip", "route", "show", "table", "all"]],
      ["ip-rule", ["ip", "rule"]],
      ["ip6-route", ["ip", "-6", "route", "show", "table", "all"]],
      ["ip6-rule", ["ip", "-6", "rule"]],
      ["sysctl", ["sysctl", "net.ipv4.ip_forward"]],
    ];
    for (const [file, argv] of reads) {
      writeSnapshotFile(root, `nodes/${NODE}/${file}.txt`, await run(ns, argv));
    }
    writeSnapshotFile(root, "cluster/nodes.yaml", CLUSTER_NODES);
    writeSnapshotFile(root, "cluster/pods.yaml", CLUSTER_PODS);
  });

  after(async () => {
    await lab?.destroy();
    rmSync(root, { recursive: true, force: true });
  });

  const v6 = { ip: parseIp("2001:db8:20::40"), port: 5432, text: "[2001:db8:20::40]:5432" };

  it("the pod's IPv6 packet: masq/filter-blocks cites the ip6tables-save line that rejects it", async () => {
    const snap = loadSnapshot(openSnapshot(root));
    assert.deepEqual(snap.diagnostics, []);
    const a = await diagnose(snap, { dest: v6 });
    const f = a.findings.find((x) => x.id === "masq/filter-blocks");
    assert.ok(f, JSON.stringify(a.findings.map((x) => [x.id, x.title])));
    assert.match(f.title, /rejects \(icmp6-adm-prohibited\) fd00:4::5 → \[2001:db8:20::40\]:5432/);
    const file = `nodes/${NODE}/ip6tables-save.txt`;
    const ev = f.evidence.find((e) => e.file === file);
    assert.ok(ev, JSON.stringify(f.evidence));
    const line = readFileSync(join(root, file), "utf8").split("\n")[ev.line - 1] ?? "";
    assert.match(line, /^-A FORWARD -s fd00:4::\/64 -d 2001:db8:20::\/48 .* -j REJECT/);
    assert.equal(ev.text, line);
    // the fix is written for ip6tables, never iptables
    assert.ok(
      f.next.every((n) => !/(^|[^6])iptables -I/.test(n)),
      f.next.join("\n"),
    );
    const path = a.paths.find((p) => p.from === "pod/default/app");
    assert.match(path?.verdict ?? "", /rejects fd00:4::5 → \[2001:db8:20::40\]:5432/);
  });

  it("the pod's IPv4 packet is read from the IPv4 rules, which let it through", async () => {
    const snap = loadSnapshot(openSnapshot(root));
    const v4 = { ip: parseIp("10.20.30.40"), port: 5432, text: "10.20.30.40:5432" };
    const a = await diagnose(snap, { dest: v4 });
    assert.deepEqual(
      a.findings.filter((x) => x.id === "masq/filter-blocks"),
      [],
    );
    assert.ok(
      a.findings.every((x) => x.evidence.every((e) => !e.file.endsWith("ip6tables-save.txt"))),
    );
  });

  it("without ip6tables-save the IPv6 packet's path is not read from the IPv4 rules", async () => {
    const bare = mkdtempSync(join(tmpdir(), "pp-ipv6-path-bare-"));
    try {
      cpSync(root, bare, { recursive: true });
      rmSync(join(bare, `nodes/${NODE}/ip6tables-save.txt`));
      const a = await diagnose(loadSnapshot(openSnapshot(bare)), { dest: v6 });
      assert.deepEqual(
        a.findings.filter((x) => x.id === "masq/filter-blocks"),
        [],
      );
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  });
});
