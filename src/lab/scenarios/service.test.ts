/**
 * The service and filter replicas on the real kernel: kube-proxy-shaped rules loaded with
 * iptables-restore, a connection from the client pod to each target, the ICMP error the kernel
 * sent (seen by tcpdump in the pod) held against podpath's whole-path verdict on the snapshot
 * written (iptables-save, ip route show table all, ip rule, ip addr).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { readIpRoute } from "../../evidence/ip-route.ts";
import { parseIptablesSave } from "../../iptables/save-parser.ts";
import { formatIp, parseIp } from "../../net/cidr.ts";
import { compilePath } from "../../path/evaluate-path.ts";
import { nodePathEvaluator } from "../../path/node-path.ts";
import type { PathOutcome } from "../../path/path-types.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { kernelSkip } from "../kernel-guard.ts";
import { createLab } from "../netns.ts";
import { FILTER_TARGETS, scenario as filterScenario } from "./filter.ts";
import type { Scenario } from "./index.ts";
import { SERVICE_TARGETS, scenario as serviceScenario } from "./service.ts";
import {
  buildServiceLab,
  type ConnectResult,
  connectFrom,
  icmpKindOf,
  type ProbeTarget,
  probeServiceLab,
  SVC_CLIENT_IP,
  SVC_CLIENT_POD,
  SVC_LISTEN_PORT,
  SVC_NODE,
  SVC_NODE_IP,
  SVC_PEER_IP,
  stopServiceLab,
} from "./service-lab.ts";
import { SERVICES, serviceRestoreText, WEB_SEP } from "./service-rules.ts";
import { ipBatch, must } from "./snat-replica.ts";

describe("icmpKindOf", () => {
  it("reads tcpdump's words for each ICMP error a REJECT sends", () => {
    const at = "IP 192.168.50.10 > 10.244.1.7: ICMP";
    assert.equal(
      icmpKindOf(`${at} host 10.96.0.1 unreachable - admin prohibited, length 68`),
      "icmp-host-prohibited",
    );
    assert.equal(
      icmpKindOf(`${at} 10.96.0.60 tcp port 80 unreachable, length 68`),
      "icmp-port-unreachable",
    );
    assert.equal(
      icmpKindOf(`${at} host 10.96.0.1 unreachable - admin prohibited filter, length 68`),
      "icmp-admin-prohibited",
    );
    assert.equal(icmpKindOf(`${at} echo reply, id 1, seq 1, length 64`), undefined);
  });
});

const skip = kernelSkip();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * The kernel's answer in the words of a path verdict: a TCP reset without an ICMP error comes
 * from the receiving host's stack (nothing listens there): netfilter let the packet through.
 */
function kernelWord(r: ConnectResult): string {
  if (r.connected || (r.icmp === undefined && /refused/i.test(r.output))) return "through";
  return `rejected ${r.icmp ?? "(no ICMP)"}`;
}

/** podpath's answer: every outcome's verdict (forks listed), in the same words. */
function podpathWords(outcomes: readonly PathOutcome[]): string[] {
  return [
    ...new Set(
      outcomes.map((o) => {
        const v = o.verdict;
        if (v.kind === "delivered" || v.kind === "forwarded") return "through";
        if (v.kind === "rejected") return `rejected ${v.with}`;
        return v.kind;
      }),
    ),
  ];
}

async function runScenario<O>(s: Scenario<O>, opts: O) {
  const lab = await createLab({ prefix: "ppsv" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-service-test-"));
  dirs.push(dir);
  try {
    const out = await s.run({ lab, outDir: dir, log: () => {} }, opts);
    return { dir, summary: out.summary };
  } finally {
    await lab.destroy();
  }
}

function evaluateTargets(dir: string, targets: readonly ProbeTarget[]) {
  const snap = loadSnapshot(openSnapshot(dir));
  const node = snap.nodes.get(SVC_NODE);
  assert.ok(
    node?.iptables && node.routes && node.ipRules,
    "the snapshot holds the node's rules and routes",
  );
  const ev = nodePathEvaluator(node);
  assert.ok(ev);
  return targets.map((t) =>
    ev.evaluate({
      src: parseIp(SVC_CLIENT_IP),
      dst: parseIp(t.ip),
      proto: "tcp",
      dport: t.port,
      origin: "pod",
    }),
  );
}

describe("lab service and filter replicas on the real kernel", { skip, concurrency: false }, () => {
  it("service: the kernel's verdict per ClusterIP equals podpath's, and the DNAT is cited", async () => {
    const { dir, summary } = await runScenario(serviceScenario, {});
    const kernel = summary;
    const results = evaluateTargets(dir, SERVICE_TARGETS);
    const [web, api, orders] = results;
    // web: DNAT to the endpoint pod, forwarded out its veth
    const w = web!.outcomes[0]!;
    assert.equal(w.verdict.kind, "forwarded");
    assert.equal(formatIp(w.dstOut), "10.244.1.8");
    const dnat = w.steps.find((s) => s.kind === "dnat");
    assert.match(dnat?.source.text ?? "", /DNAT --to-destination 10\.244\.1\.8:8080/);
    assert.ok(w.steps.some((s) => s.kind === "route" && s.dev === "veth-ep"));
    // the node itself: delivered to INPUT, no POSTROUTING walked, CentOS's REJECT
    const a = api!.outcomes[0]!;
    assert.equal(a.kind, "local");
    assert.ok(!a.steps.some((s) => s.kind === "hook" && s.hook === "POSTROUTING"));
    assert.equal(a.verdict.kind, "rejected");
    // no endpoints: kube-proxy's filter KUBE-SERVICES REJECT
    const o = orders!.outcomes[0]!;
    assert.equal(o.verdict.kind === "rejected" ? o.verdict.chain : "", "KUBE-SERVICES");
    assert.match(
      o.verdict.kind === "rejected" ? (o.verdict.by.text ?? "") : "",
      /has no endpoints/,
    );
    // and the kernel agrees, flow by flow
    for (const [i, t] of SERVICE_TARGETS.entries()) {
      assert.ok(kernel[i]?.startsWith(t.label), kernel.join("\n"));
    }
    assert.deepEqual(podpathWords(web!.outcomes), ["through"]);
    assert.match(kernel[0]!, /connected/);
    assert.deepEqual(podpathWords(api!.outcomes), ["rejected icmp-host-prohibited"]);
    assert.match(kernel[1]!, /refused \(icmp-host-prohibited\)/);
    assert.deepEqual(podpathWords(orders!.outcomes), ["rejected icmp-port-unreachable"]);
    assert.match(kernel[2]!, /refused \(icmp-port-unreachable\)/);
    // diagnose, per ClusterIP: the finding each one calls for, and no exempt warning
    const snap = loadSnapshot(openSnapshot(dir));
    const expected = [undefined, "masq/service-node-rejects", "masq/service-no-endpoints"];
    for (const [i, t] of SERVICE_TARGETS.entries()) {
      const a = await diagnose(snap, {
        dest: { ip: parseIp(t.ip), port: t.port, text: `${t.ip}:${t.port}` },
        from: { kind: "pod", namespace: "default", name: SVC_CLIENT_POD },
      });
      const ids = a.findings.map((f) => f.id);
      assert.ok(!ids.includes("masq/exempt-destination"), `${t.label}: ${ids.join(", ")}`);
      const want = expected[i];
      if (want) assert.ok(ids.includes(want as never), `${t.label}: ${ids.join(", ")}`);
      else assert.ok(!ids.some((x) => /filter-blocks|service-/.test(x)), ids.join(", "));
      const path = a.paths.find((x) => x.to === t.ip);
      if (i === 0) {
        const hop = path?.hops.find((h) => /DNAT to 10\.244\.1\.8:8080/.test(h.label));
        assert.match(
          hop?.evidence?.text ?? "",
          /KUBE-SEP-.* -j DNAT --to-destination 10\.244\.1\.8:8080/,
        );
      }
      if (i === 1) {
        assert.ok(!path?.hops.some((h) => /POSTROUTING/.test(h.label)), JSON.stringify(path?.hops));
        const f = a.findings.find((x) => x.id === "masq/service-node-rejects");
        assert.match(f?.title ?? "", /distribution's rule/);
      }
      if (i === 2) assert.ok(path?.hops.some((h) => h.state === "stops"));
    }
  });

  it("filter: the FORWARD REJECT before Flannel's accepts refuses as podpath says; --fixed lets it through", async () => {
    for (const fixed of [false, true]) {
      const { dir, summary } = await runScenario(filterScenario, {
        fixed: fixed ? "true" : "false",
      });
      const [r] = evaluateTargets(dir, FILTER_TARGETS);
      const words = podpathWords(r!.outcomes);
      if (fixed) {
        assert.deepEqual(words, ["through"]);
        assert.match(summary[0]!, /connected/);
      } else {
        assert.deepEqual(words, ["rejected icmp-host-prohibited"]);
        assert.match(summary[0]!, /refused \(icmp-host-prohibited\)/);
        const v = r!.outcomes[0]!.verdict;
        assert.equal(v.kind === "rejected" ? v.chain : "", "FORWARD");
        const a = await diagnose(loadSnapshot(openSnapshot(dir)), {
          dest: {
            ip: parseIp(FILTER_TARGETS[0]!.ip),
            port: FILTER_TARGETS[0]!.port,
            text: `${FILTER_TARGETS[0]!.ip}:${FILTER_TARGETS[0]!.port}`,
          },
          from: { kind: "pod", namespace: "default", name: SVC_CLIENT_POD },
        });
        const f = a.findings.find((x) => x.id === "masq/filter-blocks");
        assert.match(f?.title ?? "", /filter FORWARD rule 5 rejects .*distribution's rule/);
        assert.match(
          f?.evidence.at(-1)?.text ?? "",
          /-A FORWARD -j REJECT --reject-with icmp-host-prohibited/,
        );
      }
    }
  });

  it("policy routing: an -o match is decided on the interface ip rule chooses, as the kernel does", async () => {
    const lab = await createLab({ prefix: "ppsv" });
    const dir = mkdtempSync(join(tmpdir(), "podpath-service-policy-"));
    dirs.push(dir);
    try {
      const l = await buildServiceLab(
        lab,
        serviceRestoreText({ centosInput: false, centosForward: false, flannel: true }),
      );
      // the pod's traffic goes by table 100 out of eth1 (as EKS sends a branch ENI's pods), and
      // a FORWARD rule rejects what leaves by eth1; the main table says eth0
      const other = await lab.addNamespace("peer2");
      await lab.link(l.node, "eth1", other, "eth0");
      await ipBatch(other, ["addr add 192.168.60.1/24 dev eth0", "link set eth0 up"]);
      await ipBatch(l.node, [
        "addr add 192.168.60.10/24 dev eth1",
        "link set eth1 up",
        "route add default via 192.168.60.1 dev eth1 table 100",
        `rule add from ${SVC_CLIENT_IP} lookup 100 priority 100`,
      ]);
      await must(l.node, [
        "iptables",
        "-w",
        "-I",
        "FORWARD",
        "-o",
        "eth1",
        "-j",
        "REJECT",
        "--reject-with",
        "icmp-net-prohibited",
      ]);
      const kernel = await connectFrom(l.client, FILTER_TARGETS[0]!.ip, FILTER_TARGETS[0]!.port);
      await probeServiceLab(l, [], dir);
      await stopServiceLab(l);
      const [r] = evaluateTargets(dir, FILTER_TARGETS);
      assert.deepEqual(podpathWords(r!.outcomes), [kernelWord(kernel)]);
      assert.equal(kernelWord(kernel), "rejected icmp-net-prohibited");
      const route = r!.outcomes[0]!.steps.find((x) => x.kind === "route");
      assert.equal(route?.kind === "route" ? route.dev : "", "eth1");
      assert.equal(route?.kind === "route" ? route.mainTable?.dev : "", "eth0");
      const a = await diagnose(loadSnapshot(openSnapshot(dir)), {
        dest: { ip: parseIp(SVC_PEER_IP), port: SVC_LISTEN_PORT, text: SVC_PEER_IP },
        from: { kind: "pod", namespace: "default", name: SVC_CLIENT_POD },
      });
      const ids = a.findings.map((f) => f.id);
      assert.ok(ids.includes("masq/policy-route-elsewhere"), ids.join(", "));
      assert.ok(ids.includes("masq/filter-blocks"), ids.join(", "));
    } finally {
      await lab.destroy();
    }
  });

  it("a Service with two endpoints: both statistic branches are followed, each endpoint cited", async () => {
    const lab = await createLab({ prefix: "ppsv" });
    try {
      const ns = await lab.addNamespace("rules");
      const sep2 = "KUBE-SEP-2ND3NDPOINTXXXXXX";
      const text = serviceRestoreText({ centosInput: false, centosForward: false, flannel: false })
        .replace(`:${WEB_SEP} - [0:0]`, `:${WEB_SEP} - [0:0]\n:${sep2} - [0:0]`)
        .replace(
          new RegExp(`(-A ${SERVICES.web.chain} -m comment --comment "[^"]*" )-j ${WEB_SEP}`),
          `$1-m statistic --mode random --probability 0.50000000000 -j ${WEB_SEP}\n-A ${SERVICES.web.chain} -m comment --comment "${SERVICES.web.name} -> 10.244.2.9:8080" -j ${sep2}`,
        )
        .replace(
          "COMMIT\n*filter",
          `-A ${sep2} -s 10.244.2.9/32 -m comment --comment "${SERVICES.web.name}" -j KUBE-MARK-MASQ\n-A ${sep2} -p tcp -m comment --comment "${SERVICES.web.name}" -m tcp -j DNAT --to-destination 10.244.2.9:8080\nCOMMIT\n*filter`,
        );
      await must(ns, ["iptables-restore", "-w"], text);
      const saved = await must(ns, ["iptables-save"]);
      assert.match(saved, /--probability 0\.50000000000/);
      const dump = parseIptablesSave(saved, "nodes/x/iptables-save.txt").value;
      const routes = readIpRoute(
        "default via 192.168.50.20 dev eth0\n10.244.1.8 dev veth-ep scope link\n",
        "nodes/x/ip-route.txt",
      ).value;
      const r = compilePath(dump, {
        routing: { routes },
        localAddresses: [parseIp(SVC_NODE_IP)],
      }).evaluate({
        src: parseIp(SVC_CLIENT_IP),
        dst: parseIp(SERVICES.web.ip),
        proto: "tcp",
        dport: SERVICES.web.port,
        origin: "pod",
        inIface: "veth-client",
      });
      const ends = r.outcomes
        .map((o) => `${formatIp(o.dstOut)}:${o.dportOut} ${o.probability}`)
        .sort();
      assert.deepEqual(ends, ["10.244.1.8:8080 0.5", "10.244.2.9:8080 0.5"]);
      for (const o of r.outcomes) {
        const d = o.steps.find((x) => x.kind === "dnat");
        assert.match(
          d?.source.text ?? "",
          new RegExp(`DNAT --to-destination ${formatIp(o.dstOut)}:8080`),
        );
        assert.equal(o.verdict.kind, "forwarded");
      }
    } finally {
      await lab.destroy();
    }
  });

  it("an unknown connection state forks: a new connection is rejected, an established one passes", async () => {
    const lab = await createLab({ prefix: "ppsv" });
    try {
      const ns = await lab.addNamespace("rules");
      const text = serviceRestoreText({ centosInput: false, centosForward: true, flannel: true });
      await must(ns, ["iptables-restore", "-w"], text);
      const dump = parseIptablesSave(
        await must(ns, ["iptables-save"]),
        "nodes/x/iptables-save.txt",
      ).value;
      const routes = readIpRoute(
        "default via 192.168.50.20 dev eth0\n10.244.1.7 dev veth-client scope link\n",
        "nodes/x/ip-route.txt",
      ).value;
      const r = compilePath(dump, {
        routing: { routes },
        localAddresses: [parseIp(SVC_NODE_IP)],
      }).evaluate({
        src: parseIp(SVC_CLIENT_IP),
        dst: parseIp(SVC_PEER_IP),
        proto: "tcp",
        dport: SVC_LISTEN_PORT,
        origin: "pod",
        ctstate: "unknown",
      });
      const by = r.outcomes
        .map((o) => `${o.assumptions[0]?.holds ? "established" : "new"}: ${o.verdict.kind}`)
        .sort();
      assert.deepEqual(by, ["established: forwarded", "new: rejected"]);
      const est = r.outcomes.find((o) => o.assumptions[0]?.holds);
      const accept = est?.steps.find((x) => x.kind === "verdict");
      assert.match(
        accept?.source.text ?? "",
        /KUBE-FORWARD .*--ctstate RELATED,ESTABLISHED -j ACCEPT/,
      );
    } finally {
      await lab.destroy();
    }
  });

  it("the other mix (FORWARD REJECT, open INPUT, no Flannel): every probe's kernel verdict equals podpath's", async () => {
    const lab = await createLab({ prefix: "ppsv" });
    const dir = mkdtempSync(join(tmpdir(), "podpath-service-mix-"));
    dirs.push(dir);
    try {
      const l = await buildServiceLab(
        lab,
        serviceRestoreText({ centosInput: false, centosForward: true, flannel: false }),
      );
      const targets = [...SERVICE_TARGETS, ...FILTER_TARGETS];
      const kernel: ConnectResult[] = [];
      for (const t of targets) kernel.push(await connectFrom(l.client, t.ip, t.port));
      await probeServiceLab(l, [], dir);
      await stopServiceLab(l);
      const results = evaluateTargets(dir, targets);
      for (const [i, t] of targets.entries()) {
        assert.deepEqual(
          podpathWords(results[i]!.outcomes),
          [kernelWord(kernel[i]!)],
          `${t.label}`,
        );
      }
    } finally {
      await lab.destroy();
    }
  });
});
