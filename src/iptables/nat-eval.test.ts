import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { formatIp, type Ip, parseCidr, parseIp } from "../net/cidr.ts";
import type { IptablesDump } from "./dump.ts";
import { compileNat } from "./nat-eval.ts";
import type { AddressFact, Flow, NatContext, NatTrace } from "./nat-trace.ts";
import { parseIptablesSave } from "./save-parser.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const load = (name: string): IptablesDump => parseIptablesSave(fixture(name), name).value;
const spec = (lines: string[]): IptablesDump =>
  parseIptablesSave(`${lines.join("\n")}\n`, "rules.txt", { table: "nat" }).value;
const ip = parseIp;
const ipText = (x: Ip | undefined) => (x ? formatIp(x) : undefined);
const flow = (src: string, dst: string, more: Partial<Flow> = {}): Flow => ({
  src: ip(src),
  dst: ip(dst),
  proto: "tcp",
  dport: 443,
  origin: "pod",
  ...more,
});
/** Each branch: what it takes, its decision, its source, and where it ends. */
const forks = (t: NatTrace) =>
  (t.branches ?? []).map((b) => [
    (b.trace.assumptions ?? []).map((a) => `${a.holds ? "" : "not: "}${a.fact}`).join(" & "),
    b.trace.decision,
    ipText(b.trace.sourceOut?.ip),
    b.trace.delivery,
  ]);
/**
 * On an excerpt: the branch that takes the file as showing every rule of the chains it walks
 * (the answer "as shown"), and whether every other branch is the excerpt's unknown.
 */
function asShown(t: NatTrace): { shown: NatTrace; othersUnknown: boolean } {
  const complete = (b: NatTrace) =>
    (b.assumptions ?? []).every((a) => a.holds || !/shows every rule/.test(a.fact));
  const all = (t.branches ?? []).map((b) => b.trace);
  const shown = all.filter(complete);
  assert.equal(shown.length, 1, JSON.stringify(forks(t)));
  const othersUnknown = all
    .filter((b) => !complete(b))
    .every(
      (b) => b.decision === "cannot-decide" && /does not show/.test(b.undecided?.reason ?? ""),
    );
  return { shown: shown[0]!, othersUnknown };
}
const kinds = (t: NatTrace) =>
  t.steps.map((s) => `${s.kind} ${s.chain}${s.ruleIndex ? `#${s.ruleIndex}` : ""}`);

const DPV2 = "gke-dpv2-1.29_iptables-S-nat_IP-MASQ-default-snat_cilium.txt";
const KUBENET = "gke-legacy-kubenet_iptables-S-nat_kube-proxy_kubenet-snat.txt";
const ISSUE = "k8s-issue-64212_gke-1.10_IP-MASQ-plus-IP-MASQ-AGENT_grep.txt";
const KUBEADM = "kubeadm-docker_k8s-pr-75893_iptables-save-nat-header.txt";

/** A node whose address list is known (the semantics tests are not about unknown addresses). */
const NODE: NatContext = { localAddresses: [ip("10.128.0.2")] };

const gkeNode: NatContext = {
  localAddresses: [ip("10.128.0.20"), ip("169.254.123.1"), ip("169.254.4.6")],
  interfaces: [
    {
      name: "eth0",
      primary: ip("10.128.0.20"),
      addresses: [{ ip: ip("10.128.0.20"), prefix: 32 }],
    },
  ],
  nodeInternalIp: ip("10.128.0.20"),
};

describe("compileNat on GKE Dataplane V2 (node-startup IP-MASQ)", () => {
  const nat = compileNat(load(DPV2), gkeNode);

  it("keeps the pod address towards an on-prem 10.x host, citing IP-MASQ's 10.0.0.0/8 RETURN", () => {
    const t = nat.evaluate(flow("10.28.0.7", "10.20.30.40", { dport: 5432, outIface: "eth0" }));
    assert.equal(t.decision, "keep");
    assert.equal(ipText(t.sourceOut?.ip), "10.28.0.7");
    assert.equal(t.sourceOut?.how, "unchanged");
    const ret = t.steps.find((s) => s.kind === "return" && s.chain === "IP-MASQ");
    assert.equal(ret?.ruleIndex, 2);
    assert.equal(ret?.source.line, 23);
    assert.match(ret?.source.text ?? "", /-d 10\.0\.0\.0\/8/);
    assert.deepEqual(kinds(t), [
      "enter PREROUTING",
      "jump PREROUTING#1",
      "return CILIUM_PRE_nat",
      "policy PREROUTING",
      "enter POSTROUTING",
      "jump POSTROUTING#1",
      "return CILIUM_POST_nat",
      "jump POSTROUTING#2",
      "return IP-MASQ#2",
      "policy POSTROUTING",
    ]);
  });

  it("masquerades to the public internet with eth0's primary address, citing the last IP-MASQ rule", () => {
    const t = nat.evaluate(flow("10.28.0.7", "142.250.1.1", { outIface: "eth0" }));
    assert.equal(t.decision, "masquerade");
    assert.equal(ipText(t.sourceOut?.ip), "10.128.0.20");
    assert.equal(t.sourceOut?.how, "interface-primary");
    assert.equal(t.decidingRule?.line, 34);
  });

  it("falls back to the Node's InternalIP when the outgoing interface is unknown, and says so", () => {
    const t = nat.evaluate(flow("10.28.0.7", "142.250.1.1"));
    assert.equal(t.sourceOut?.how, "node-internal-ip-fallback");
    assert.equal(ipText(t.sourceOut?.ip), "10.128.0.20");
    assert.match(t.sourceOut?.note ?? "", /not known; assumed the Node's InternalIP/);
  });

  it("sends traffic to the node's own address to INPUT, where nothing rewrites it", () => {
    const t = nat.evaluate(flow("10.28.0.7", "10.128.0.20", { dport: 10250 }));
    assert.equal(t.decision, "keep");
    assert.ok(kinds(t).includes("enter INPUT"));
  });

  it("follows both outcomes of addrtype LOCAL without the node's addresses, citing the jump rule", () => {
    const bare = compileNat(load(DPV2));
    const t = bare.evaluate(flow("10.28.0.7", "142.250.1.1"));
    assert.equal(t.decision, "branches");
    assert.equal(t.sourceOut, undefined);
    assert.deepEqual(forks(t), [
      ["142.250.1.1 is one of the node's own addresses", "keep", "10.28.0.7", "local"],
      ["not: 142.250.1.1 is one of the node's own addresses", "masquerade", undefined, "forward"],
    ]);
    // the routing decision and POSTROUTING rule 2 ask the same fact: one fork, not two
    const asked = t.branches!.flatMap((b) => b.trace.assumptions ?? []);
    assert.equal(asked.length, 2);
    const masq = t.branches![1]!.trace;
    assert.ok(masq.steps.some((x) => x.chain === "POSTROUTING" && x.source.line === 21));
  });

  it("decides addrtype LOCAL from a fact of other evidence, and says which", () => {
    const site: AddressFact = {
      cidr: parseCidr("142.250.0.0/16"),
      local: false,
      source: { file: "remote/web.yaml", line: 3 },
      what: "the site web's prefix",
    };
    const t = compileNat(load(DPV2), { addressFacts: [site] }).evaluate(
      flow("10.28.0.7", "142.250.1.1"),
    );
    assert.equal(t.decision, "masquerade");
    assert.equal(t.branches, undefined);
    assert.deepEqual(t.factsUsed, [site]);
  });

  it("treats the node's own traffic like pod traffic in POSTROUTING (no source match on the jump)", () => {
    const t = nat.evaluate(
      flow("10.128.0.20", "142.250.1.1", { origin: "host", outIface: "eth0" }),
    );
    assert.equal(t.decision, "masquerade");
    assert.equal(t.steps[0]?.chain, "OUTPUT");
  });
});

describe("compileNat: GKE's IP-MASQ next to a self-deployed IP-MASQ-AGENT (kubernetes#64212)", () => {
  it("follows the published excerpt as shown (IP-MASQ first, then IP-MASQ-AGENT), and what it does not show as unknown", () => {
    const nat = compileNat(load(ISSUE), gkeNode);
    const t = nat.evaluate(flow("10.32.1.5", "10.200.0.1"));
    assert.equal(t.decision, "branches");
    const { shown, othersUnknown } = asShown(t);
    assert.ok(othersUnknown);
    assert.deepEqual(
      kinds(shown)
        .filter((k) => !k.startsWith("branch"))
        .slice(2),
      [
        "enter POSTROUTING",
        "jump POSTROUTING#1",
        "return IP-MASQ#2",
        "jump POSTROUTING#2",
        "return IP-MASQ-AGENT",
        "policy POSTROUTING",
      ],
    );
    assert.equal(shown.decision, "keep");
    // one unknown per chain the walk enters: PREROUTING, POSTROUTING, IP-MASQ, IP-MASQ-AGENT
    assert.equal(t.branches!.length, 5);
  });

  // the excerpt is cut after IP-MASQ's second rule; complete both chains as the issue describes
  const full = [
    ...fixture(ISSUE).split("\n"),
    '-A IP-MASQ -d 172.16.0.0/12 -m comment --comment "ip-masq: local traffic is not subject to MASQUERADE" -j RETURN',
    '-A IP-MASQ -d 192.168.0.0/16 -m comment --comment "ip-masq: local traffic is not subject to MASQUERADE" -j RETURN',
    '-A IP-MASQ -m comment --comment "ip-masq: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE',
    '-A IP-MASQ-AGENT -d 169.254.0.0/16 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
    '-A IP-MASQ-AGENT -d 172.17.0.0/16 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
    '-A IP-MASQ-AGENT -d 10.32.0.0/16 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
    '-A IP-MASQ-AGENT -d 192.168.0.0/24 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
    '-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE',
  ].join("\n");
  // completed, it is the whole table: a table header, and COMMIT
  const whole = `*nat\n:POSTROUTING ACCEPT [0:0]\n${full}\nCOMMIT\n`;
  const nat = compileNat(parseIptablesSave(whole, "completed.txt").value, gkeNode);

  it("the earlier IP-MASQ masquerades a public destination, whatever IP-MASQ-AGENT would do", () => {
    const t = nat.evaluate(flow("10.32.1.5", "35.1.2.3"));
    assert.equal(t.decision, "masquerade");
    assert.match(t.decidingRule?.text ?? "", /^-A IP-MASQ -m comment --comment "ip-masq: outbound/);
    assert.ok(!kinds(t).some((k) => k.includes("IP-MASQ-AGENT")));
  });

  it("a 10.x destination passes IP-MASQ and is masqueraded by IP-MASQ-AGENT (not in its list)", () => {
    const t = nat.evaluate(flow("10.32.1.5", "10.50.0.1"));
    assert.equal(t.decision, "masquerade");
    assert.match(t.decidingRule?.text ?? "", /^-A IP-MASQ-AGENT -m comment/);
  });

  it("keeps the pod address only when every masquerading chain lets it through", () => {
    assert.equal(nat.evaluate(flow("10.32.1.5", "172.17.0.9")).decision, "keep");
    assert.equal(nat.evaluate(flow("10.32.1.5", "192.168.1.9")).decision, "masquerade");
  });
});

describe("compileNat on a kube-proxy node (legacy kubenet dump)", () => {
  const ctx: NatContext = { localAddresses: [ip("10.138.0.2")], nodeInternalIp: ip("10.138.0.2") };
  const nat = compileNat(load(KUBENET), ctx);

  it("marks traffic from outside the cluster CIDR to a ClusterIP and masquerades it after DNAT", () => {
    const t = nat.evaluate(
      flow("192.168.1.5", "10.51.240.10", {
        proto: "udp",
        dport: 53,
        origin: "forwarded",
        outIface: "eth0",
      }),
    );
    assert.equal(t.decision, "branches");
    assert.equal(t.branches?.length, 2);
    assert.deepEqual(
      t.branches?.map((b) => [
        b.probability,
        b.trace.decision,
        ipText(b.trace.dstOut?.ip),
        b.trace.dstOut?.port,
      ]),
      [
        [0.5, "masquerade", "10.48.0.4", 53],
        [0.5, "masquerade", "10.48.2.8", 53],
      ],
    );
    assert.equal(t.sourceOut?.how, "node-internal-ip-fallback");
    const b0 = t.branches![0]!.trace;
    assert.ok(kinds(b0).includes("mark KUBE-MARK-MASQ#1"));
    assert.equal(b0.decidingRule?.text?.includes("--mark 0x4000/0x4000 -j MASQUERADE"), true);
    assert.equal(b0.dstOut?.how, "dnat");
  });

  it("does not mark pod traffic to a ClusterIP; the kubenet rule exempts 10/8, so the pod address stays", () => {
    const t = nat.evaluate(flow("10.48.0.6", "10.51.240.10", { proto: "udp", dport: 53 }));
    assert.equal(t.decision, "branches");
    assert.ok(t.branches?.every((b) => b.trace.decision === "keep"));
    assert.equal(ipText(t.sourceOut?.ip), "10.48.0.6");
  });

  it("masquerades a hairpin connection only in the branch that picks the pod itself", () => {
    const t = nat.evaluate(flow("10.48.0.8", "10.51.245.210", { dport: 80 }));
    const byDst = new Map(t.branches?.map((b) => [ipText(b.trace.dstOut?.ip), b.trace.decision]));
    assert.deepEqual(Object.fromEntries(byDst), { "10.48.0.8": "masquerade", "10.48.2.9": "keep" });
    assert.equal(t.sourceOut, undefined);
  });

  it("masquerades NodePort traffic (addrtype LOCAL, KUBE-NODEPORTS)", () => {
    const t = nat.evaluate(
      flow("203.0.113.9", "10.138.0.2", { dport: 31334, origin: "forwarded" }),
    );
    assert.equal(t.decision, "branches");
    assert.ok(t.branches?.every((b) => b.trace.decision === "masquerade"));
  });

  it("masquerades pod traffic to the internet through kubenet's `! -d 10.0.0.0/8` rule", () => {
    const t = nat.evaluate(flow("10.48.0.6", "8.8.8.8", { proto: "udp", dport: 53 }));
    assert.equal(t.decision, "masquerade");
    assert.match(t.decidingRule?.text ?? "", /kubenet: SNAT/);
  });

  it("answers through session affinity (`recent --rcheck`): both outcomes reach the one endpoint", () => {
    const t = nat.evaluate(flow("10.48.0.6", "10.51.240.1", { dport: 443 }));
    assert.equal(t.decision, "masquerade");
    assert.equal(t.dstOut?.how, "dnat");
    const settled = t.unknownButSettled ?? [];
    assert.equal(settled.length, 1);
    assert.match(settled[0]!.reason, /match "recent"/);
    assert.equal(settled[0]!.rule.line, 97);
    assert.match(settled[0]!.decide.command, /xt_recent\/KUBE-SEP-CXUJ2M5ZPG4H3H7X/);
  });

  it("follows both outcomes of a destination port rule when the flow has no port", () => {
    const t = nat.evaluate({
      src: ip("10.48.0.6"),
      dst: ip("10.51.247.208"),
      proto: "tcp",
      origin: "pod",
    });
    assert.equal(t.decision, "branches");
    const asked = t.branches!.flatMap((b) => b.trace.assumptions ?? []);
    assert.ok(asked.some((a) => /destination port is not known/.test(a.reason)));
    assert.match(asked[0]!.decide.command, /--dest IP:PORT/);
  });
});

describe("compileNat on the kubeadm/docker header (cut inside KUBE-MARK-MASQ)", () => {
  const nat = compileNat(load(KUBEADM), { localAddresses: [ip("192.168.1.10")] });
  it("masquerades docker's bridge traffic leaving by eth0 as shown, citing Docker's rule; KUBE-POSTROUTING, after the cut, is unknown", () => {
    const t = nat.evaluate(
      flow("172.17.0.2", "1.1.1.1", { origin: "forwarded", outIface: "eth0", inIface: "docker0" }),
    );
    assert.equal(t.decision, "branches");
    const { shown, othersUnknown } = asShown(t);
    assert.ok(othersUnknown);
    assert.equal(shown.decision, "masquerade");
    assert.equal(shown.decidingRule?.line, 38);
    assert.equal(shown.sourceOut?.how, "unknown");
    const cut = t.branches!.map((b) => b.trace).filter((b) => b.decision === "cannot-decide");
    assert.deepEqual(
      cut.map((b) => b.undecided?.chain),
      ["KUBE-SERVICES", "KUBE-POSTROUTING"],
    );
  });
  it("keeps it as shown when it goes back out docker0 (negated -o)", () => {
    const t = nat.evaluate(
      flow("172.17.0.2", "172.17.0.3", {
        origin: "forwarded",
        outIface: "docker0",
        inIface: "docker0",
      }),
    );
    assert.equal(asShown(t).shown.decision, "keep");
  });
  it("follows both outcomes of `! -o docker0` without the outgoing interface", () => {
    const t = nat.evaluate(
      flow("172.17.0.2", "1.1.1.1", { origin: "forwarded", inIface: "docker0" }),
    );
    assert.equal(t.decision, "branches");
    const decided = forks(t)
      .filter((f) => f[1] !== "cannot-decide")
      .map((f) => [
        String(f[0])
          .replace(/\S+\.txt shows every rule of /g, "whole ")
          .replace(/ \(it is cut short\)/g, ""),
        ...f.slice(1),
      ]);
    assert.deepEqual(decided, [
      [
        "whole KUBE-SERVICES & whole KUBE-POSTROUTING & the packet leaves by docker0",
        "keep",
        "172.17.0.2",
        "forward",
      ],
      [
        "whole KUBE-SERVICES & whole KUBE-POSTROUTING & not: the packet leaves by docker0",
        "masquerade",
        undefined,
        "forward",
      ],
    ]);
    const masq = t.branches!.map((b) => b.trace).find((b) => b.decision === "masquerade")!;
    assert.equal(masq.decidingRule?.line, 38);
    assert.match(masq.assumptions!.at(-1)!.reason, /outgoing interface is not known/);
  });
});

describe("compileNat on a dump cut short (no COMMIT)", () => {
  const text = [
    "*nat",
    ":POSTROUTING ACCEPT [0:0]",
    ":IP-MASQ-AGENT - [0:0]",
    "-A POSTROUTING -j IP-MASQ-AGENT",
    "-A IP-MASQ-AGENT -d 10.0.0.0/8 -j RETURN",
    "-A IP-MASQ-AGENT -d 172.16.0.0/12 -j RETURN",
    "",
  ].join("\n");
  const nat = compileNat(parseIptablesSave(text, "cut.txt").value, NODE);

  it("answers from the rules shown when one of them decides: nothing unseen comes before them", () => {
    const t = nat.evaluate(flow("10.4.0.5", "10.20.30.40"));
    assert.equal(t.decision, "keep");
    assert.equal(t.branches, undefined);
  });

  it("forks where the walk runs past the last rule shown: the rules cut off may decide", () => {
    const t = nat.evaluate(flow("10.4.0.5", "8.8.8.8"));
    assert.equal(t.decision, "branches");
    const cut = t.branches!.map((b) => b.trace).find((b) => b.decision === "cannot-decide");
    assert.equal(cut?.undecided?.chain, "IP-MASQ-AGENT");
    assert.match(cut?.assumptions?.[0]?.reason ?? "", /cut short.*after the last one it shows/);
  });
});

describe("compileNat semantics", () => {
  it("goto: RETURN from the target chain returns to the caller of the chain that jumped", () => {
    const d = spec([
      "-N A",
      "-N B",
      "-A POSTROUTING -j A",
      "-A POSTROUTING -j MASQUERADE",
      "-A A -g B",
      "-A A -j SNAT --to-source 9.9.9.9",
      "-A B -j RETURN",
    ]);
    const t = compileNat(d, NODE).evaluate(flow("10.0.0.1", "1.1.1.1"));
    assert.equal(t.decision, "masquerade");
    assert.deepEqual(kinds(t).slice(2), [
      "enter POSTROUTING",
      "jump POSTROUTING#1",
      "goto A#1",
      "return B#1",
      "masquerade POSTROUTING#2",
    ]);
  });

  it("SNAT gives --to-source; a range is reported as a range", () => {
    const d = spec([
      "-A POSTROUTING -s 10.0.0.0/8 -j SNAT --to-source 100.64.0.1-100.64.0.4:1024-2048",
    ]);
    const t = compileNat(d, NODE).evaluate(flow("10.0.0.1", "1.1.1.1"));
    assert.equal(t.decision, "snat");
    assert.equal(ipText(t.sourceOut?.ip), "100.64.0.1");
    assert.equal(ipText(t.sourceOut?.rangeEnd), "100.64.0.4");
    assert.deepEqual(t.sourceOut?.ports, { from: 1024, to: 2048 });
  });

  it("negations: ! -s, ! --dport, ! --mark, ! -p", () => {
    const d = spec([
      "-A POSTROUTING ! -s 10.0.0.0/8 -j RETURN",
      "-A POSTROUTING -p tcp -m tcp ! --dport 443 -j RETURN",
      "-A POSTROUTING -m mark ! --mark 0x1/0x1 -j RETURN",
      "-A POSTROUTING ! -p tcp -j RETURN",
      "-A POSTROUTING -j MASQUERADE",
    ]);
    const nat = compileNat(d, NODE);
    assert.equal(nat.evaluate(flow("192.168.0.1", "1.1.1.1")).decision, "keep");
    assert.equal(nat.evaluate(flow("10.0.0.1", "1.1.1.1", { dport: 80 })).decision, "keep");
    assert.equal(nat.evaluate(flow("10.0.0.1", "1.1.1.1")).decision, "keep");
    assert.equal(nat.evaluate(flow("10.0.0.1", "1.1.1.1", { mark: 1 })).decision, "masquerade");
    assert.equal(
      nat.evaluate(flow("10.0.0.1", "1.1.1.1", { mark: 1, proto: "udp" })).decision,
      "keep",
    );
  });

  it("tracks marks set in PREROUTING into POSTROUTING (kube-proxy's 0x4000, new style)", () => {
    const d = spec([
      "-N KUBE-MARK-MASQ",
      "-N KUBE-POSTROUTING",
      "-A PREROUTING -d 10.96.0.1/32 -j KUBE-MARK-MASQ",
      "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
      "-A POSTROUTING -j KUBE-POSTROUTING",
      "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
      "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
      "-A KUBE-POSTROUTING -m mark --mark 0x4000/0x4000 -j SNAT --to-source 1.1.1.1",
      "-A KUBE-POSTROUTING -j MASQUERADE --random-fully",
    ]);
    const nat = compileNat(d, NODE);
    const marked = nat.evaluate(flow("10.0.0.1", "10.96.0.1"));
    assert.equal(marked.decision, "masquerade");
    assert.ok(kinds(marked).includes("mark KUBE-POSTROUTING#2"));
    assert.equal(nat.evaluate(flow("10.0.0.1", "10.96.0.2")).decision, "keep");
  });

  it("follows both outcomes of a mark match when mangle rules may have marked the packet, unless the mark is given", () => {
    const text = [
      "*mangle",
      ":PREROUTING ACCEPT [0:0]",
      "-A PREROUTING -i eth1 -j MARK --set-xmark 0x1/0xffffffff",
      "COMMIT",
      "*nat",
      ":POSTROUTING ACCEPT [0:0]",
      "-A POSTROUTING -m mark --mark 0x1 -j MASQUERADE",
      "COMMIT",
      "",
    ].join("\n");
    const nat = compileNat(parseIptablesSave(text, "m.txt").value, NODE);
    const t = nat.evaluate(flow("10.0.0.1", "1.1.1.1"));
    assert.equal(t.decision, "branches");
    assert.deepEqual(forks(t), [
      [
        "the packet's mark has bits 0xffffffff set to 0x1 before nat",
        "masquerade",
        undefined,
        "forward",
      ],
      [
        "not: the packet's mark has bits 0xffffffff set to 0x1 before nat",
        "keep",
        "10.0.0.1",
        "forward",
      ],
    ]);
    assert.equal(t.branches![0]!.trace.assumptions![0]!.rule.line, 7);
    assert.equal(nat.evaluate(flow("10.0.0.1", "1.1.1.1", { mark: 1 })).decision, "masquerade");
    assert.equal(nat.evaluate(flow("10.0.0.1", "1.1.1.1", { mark: 0 })).decision, "keep");
  });

  it("a definite non-match wins over an undecidable module in the same rule", () => {
    const d = spec([
      "-A POSTROUTING -d 8.8.8.8/32 -m set --match-set X dst -j RETURN",
      "-A POSTROUTING -j MASQUERADE",
    ]);
    const nat = compileNat(d, NODE);
    const sure = nat.evaluate(flow("10.0.0.1", "1.1.1.1"));
    assert.equal(sure.decision, "masquerade");
    assert.equal(sure.branches, undefined);
    const t = nat.evaluate(flow("10.0.0.1", "8.8.8.8"));
    assert.equal(t.decision, "branches");
    const asked = t.branches![0]!.trace.assumptions![0]!;
    assert.match(asked.reason, /match "set"/);
    assert.equal(asked.rule.line, 1);
    assert.equal(asked.decide.command, "ipset list X   # on the node");
  });

  it("answers when every outcome of an unknown -i agrees, and says it did not matter", () => {
    const a = compileNat(spec(["-A PREROUTING -i eth1 -j ACCEPT"]), NODE).evaluate(
      flow("10.0.0.1", "1.1.1.1"),
    );
    assert.equal(a.decision, "keep");
    assert.equal(a.unknownButSettled?.length, 1);
    assert.match(a.unknownButSettled![0]!.reason, /-i eth1/);
    assert.equal(a.unknownButSettled![0]!.fact, "the packet arrives on eth1");
  });

  it("a jump to a chain not in the dump: the answer if it decides nothing, and the fork where it does", () => {
    const b = compileNat(
      spec(["-A POSTROUTING -j MISSING", "-A POSTROUTING -j MASQUERADE"]),
      NODE,
    ).evaluate(flow("10.0.0.1", "1.1.1.1"));
    assert.equal(b.decision, "branches");
    const passes = b.branches!.find((x) => x.trace.decision !== "cannot-decide")?.trace;
    const decides = b.branches!.find((x) => x.trace.decision === "cannot-decide")?.trace;
    assert.equal(passes?.decision, "masquerade");
    assert.equal(decides?.decision, "cannot-decide");
    assert.match(decides?.undecided?.reason ?? "", /MISSING, which is not in the dump/);
    assert.match(passes!.assumptions![0]!.fact, /chain MISSING .* lets this packet through/);
  });

  it("matches interface wildcards and knows -i is empty in POSTROUTING", () => {
    const d = spec([
      "-N X",
      "-A POSTROUTING -j X",
      "-A X -i eth0 -j RETURN",
      "-A X -o veth+ -j RETURN",
      "-A X -j MASQUERADE",
    ]);
    const nat = compileNat(d, NODE);
    assert.equal(
      nat.evaluate(flow("10.0.0.1", "1.1.1.1", { outIface: "veth1234" })).decision,
      "keep",
    );
    assert.equal(
      nat.evaluate(flow("10.0.0.1", "1.1.1.1", { outIface: "eth0" })).decision,
      "masquerade",
    );
  });

  it("statistic: each branch is traced with its probability (random and nth)", () => {
    const d = spec([
      "-A POSTROUTING -m statistic --mode random --probability 0.25 -j SNAT --to-source 1.1.1.1",
      "-A POSTROUTING -m statistic --mode nth --every 3 --packet 0 -j SNAT --to-source 2.2.2.2",
    ]);
    const t = compileNat(d, NODE).evaluate(flow("10.0.0.1", "8.8.8.8"));
    assert.equal(t.decision, "branches");
    const got = t.branches!.map((b) => [
      Math.round(b.probability * 1000) / 1000,
      b.trace.decision,
      ipText(b.trace.sourceOut?.ip),
    ]);
    assert.deepEqual(got, [
      [0.25, "snat", "1.1.1.1"],
      [0.25, "snat", "2.2.2.2"],
      [0.5, "keep", "10.0.0.1"],
    ]);
    const sum = t.branches!.reduce((a, b) => a + b.probability, 0);
    assert.ok(Math.abs(sum - 1) < 1e-9);
    assert.equal(t.branches![0]!.trace.steps.at(-2)?.kind, "branch");
  });

  it("DROP in nat ends as dropped; ACCEPT ends the hook without NAT", () => {
    assert.equal(
      compileNat(spec(["-A PREROUTING -j DROP"]), NODE).evaluate(flow("10.0.0.1", "1.1.1.1"))
        .decision,
      "dropped",
    );
    assert.equal(
      compileNat(spec(["-A POSTROUTING -j ACCEPT", "-A POSTROUTING -j MASQUERADE"]), NODE).evaluate(
        flow("10.0.0.1", "1.1.1.1"),
      ).decision,
      "keep",
    );
  });

  it("REDIRECT in OUTPUT goes to loopback; DNAT to a range cannot be decided", () => {
    const t = compileNat(spec(["-A OUTPUT -p tcp -j REDIRECT --to-ports 15001"]), NODE).evaluate(
      flow("10.0.0.1", "1.1.1.1", { origin: "host" }),
    );
    assert.equal(ipText(t.dstOut?.ip), "127.0.0.1");
    assert.equal(t.dstOut?.port, 15001);
    assert.equal(t.dstOut?.how, "redirect");
    const u = compileNat(
      spec(["-A PREROUTING -j DNAT --to-destination 10.0.0.1-10.0.0.5"]),
    ).evaluate(flow("10.0.0.9", "1.1.1.1"));
    assert.equal(u.decision, "cannot-decide");
  });

  it("rejects a flow of the other address family with a reason", () => {
    const t = compileNat(spec(["-A POSTROUTING -j MASQUERADE"]), NODE).evaluate(
      flow("fd00::1", "fd00::2"),
    );
    assert.equal(t.decision, "cannot-decide");
    assert.match(t.undecided?.reason ?? "", /IPv6 but rules.txt holds IPv4/);
  });
});

// ---- property: the destination index never changes an answer ---------------------------------

const POOL = ["10.96.0.1", "10.96.0.2", "10.96.0.3", "10.96.0.4", "1.1.1.1", "8.8.8.8"];
const arbRule = fc.record({
  chain: fc.constantFrom("PREROUTING", "POSTROUTING", "S", "T"),
  dst: fc.oneof(
    fc.constantFrom(...POOL).map((a) => `-d ${a}/32`),
    fc.constant(""),
    fc.constant("-d 10.96.0.0/16"),
    fc.constant("! -d 10.96.0.1/32"),
  ),
  proto: fc.constantFrom("", "-p tcp -m tcp --dport 80", "-p udp", "-p tcp -m tcp ! --dport 443"),
  extra: fc.constantFrom(
    "",
    "-m mark --mark 0x4000/0x4000",
    "-m statistic --mode random --probability 0.5",
    "-m comment --comment x",
  ),
  target: fc.constantFrom(
    "-j RETURN",
    "-j S",
    "-j T",
    "-g T",
    "-j MARK --set-xmark 0x4000/0x4000",
    "-j ACCEPT",
    "-j TARGETNAT",
    "",
  ),
});

describe("compileNat index", () => {
  it("indexed evaluation equals linear evaluation on random rule sets", () => {
    fc.assert(
      fc.property(
        fc.array(arbRule, { minLength: 1, maxLength: 60 }),
        fc.array(
          fc.record({
            src: fc.constantFrom("10.0.0.1", "10.96.5.5"),
            dst: fc.constantFrom(...POOL, "10.96.9.9"),
            proto: fc.constantFrom("tcp", "udp"),
            dport: fc.constantFrom(80, 443),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        (rules, flows) => {
          const lines = ["-N S", "-N T"];
          for (const r of rules) {
            // DNAT/SNAT only where the kernel allows them; user chains S and T never jump back
            let target: string = r.target;
            if (target === "-j TARGETNAT")
              target =
                r.chain === "PREROUTING"
                  ? "-j DNAT --to-destination 10.200.0.1"
                  : r.chain === "POSTROUTING"
                    ? "-j MASQUERADE"
                    : "-j RETURN";
            if (r.chain === "T" && (target === "-j S" || target === "-j T" || target === "-g T"))
              target = "-j RETURN";
            if (r.chain === "S" && (target === "-j S" || target === "-g T")) target = "-j T";
            if ((r.chain === "S" || r.chain === "T") && target.includes("DNAT"))
              target = "-j RETURN";
            lines.push(
              `-A ${r.chain} ${r.dst} ${r.proto} ${r.extra} ${target}`.replace(/ +/g, " ").trim(),
            );
          }
          const d = spec(lines);
          const indexed = compileNat(d, { indexThreshold: 1, localAddresses: [] });
          const linear = compileNat(d, {
            indexThreshold: Number.POSITIVE_INFINITY,
            localAddresses: [],
          });
          for (const f of flows) {
            const fl = flow(f.src, f.dst, { proto: f.proto, dport: f.dport, outIface: "eth0" });
            assert.deepEqual(indexed.evaluate(fl), linear.evaluate(fl));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("answers the same on a generated kube-proxy table with and without the index", () => {
    const text = fixture(KUBENET);
    const d = parseIptablesSave(text, KUBENET).value;
    const a = compileNat(d, { indexThreshold: 2, localAddresses: [ip("10.138.0.2")] });
    const b = compileNat(d, {
      indexThreshold: Number.POSITIVE_INFINITY,
      localAddresses: [ip("10.138.0.2")],
    });
    for (const dst of [
      "10.51.254.224",
      "10.51.240.10",
      "10.51.252.202",
      "35.194.9.137",
      "10.51.245.213",
      "9.9.9.9",
    ]) {
      for (const src of ["10.48.0.8", "172.16.0.1"]) {
        for (const proto of ["tcp", "udp"]) {
          const f = flow(src, dst, { proto, dport: proto === "udp" ? 53 : 80 });
          assert.deepEqual(a.evaluate(f), b.evaluate(f));
        }
      }
    }
    void parseCidr;
  });
});
