/**
 * @module cases/masquerade/proof-owner — the change record's intent and kernel layers when another
 * owner than ip-masq-agent decides the pods' source address: the owner's settings before and after
 * (each cited, tagged with its phase), what they intend for the destination, and on each node the
 * rules that owner wrote (by attribution) and the state it installs beside them (IP sets) before
 * and after.
 */
import { attributeRule, factsOfRule } from "../../iptables/owners.ts";
import { renderRule } from "../../iptables/render.ts";
import type { Evidence, Missing } from "../../model/types.ts";
import type { Ip } from "../../net/cidr.ts";
import { sh } from "../../report/shell-quote.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { OwnerSetting, SourceOwnerCase } from "./owners/index.ts";
import type { ChangeRecord, NodeChange } from "./proof.ts";

export interface OwnerSettingsChange {
  readonly before: readonly OwnerSetting[];
  readonly after: readonly OwnerSetting[];
  readonly changed: readonly string[];
  readonly intended: ChangeRecord["intended"];
  readonly evidence: readonly Evidence[];
}

const tagged = (phase: "before" | "after", s: OwnerSetting): Evidence[] =>
  s.source
    ? [
        {
          file: `${phase}:${s.source.file}`,
          line: s.source.line,
          ...(s.source.text ? { text: s.source.text } : {}),
        },
      ]
    : [];

/** The owner's settings in both snapshots, which changed, and what the change intends for `dest`. */
export function ownerSettingsChange(
  owner: SourceOwnerCase,
  before: Snapshot,
  after: Snapshot,
  dest: { ip: Ip } | undefined,
): OwnerSettingsChange {
  const sb = owner.settings(before);
  const sa = owner.settings(after);
  const keys = [...new Set([...sb.map((s) => s.key), ...sa.map((s) => s.key)])];
  const changed = keys.filter(
    (k) => sb.find((s) => s.key === k)?.value !== sa.find((s) => s.key === k)?.value,
  );
  const evidence = changed.flatMap((k) => {
    const b = sb.find((s) => s.key === k);
    const a = sa.find((s) => s.key === k);
    return [...(a ? tagged("after", a) : []), ...(b ? tagged("before", b) : [])];
  });
  let intended: ChangeRecord["intended"] = "unknown";
  if (dest) {
    const ib = owner.intendedFor(before, dest.ip).intended;
    const ia = owner.intendedFor(after, dest.ip).intended;
    if (ib !== "unknown" && ia !== "unknown") {
      intended = ib === ia ? "none" : ia === "masquerade" ? "masquerade" : "keep-pod-source";
    }
  }
  return { before: sb, after: sa, changed, intended, evidence };
}

/**
 * The nat rules the owner wrote on a node (IPv4, then IPv6), as iptables-save prints them, and the
 * first's line.
 */
function ownerRules(
  snap: Snapshot,
  node: string,
  owner: SourceOwnerCase,
): { rules: string[]; ev?: Evidence } | undefined {
  // the owner's IPv6 rules (its ip6tables-save) count beside its IPv4 ones
  const ev = snap.nodes.get(node);
  const nats = [ev?.iptables, ev?.ip6tables].flatMap((d) => {
    const nat = d?.tables.get("nat");
    return nat ? [nat] : [];
  });
  if (nats.length === 0) return undefined;
  const rules = nats
    .flatMap((nat) => [...nat.chains.values()])
    .flatMap((c) => c.rules)
    .filter((r) => attributeRule(factsOfRule(r)).owner === owner.id);
  const first = rules[0]?.source;
  // state the owner keeps outside its rules (Calico's IP sets) counts as its rules here
  const extra = owner.installedState?.(snap, node);
  const src = first ?? extra?.source;
  return {
    rules: [...rules.map((r) => renderRule(r)), ...(extra?.lines ?? [])],
    ...(src
      ? { ev: { file: src.file, line: src.line, ...(src.text ? { text: src.text } : {}) } }
      : {}),
  };
}

/** Every node of either snapshot: the owner's rules before and after, and whether they moved. */
export function ownerNodeChanges(
  owner: SourceOwnerCase,
  before: Snapshot,
  after: Snapshot,
  settingsChanged: boolean,
  missing: Missing[],
): NodeChange[] {
  const names = [...new Set([...before.nodes.keys(), ...after.nodes.keys()])].sort();
  return names.map((node): NodeChange => {
    const rb = ownerRules(before, node, owner);
    const ra = ownerRules(after, node, owner);
    const changed = rb && ra ? rb.rules.join("\n") !== ra.rules.join("\n") : undefined;
    const evidence: Evidence[] = [];
    if (ra?.ev) evidence.push({ ...ra.ev, file: `after:${ra.ev.file}` });
    if (rb?.ev) evidence.push({ ...rb.ev, file: `before:${rb.ev.file}` });
    let pickedUp: NodeChange["pickedUp"];
    let note: string;
    if (changed === undefined) {
      missing.push({
        file: `${ra ? "before" : "after"}: nodes/${node}/iptables-save.txt`,
        would_decide: `whether ${owner.name}'s rules on ${node} changed`,
        command: sh`iptables-save -t nat   # on ${node}`,
      });
      pickedUp = "unknown";
      note = `no nat dump of ${node} in both snapshots: the kernel side is not known`;
    } else if (changed) {
      pickedUp = "yes";
      note = `${owner.name}'s rules changed on ${node}`;
    } else if (settingsChanged) {
      pickedUp = "no";
      note = `${owner.name}'s rules never changed on ${node}, whatever its settings say`;
    } else {
      pickedUp = "yes";
      note = `${owner.name}'s settings and rules are the same in both snapshots`;
    }
    return {
      node,
      ...(rb ? { rulesBefore: rb.rules } : {}),
      ...(ra ? { rulesAfter: ra.rules } : {}),
      ...(changed !== undefined ? { rulesChanged: changed } : {}),
      pickedUp,
      note,
      evidence,
    };
  });
}
