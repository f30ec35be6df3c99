/**
 * @module cases/masquerade/owners/kubenet — the masquerade case on a kubenet node: kubenet's one
 * rule (`-A POSTROUTING ! -d <--non-masquerade-cidr> … "kubenet: SNAT for outbound traffic from
 * cluster" … -j MASQUERADE`) leaves every destination inside the kubelet's `--non-masquerade-cidr`
 * with the pod's address. That is kubenet's design for the cluster's pods; for anything else in
 * that CIDR (the default 10.0.0.0/8 holds many on-prem ranges) it is the problem. The fix in
 * kubenet's terms: the kubelet flag `--non-masquerade-cidr` set to the cluster's pod range on the
 * node (pool), the kubelet restarted, and kubenet's previous rule deleted by hand (kubenet's
 * EnsureRule only appends).
 */
import {
  DEFAULT_NON_MASQUERADE_CIDR,
  FLAG_NON_MASQUERADE_CIDR,
} from "../../../agents/kubenet/flags.ts";
import {
  flagCidr,
  type KubenetNode,
  kubenetNode,
  ruleKeeping,
  ruleMasquerading,
  runsKubenet,
} from "../../../agents/kubenet/node.ts";
import { KUBENET_COMMENT, kubenetMasqRule } from "../../../agents/kubenet/rules.ts";
import { renderRule } from "../../../iptables/render.ts";
import type { Diagnostic, Evidence, Missing, SourceRef } from "../../../model/types.ts";
import { refToEvidence } from "../../../model/types.ts";
import {
  type Cidr,
  contains,
  excludeCidrs,
  formatCidr,
  formatIp,
  type Ip,
  mergeCidrs,
} from "../../../net/cidr.ts";
import { sh } from "../../../report/shell-quote.ts";
import type { Snapshot } from "../../../snapshot/load.ts";
import { clusterFacts, clusterPodRange } from "../facts.ts";
import type {
  OwnerExempt,
  OwnerExemptInput,
  OwnerPlan,
  OwnerPlanInput,
  OwnerSetting,
  OwnerWireWording,
  SourceOwnerCase,
} from "./owner.ts";
import { ipMasqAgentPresent, ruleOwner } from "./rule-owner.ts";

const FLAG = `--${FLAG_NON_MASQUERADE_CIDR}`;
/** The tool kubenet writes its rule with for a family (kubenet_linux.go: iptablesv6 for IPv6). */
const ipt = (family: 4 | 6) => (family === 6 ? "ip6tables" : "iptables");
const grepOf = (family: 4 | 6) => `${ipt(family)}-save -t nat | grep -E 'kubenet|POSTROUTING'`;
const GREP = grepOf(4);
const FLAGS_CMD = "ps -o args= -C kubelet";

const kubenetNodes = (snap: Snapshot): KubenetNode[] =>
  [...snap.nodes.keys()].map((n) => kubenetNode(snap, n)).filter(runsKubenet);

function kubenetPresent(snap: Snapshot): boolean {
  return kubenetNodes(snap).length > 0;
}

function ruleText(ref: SourceRef): string {
  return `${ref.file}:${ref.line}${ref.text ? ` (${ref.text.trim()})` : ""}`;
}

/** The flag as the kubelet runs with it, in words with its line (or that it is the default). */
function flagText(n: KubenetNode): string {
  const f = n.flags?.nonMasqueradeCidr;
  if (!f) return `the kubelet's ${FLAG} (the kubelet's flags are not in the snapshot)`;
  return f.source
    ? `the kubelet's ${FLAG}=${f.text} (${f.source.file}:${f.source.line})`
    : `the kubelet's ${FLAG} default ${DEFAULT_NON_MASQUERADE_CIDR} (not given in ${n.flagsFile})`;
}

/** The cluster's pod range: a component's stated range, else the nodes' podCIDRs. */
function podRange(snap: Snapshot, known: readonly Cidr[]): Cidr[] {
  const stated = clusterPodRange(snap.objects);
  return mergeCidrs(stated && stated.cidrs.length > 0 ? stated.cidrs : known);
}

/** The one CIDR the flag takes that holds every pod range of a family (the smallest). */
function covering(ranges: readonly Cidr[], family: 4 | 6): Cidr | undefined {
  const fam = ranges.filter((c) => c.family === family);
  const first = fam[0];
  if (!first) return undefined;
  const bits = family === 4 ? 32 : 128;
  for (let p = Math.min(...fam.map((c) => c.prefix)); p >= 0; p--) {
    const host = BigInt(bits - p);
    const start = (first.start >> host) << host;
    const c: Cidr = { family, start, end: start | ((1n << host) - 1n), prefix: p };
    if (fam.every((x) => contains(c, x))) return c;
  }
  return undefined;
}

function kubenetExempt(input: OwnerExemptInput): OwnerExempt {
  const { snap, src, target, stops } = input;
  const n = kubenetNode(snap, src.node);
  if (!runsKubenet(n)) return { kind: "not-mine" };
  // another owner's rule decided (an ip-masq-agent RETURN before kubenet's rule): not ours
  const owned = ruleOwner(snap, src.node, input.rule);
  if (owned && owned.attribution.owner !== "kube-proxy" && owned.attribution.owner !== "kubenet") {
    return { kind: "not-mine" };
  }
  const rule = ruleKeeping(n, target.ip);
  const family = target.ip.family;
  const flagCidr0 = n.flags?.nonMasqueradeCidr.cidr;
  const famDump =
    family === 6 ? snap.nodes.get(src.node)?.ip6tables : snap.nodes.get(src.node)?.iptables;
  // kubenet takes one flag and writes its one rule in that flag's family only (ensureMasqRule
  // picks iptablesv6 for an IPv6 CIDR): the other family's pod traffic is never masqueraded
  const otherFamily =
    !rule &&
    famDump !== undefined &&
    !n.rules.some((r) => r.dst?.cidr.family === family) &&
    flagCidr0 !== undefined &&
    flagCidr0.family !== family;
  if (otherFamily) return otherFamilyExempt(input, n, flagCidr0);
  const offFlag =
    !rule &&
    n.rules.length === 0 &&
    n.hasDump &&
    n.flags?.nonMasqueradeCidr.text !== undefined &&
    /^(0\.0\.0\.0|::)\/0$/.test(n.flags.nonMasqueradeCidr.text);
  if (!rule && !offFlag) return { kind: "not-mine" };
  const dstText = formatIp(target.ip);
  const pods = podRange(snap, []);
  const nodePods = clusterFacts(snap.objects).podRanges;
  const inCluster = [...pods, ...nodePods].some((c) => contains(c, target.ip));
  if (rule && inCluster && !stops) {
    return {
      kind: "healthy",
      why: `${dstText} is a pod address of the cluster, inside ${FLAG} ${rule.dst ? formatCidr(rule.dst.cidr) : ""} (${ruleText(rule.source)}): kubenet keeps pod addresses between pods by design`,
    };
  }
  const evidence: Evidence[] = [];
  if (rule) evidence.push(refToEvidence(rule.source));
  const flag = n.flags?.nonMasqueradeCidr;
  if (flag?.source) evidence.push(refToEvidence(flag.source));
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const cidrText = rule?.dst
    ? formatCidr(rule.dst.cidr)
    : (flag?.text ?? DEFAULT_NON_MASQUERADE_CIDR);
  const target0 = covering(podRange(snap, nodePods), target.ip.family);
  const newCidr = target0 && !contains(target0, target.ip) ? formatCidr(target0) : undefined;
  const why = rule
    ? `kubenet's rule ${ruleText(rule.source)} masquerades only destinations outside ${cidrText}, and ${dstText} is inside it; ${cidrText} is ${flagText(n)}`
    : `${flagText(n)} turns kubenet's masquerade rule off (kubenet writes none for 0.0.0.0/0 or ::/0), and no other rule on ${src.node} rewrites the source`;
  const explanation =
    `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: ${why}. ` +
    (rule ? `(Attribution: kubenet's comment "${KUBENET_COMMENT}".) ` : "") +
    `The node's own traffic carries the node's address${input.hostSource ? ` (${formatIp(input.hostSource)})` : ""}, which the far side knows: that is why the node reaches ${dstText} and the pod does not. ` +
    (stops
      ? "The far side has no route back to the pod's address, so the replies vanish. "
      : "Unless the far side routes the pod's address back, the replies vanish. ") +
    `Fix: set the kubelet's ${FLAG} to the cluster's pod range${newCidr ? ` (${newCidr})` : ""} on the node (pool) and restart the kubelet, then delete kubenet's old rule (kubenet appends the new one and never removes the old); a behaviour change: ${dstText} then sees node addresses. Or keep pod addresses and route the pod range back at the far side.`;
  const next = [
    `${FLAGS_CMD}   # on ${src.node}: the kubelet's ${FLAG}`,
    `${grepOf(family)}   # on ${src.node}`,
    sh`tcpdump -ni any host ${dstText}   # on ${src.node}: the pod address on the wire, no reply`,
  ];
  if (newCidr) {
    const oldRule = kubenetMasqRule(cidrText, rule?.dst?.cidr ?? target0!);
    const newRule = kubenetMasqRule(newCidr, target0!);
    next.push(
      `set ${FLAG}=${newCidr} in the kubelet's flags on ${src.node} (KUBELET_EXTRA_ARGS in /etc/default/kubelet, the kubelet's systemd unit, or the node pool's kubelet settings)`,
      `systemctl restart kubelet   # on ${src.node}: kubenet appends ! -d ${newCidr} … -j MASQUERADE`,
      ...(oldRule
        ? [
            `${ipt(family)} -t nat -D POSTROUTING ${oldRule.spec.map(shellWord).join(" ")}   # on ${src.node}: kubenet's previous rule`,
          ]
        : []),
      sh`podpath plan masquerade ${snap.name} --dest ${dstText}   # the whole plan, with its rollback`,
      ...(newRule
        ? [
            `rollback: ${FLAG}=${flag?.text ?? DEFAULT_NON_MASQUERADE_CIDR}, systemctl restart kubelet, ${ipt(family)} -t nat -D POSTROUTING ${newRule.spec.map(shellWord).join(" ")}`,
          ]
        : []),
    );
  }
  return {
    kind: "finding",
    finding: {
      severity: stops ? "error" : "warning",
      title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (kubenet: ${FLAG}=${cidrText}${flag?.defaulted ? ", the kubelet's default" : ""})`,
      subject: `node/${src.node}`,
      explanation,
      evidence,
      next,
    },
  };
}

/**
 * The pod's packet is of the other family than the kubelet's one flag: kubenet wrote no rule for
 * it, so nothing of kubenet's masquerades it (a dual-stack kubenet node with the default
 * 10.0.0.0/8 masquerades no IPv6 pod traffic at all). Said as kubenet's, not guessed as another's.
 */
function otherFamilyExempt(input: OwnerExemptInput, n: KubenetNode, flag: Cidr): OwnerExempt {
  const { snap, src, target, stops } = input;
  const family = target.ip.family;
  const dstText = formatIp(target.ip);
  const pods = [...podRange(snap, []), ...clusterFacts(snap.objects).podRanges];
  if (pods.some((c) => contains(c, target.ip)) && !stops) {
    return {
      kind: "healthy",
      why: `${dstText} is a pod address of the cluster; kubenet masquerades no IPv${family} traffic (its ${FLAG} is IPv${flag.family})`,
    };
  }
  const f = n.flags?.nonMasqueradeCidr;
  const evidence: Evidence[] = [];
  if (f?.source) evidence.push(refToEvidence(f.source));
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const explanation =
    `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: ${flagText(n)} is an IPv${flag.family} CIDR, and kubenet writes its one masquerade rule in that family only (${ipt(flag.family)}); no IPv${family} rule of kubenet's is in ${src.node}'s ${ipt(family)}-save, so kubenet masquerades no IPv${family} pod traffic. ` +
    `The node's own traffic carries the node's address${input.hostSource ? ` (${formatIp(input.hostSource)})` : ""}. ` +
    (stops
      ? "The far side has no route back to the pod's address, so the replies vanish. "
      : "Unless the far side routes the pod's address back, the replies vanish. ") +
    `kubenet's flag takes one CIDR, so it cannot masquerade both families: route the pod range back at the far side, or have another component masquerade IPv${family}.`;
  return {
    kind: "finding",
    finding: {
      severity: stops ? "error" : "warning",
      title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (kubenet masquerades only IPv${flag.family}: ${FLAG}=${f?.text ?? formatCidr(flag)})`,
      subject: `node/${src.node}`,
      explanation,
      evidence,
      next: [
        `${FLAGS_CMD}   # on ${src.node}: the kubelet's ${FLAG}`,
        `${grepOf(family)}   # on ${src.node}: no kubenet rule`,
        sh`tcpdump -ni any host ${dstText}   # on ${src.node}: the pod address on the wire, no reply`,
      ],
    },
  };
}

/** A word for a shell line: quoted when it holds a space or a quote. */
function shellWord(w: string): string {
  return /^[A-Za-z0-9_./:=+!-]+$/.test(w) ? w : `"${w.replace(/(["\\$`])/g, "\\$1")}"`;
}

function kubenetWireWording(snap: Snapshot): OwnerWireWording | undefined {
  if (!kubenetPresent(snap) || ipMasqAgentPresent(snap)) return undefined;
  return {
    fix: `(kubenet: set the kubelet's ${FLAG} to the cluster's pod range on the node pool, restart the kubelet, delete kubenet's previous rule)`,
    next: [`${FLAGS_CMD}   # on the node: the kubelet's ${FLAG}`, `${GREP}   # on the node`],
  };
}

/** Per node, the flag as written (undefined value: not given, the kubelet's default applies). */
function kubenetSettings(snap: Snapshot): OwnerSetting[] {
  return kubenetNodes(snap).flatMap((n) => {
    const f = n.flags?.nonMasqueradeCidr;
    if (!f) return [];
    return [
      {
        key: `${n.node}: kubelet ${FLAG}`,
        ...(f.defaulted ? {} : { value: f.text }),
        ...(f.source ? { source: f.source } : {}),
      },
    ];
  });
}

/** The kubelet's flag decides; without the flags, kubenet's rule in the dump shows it. */
function kubenetIntendedFor(snap: Snapshot, dst: Ip) {
  const evidence: Evidence[] = [];
  for (const n of kubenetNodes(snap)) {
    const f = n.flags?.nonMasqueradeCidr;
    if (f?.cidr && n.flags?.isKubelet) {
      if (f.source) evidence.push(refToEvidence(f.source));
      if (/^(0\.0\.0\.0|::)\/0$/.test(f.text)) {
        return { intended: "keep-pod-source" as const, evidence };
      }
      if (f.cidr.family !== dst.family) return { intended: "unknown" as const, evidence };
      return {
        intended: contains(f.cidr, dst) ? ("keep-pod-source" as const) : ("masquerade" as const),
        evidence,
      };
    }
    const rule = n.rules.find((r) => r.dst?.negated && r.dst.cidr.family === dst.family);
    if (rule?.dst) {
      evidence.push(refToEvidence(rule.source));
      return {
        intended: contains(rule.dst.cidr, dst)
          ? ("keep-pod-source" as const)
          : ("masquerade" as const),
        evidence,
      };
    }
  }
  return { intended: "unknown" as const, evidence };
}

function kubenetMissing(snap: Snapshot): Missing[] {
  return kubenetNodes(snap)
    .filter((n) => !n.flags)
    .map((n) => ({
      file: `nodes/${n.node}/kubelet-flags.txt`,
      would_decide: `the kubelet's ${FLAG} as written on ${n.node} (kubenet's rule shows only the value it last applied), which the fix changes`,
      command: `${FLAGS_CMD}   # on ${n.node}`,
    }));
}

/**
 * The plan in kubenet's terms: the kubelet's --non-masquerade-cidr set to the cluster's pod range
 * (one CIDR holding it), the kubelet restarted node by node, kubenet's previous rule deleted.
 */
function kubenetPlan(input: OwnerPlanInput): OwnerPlan | undefined {
  const { snap, targets } = input;
  if (!kubenetPresent(snap) || ipMasqAgentPresent(snap) || input.strategy !== "narrow") {
    return undefined;
  }
  const nodes = kubenetNodes(snap);
  const kept = targets.filter((t) =>
    nodes.some((n) => {
      if (ruleKeeping(n, t.ip)) return true;
      const c = flagCidr(n);
      return c !== undefined && c.family === t.ip.family && contains(c, t.ip);
    }),
  );
  if (kept.length === 0) {
    const other = targets.filter((t) =>
      nodes.some((n) => {
        const c = flagCidr(n);
        return (
          c !== undefined &&
          c.family !== t.ip.family &&
          !n.rules.some((r) => r.dst?.cidr.family === t.ip.family)
        );
      }),
    );
    if (other.length > 0) return otherFamilyPlan(snap, nodes, other);
    return nothingToChange(snap, nodes, targets);
  }
  const family = kept[0]!.ip.family;
  const ranges = podRange(snap, input.podRanges);
  const next = covering(ranges, family);
  const before = kubenetSettings(snap);
  const evidence: SourceRef[] = [];
  for (const n of nodes) {
    const f = n.flags?.nonMasqueradeCidr.source;
    if (f) evidence.push(f);
    for (const t of kept) {
      const r = ruleKeeping(n, t.ip);
      if (r) evidence.push(r.source);
    }
  }
  const missing: Missing[] = kubenetMissing(snap);
  const stated = input.podRangeStated ?? clusterPodRange(snap.objects);
  const base = {
    owner: "kubenet" as const,
    name: "kubenet (the kubelet's --non-masquerade-cidr)",
    knob: `the kubelet's ${FLAG} on each node (pool)`,
    files: [],
  };
  const blocked = !next || kept.some((t) => contains(next, t.ip));
  if (blocked) {
    return {
      ...base,
      title: `No ${FLAG} masquerades ${kept.map((t) => formatIp(t.ip)).join(", ")} and keeps pod-to-pod traffic: route the pod range back`,
      why: next
        ? `The one CIDR that holds the cluster's pod range (${formatCidr(next)}) also holds ${kept.map((t) => formatIp(t.ip)).join(", ")}: kubenet's flag takes one CIDR, so the far side must route the pod range back.`
        : `The cluster's pod range is not in the snapshot (no Node podCIDR, no stated cluster CIDR): the flag's new value cannot be worked out; give --pod-range.`,
      evidence,
      change: { before, after: before },
      apply: [],
      announcement: "Nothing changes on the nodes; the far side's routes change.",
      nowMasqueraded: [],
      expected: [],
      checks: [],
      rollback: [],
      rollbackChecks: [],
      missing: next
        ? missing
        : [
            ...missing,
            {
              file: "cluster/kube-proxy.yaml",
              would_decide: "the cluster's pod range (clusterCIDR), the flag's new value",
              command: "kubectl -n kube-system get configmap kube-proxy -o yaml",
            },
          ],
    };
  }
  const nextText = formatCidr(next);
  const newRule = kubenetMasqRule(nextText, next)!;
  const oldTexts = [
    ...new Set(
      nodes.flatMap((n) =>
        n.rules.flatMap((r) =>
          r.dst?.negated && r.dst.cidr.family === family ? [formatCidr(r.dst.cidr)] : [],
        ),
      ),
    ),
  ];
  const oldCidrs = nodes.flatMap((n) => {
    const c =
      n.rules.find((r) => r.dst?.negated && r.dst.cidr.family === family)?.dst?.cidr ?? flagCidr(n);
    return c ? [c] : [];
  });
  const previous = nodes.find((n) => n.flags)?.flags?.nonMasqueradeCidr;
  const previousText = previous?.text ?? oldTexts[0] ?? DEFAULT_NON_MASQUERADE_CIDR;
  const tool = ipt(family);
  const deletes = oldTexts
    .filter((c) => c !== nextText)
    .map((c) => {
      const r = kubenetMasqRule(c, oldCidrs.find((x) => formatCidr(x) === c) ?? next)!;
      return `${tool} -t nat -D POSTROUTING ${r.spec.map(shellWord).join(" ")}   # on each node: kubenet's previous rule (kubenet never removes it)`;
    });
  const expected = nodes.flatMap((n) => {
    const ev = snap.nodes.get(n.node);
    const post =
      (family === 6 ? ev?.ip6tables : ev?.iptables)?.tables.get("nat")?.chains.get("POSTROUTING")
        ?.rules ?? [];
    const others = post.filter((r) => !n.rules.includes(r)).map((r) => renderRule(r));
    return post.length > 0 ? [...others, newRule.saved] : [];
  });
  const nowMasqueraded = excludeCidrs(mergeCidrs(oldCidrs), [next]).map(formatCidr);
  const setLine =
    previous?.defaulted === false
      ? `sed -i 's|${FLAG}=${previous.text}|${FLAG}=${nextText}|' /etc/default/kubelet   # on each node, or wherever its kubelet flags are written (systemd unit, node pool kubelet settings)`
      : `add ${FLAG}=${nextText} to KUBELET_EXTRA_ARGS in /etc/default/kubelet   # on each node, or wherever its kubelet flags are written (systemd unit, node pool kubelet settings)`;
  const rollbackSet =
    previous?.defaulted === false
      ? `sed -i 's|${FLAG}=${nextText}|${FLAG}=${previous.text}|' /etc/default/kubelet   # on each node`
      : `remove ${FLAG}=${nextText} from KUBELET_EXTRA_ARGS in /etc/default/kubelet   # on each node: the default ${DEFAULT_NON_MASQUERADE_CIDR} again`;
  const names = kept.map((t) => formatIp(t.ip)).join(", ");
  return {
    ...base,
    title: `Set the kubelet's ${FLAG} to the cluster's pod range ${nextText}`,
    why: `${names} ${kept.length === 1 ? "is" : "are"} inside ${previousText} (${previous?.defaulted ? "the kubelet's default" : `${FLAG}`}), so kubenet's rule leaves ${kept.length === 1 ? "it" : "them"} with pod addresses. ${nextText} holds the cluster's pod range${stated ? ` (${stated.what}, ${stated.source.file}:${stated.source.line})` : " (the Nodes' podCIDRs)"} and not ${names}: pod-to-pod traffic keeps its addresses, ${names} sees node addresses.`,
    evidence,
    change: {
      before,
      after: before.map((b) => ({ key: b.key, value: nextText })),
    },
    apply: [
      setLine,
      "systemctl restart kubelet   # on each node, one at a time: pods keep running; kubenet appends its rule for the new value on start",
      ...deletes,
    ],
    announcement: `Destinations in ${previousText} outside the pod range ${nextText} will see the nodes' addresses instead of pod addresses: announce it to their owners; allowlists and logs there that name pod addresses stop matching.`,
    nowMasqueraded,
    expected: [...new Set(expected)],
    checks: [
      `${tool}-save -t nat | grep '${KUBENET_COMMENT}'   # on each node: one rule, ! -d ${nextText}`,
      ...kept.map(
        (t) =>
          sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the node's address on the wire, replies back`,
      ),
      "podpath verify <before-snapshot> <after-snapshot>",
    ],
    rollback: [
      rollbackSet,
      "systemctl restart kubelet   # on each node: kubenet appends its rule for the old value",
      `${tool} -t nat -D POSTROUTING ${newRule.spec.map(shellWord).join(" ")}   # on each node: kubenet never removes the rule for ${nextText}`,
    ],
    rollbackChecks: [
      `${tool}-save -t nat | grep '${KUBENET_COMMENT}'   # on each node: one rule, ! -d ${previousText}`,
    ],
    missing,
  };
}

/**
 * The destinations are of the other family than the kubelet's one flag: kubenet writes no rule
 * for them and no value of its flag masquerades both families; the plan says so and changes
 * nothing on the nodes.
 */
function otherFamilyPlan(
  snap: Snapshot,
  nodes: readonly KubenetNode[],
  targets: OwnerPlanInput["targets"],
): OwnerPlan {
  const before = kubenetSettings(snap);
  const evidence = nodes.flatMap((n) => {
    const f = n.flags?.nonMasqueradeCidr.source;
    return f ? [f] : [];
  });
  const names = targets.map((t) => formatIp(t.ip)).join(", ");
  const family = targets[0]?.ip.family ?? 6;
  const flag = nodes.find((n) => n.flags)?.flags?.nonMasqueradeCidr.text;
  return {
    owner: "kubenet",
    name: "kubenet (the kubelet's --non-masquerade-cidr)",
    knob: "none: kubenet's one flag cannot masquerade both families",
    title: `kubenet masquerades no IPv${family} traffic: route the pod range back for ${names}`,
    why: `The kubelet's ${FLAG}${flag ? `=${flag}` : ""} is not IPv${family}, and kubenet writes its one masquerade rule in the flag's family only, so ${names} ${targets.length === 1 ? "sees" : "see"} pod addresses whatever the flag's value. Setting the flag to an IPv${family} CIDR would move kubenet's rule to IPv${family} and stop masquerading the other family. The far side must route the pod range back, or another component must masquerade IPv${family}.`,
    evidence,
    change: { before, after: before },
    files: [],
    apply: [],
    announcement: "Nothing changes on the nodes; the far side's routes change.",
    nowMasqueraded: [],
    expected: [],
    checks: targets.map(
      (t) =>
        sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the pod address on the wire until the far side routes it back`,
    ),
    rollback: [],
    rollbackChecks: [],
    missing: kubenetMissing(snap),
  };
}

/** kubenet already masquerades every destination asked about: the plan changes nothing. */
function nothingToChange(
  snap: Snapshot,
  nodes: readonly KubenetNode[],
  targets: OwnerPlanInput["targets"],
): OwnerPlan {
  const before = kubenetSettings(snap);
  const evidence: SourceRef[] = nodes.flatMap((n) => {
    const r = targets.map((t) => ruleMasquerading(n, t.ip)).find((x) => x !== undefined);
    const f = n.flags?.nonMasqueradeCidr.source;
    return [...(r ? [r.source] : []), ...(f ? [f] : [])];
  });
  const names = targets.map((t) => formatIp(t.ip)).join(", ");
  return {
    owner: "kubenet",
    name: "kubenet (the kubelet's --non-masquerade-cidr)",
    knob: "none: kubenet already masquerades these destinations",
    title: `Nothing to change: kubenet already masquerades ${names}`,
    why: `${names} ${targets.length === 1 ? "is" : "are"} outside the kubelet's ${FLAG} on every kubenet node, so kubenet's rule gives pod packets the node's address. If the far side still does not answer, the break is elsewhere (its routes, its firewall).`,
    evidence,
    change: { before, after: before },
    files: [],
    apply: [],
    announcement: "Nothing changes on the nodes.",
    nowMasqueraded: [],
    expected: [],
    checks: targets.map(
      (t) =>
        sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the node's address on the wire`,
    ),
    rollback: [],
    rollbackChecks: [],
    missing: kubenetMissing(snap),
  };
}

/** Problems reading the kubelet flags of every node. */
function kubenetDiagnostics(snap: Snapshot): Diagnostic[] {
  return [...snap.nodes.keys()].flatMap((n) => [...kubenetNode(snap, n).diagnostics]);
}

/** kubenet (the kubelet's --non-masquerade-cidr) as an owner of the pods' source address. */
export const kubenetOwner: SourceOwnerCase = {
  id: "kubenet",
  name: "kubenet",
  present: kubenetPresent,
  diagnostics: kubenetDiagnostics,
  replacesAgent: (snap) => kubenetPresent(snap) && !ipMasqAgentPresent(snap),
  exempt: kubenetExempt,
  wireWording: kubenetWireWording,
  plan: kubenetPlan,
  settings: kubenetSettings,
  intendedFor: kubenetIntendedFor,
  missing: kubenetMissing,
};
