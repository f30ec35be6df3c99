/**
 * @module cases/masquerade/plan — the fix for case A as a plan: `narrow` (the non-masquerade list shrinks
 * to the pod range, plus other private blocks only where in-cluster traffic needs them) or
 * `keep-pod-identity` (the far side learns the pod range). Each plan says who will see a different
 * source address afterwards (a behaviour change to announce), what in the snapshot names pod
 * addresses and will silently stop matching, which node pools the change never reaches, how to
 * apply it, how to check it, and how to roll it back. Pure: snapshot in, plan out.
 */
import { Document, isMap, isScalar, parseDocument } from "yaml";
import { decodeMasqConfig, validateMasqConfig } from "../../agents/ip-masq-agent/config.ts";
import { isExempt } from "../../agents/ip-masq-agent/exempt.ts";
import { goParseCidr } from "../../agents/ip-masq-agent/go-net.ts";
import { agentSavedLines, expectedAgentChain } from "../../agents/ip-masq-agent/rules.ts";
import { primaryAddress } from "../../evidence/ip-addr.ts";
import type { RemoteSite } from "../../evidence/remote-site.ts";
import { readNetworkPolicy } from "../../k8s/objects.ts";
import type { Diagnostic, Missing, SourceRef } from "../../model/types.ts";
import {
  type Cidr,
  contains,
  excludeCidrs,
  formatCidr,
  formatIp,
  type Ip,
  mergeCidrs,
  overlaps,
  parseCidr,
} from "../../net/cidr.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import { readSites } from "../../snapshot/sites.ts";
import type { Destination } from "../endpoints.ts";
import { agentCoverage } from "./coverage.ts";
import { chooseDestinations } from "./destinations.ts";
import { type ClusterFacts, clusterFacts, clusterPodRange } from "./facts.ts";
import { type AgentIntent, readAgentIntent } from "./intent.ts";

export type MasqueradeStrategy = "narrow" | "keep-pod-identity";

export interface MasqueradePlanOptions {
  readonly dest?: Destination;
  readonly strategy: MasqueradeStrategy;
  /** The cluster's pod range, when the user knows it better than the snapshot. */
  readonly podRange?: readonly Cidr[];
  /** Folder the ConfigMap files are (to be) written to; the commands name them there. */
  readonly fileDir?: string;
}

/** One entry of the new list and why it is there. */
export interface KeptBlock {
  readonly cidr: string;
  readonly why: string;
}

/** Something in the snapshot that names pod addresses and will stop matching after the change. */
export interface PodAddressReference {
  readonly what: string;
  readonly file: string;
  readonly line: number;
  readonly text?: string;
  readonly consequence: string;
}

export interface PoolCoverage {
  readonly pool: string;
  readonly nodes: readonly string[];
  readonly reached: boolean;
  readonly why: string;
}

export interface SiteChange {
  readonly site: string;
  readonly file: string;
  readonly routesBackAdd: readonly string[];
  readonly selectorsAdd: readonly string[];
  /** Firewall scope: allowlists toward the destination whose sources must admit the pod range. */
  readonly allowlistSourcesAdd: readonly {
    readonly name: string;
    readonly add: readonly string[];
  }[];
  /** The site file's fields before and after, as YAML lines with +/- marks. */
  readonly diff: readonly string[];
}

export interface NarrowPlan {
  readonly newList: readonly KeptBlock[];
  readonly dropped: readonly {
    readonly text: string;
    readonly source?: SourceRef;
    readonly why: string;
  }[];
  /** The agent's verdict on the new config: undefined when it accepts it. */
  readonly validationError?: string;
  readonly newConfigMap: string;
  readonly newConfigMapFile: string;
  readonly apply: readonly string[];
  /** Expected rules on every node afterwards (iptables-save form). */
  readonly expectedRules: readonly string[];
  readonly checks: readonly string[];
}

export interface Rollback {
  readonly previousConfigMap?: string;
  readonly file: string;
  readonly apply: readonly string[];
  readonly checks: readonly string[];
}

export interface MasqueradePlan {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "plan masquerade";
  readonly snapshot: string;
  readonly strategy: MasqueradeStrategy;
  readonly podRanges: readonly string[];
  readonly destinations: readonly {
    readonly ip: string;
    readonly port?: number;
    readonly exemptToday: boolean;
    readonly exemptBy?: string;
    readonly exemptBySource?: SourceRef;
  }[];
  readonly current: readonly { readonly text: string; readonly source?: SourceRef }[];
  readonly narrow?: NarrowPlan;
  readonly keepPodIdentity?: { readonly sites: readonly SiteChange[] };
  /** The behaviour change, in words, and the ranges whose destinations will see node addresses. */
  readonly impact: {
    readonly announcement: string;
    readonly nowMasqueraded: readonly string[];
    readonly namesPodAddresses: readonly PodAddressReference[];
  };
  readonly coverage: readonly PoolCoverage[];
  readonly tradeoff: readonly {
    readonly aspect: string;
    readonly narrow: string;
    readonly keepPodIdentity: string;
  }[];
  readonly rollback: Rollback;
  /** The ConfigMap files are on disk (`--write`): the commands can be run as printed. */
  readonly filesWritten?: boolean;
  readonly missing: readonly Missing[];
  readonly diagnostics: readonly Diagnostic[];
}

export class PlanError extends Error {
  override readonly name = "PlanError";
  readonly code = "ERR_PLAN_INPUT";
}

const ipOf = (c: Cidr): Ip => ({ family: c.family, value: c.start });

/** The subnets the nodes' own addresses live in (node-to-node and pod-to-node traffic). */
function nodeSubnets(snap: Snapshot, facts: ClusterFacts): { cidr: Cidr; why: string }[] {
  const out: { cidr: Cidr; why: string }[] = [];
  for (const n of snap.nodes.values()) {
    for (const iface of n.interfaces ?? []) {
      if (iface.name === "lo") continue;
      const a = primaryAddress(iface, 4);
      const internal = facts.nodes.find((v) => v.name === n.name)?.internalIPs[0]?.ip;
      if (a && internal && a.local.value === internal.value) {
        out.push({
          cidr: a.cidr,
          why: `the node subnet of ${n.name} (${iface.name}, ${a.source.file}:${a.source.line})`,
        });
      }
    }
  }
  if (out.length === 0) {
    for (const n of facts.nodes) {
      for (const ip of n.internalIPs) {
        out.push({ cidr: parseCidr(formatIp(ip.ip)), why: `the InternalIP of ${n.name}` });
      }
    }
  }
  return out;
}

function configEntries(intent: AgentIntent): { text: string; cidr?: Cidr; source?: SourceRef }[] {
  return (intent.config.nonMasqueradeCIDRs ?? []).map((e) => {
    const r = goParseCidr(e.text);
    return {
      text: e.text,
      ...("ok" in r ? { cidr: r.ok.cidr } : {}),
      ...(e.source ? { source: e.source } : {}),
    };
  });
}

/** A config holding only the list; the agent's defaults apply to every other key. */
function freshConfigText(list: readonly string[]): string {
  return `nonMasqueradeCIDRs:\n${list.map((c) => `  - ${c}`).join("\n")}\nmasqLinkLocal: false\nresyncInterval: 60s\n`;
}

/** The agent matches keys case-insensitively (encoding/json), so every spelling is the key. */
const isListKey = (k: unknown) => typeof k === "string" && k.toLowerCase() === "nonmasqueradecidrs";

/**
 * Rewrites the `nonMasqueradeCIDRs` of a config text, keeping every other key and comment, and
 * JSON as JSON (the agent reads a file that starts with `{` as JSON). A text that cannot be read
 * (or is not a mapping) is replaced by a fresh config: `rewritten` then says false.
 */
export function rewriteConfigTextChecked(
  text: string | undefined,
  list: readonly string[],
): { text: string; rewritten: boolean } {
  if (text === undefined || text.trim() === "")
    return { text: freshConfigText(list), rewritten: true };
  if (text.trim().startsWith("{")) {
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch {
      return { text: freshConfigText(list), rewritten: false };
    }
    if (typeof obj !== "object" || obj === null || Array.isArray(obj))
      return { text: freshConfigText(list), rewritten: false };
    const rec = obj as Record<string, unknown>;
    const keys = Object.keys(rec).filter(isListKey);
    for (const k of keys.slice(1)) delete rec[k];
    rec[keys[0] ?? "nonMasqueradeCIDRs"] = [...list];
    return { text: `${JSON.stringify(rec, null, 2)}\n`, rewritten: true };
  }
  const doc = parseDocument(text, { uniqueKeys: false });
  if (doc.errors.length > 0 || !isMap(doc.contents))
    return { text: freshConfigText(list), rewritten: false };
  const keys = doc.contents.items
    .map((i) => (isScalar(i.key) ? i.key.value : i.key))
    .filter(isListKey);
  for (const k of keys.slice(1)) doc.delete(k);
  doc.set(keys[0] ?? "nonMasqueradeCIDRs", doc.createNode([...list]));
  return { text: doc.toString({ lineWidth: 0 }), rewritten: true };
}

/** {@link rewriteConfigTextChecked}, text only. */
export function rewriteConfigText(text: string | undefined, list: readonly string[]): string {
  return rewriteConfigTextChecked(text, list).text;
}

function stripServerFields(raw: Record<string, unknown>): Record<string, unknown> {
  const meta = { ...((raw["metadata"] as Record<string, unknown>) ?? {}) };
  for (const k of [
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
  ]) {
    delete meta[k];
  }
  const ann = meta["annotations"] as Record<string, unknown> | undefined;
  if (ann && "kubectl.kubernetes.io/last-applied-configuration" in ann) {
    const rest = { ...ann };
    delete rest["kubectl.kubernetes.io/last-applied-configuration"];
    if (Object.keys(rest).length === 0) delete meta["annotations"];
    else meta["annotations"] = rest;
  }
  return {
    apiVersion: raw["apiVersion"] ?? "v1",
    kind: "ConfigMap",
    metadata: meta,
    data: raw["data"],
  };
}

function configMapYaml(obj: Record<string, unknown>): string {
  return new Document(obj).toString({ lineWidth: 0, blockQuote: "literal" });
}

function siteDiff(
  site: RemoteSite,
  routesAdd: readonly string[],
  selAdd: readonly string[],
  allowAdd: readonly { readonly name: string; readonly add: readonly string[] }[],
): string[] {
  const lines = [`# ${site.source.file}`];
  const list = (
    name: string,
    indent: string,
    before: readonly string[],
    add: readonly string[],
  ) => {
    if (add.length === 0) return;
    lines.push(`${indent}${name}:`);
    for (const b of before) lines.push(`  ${indent}  - ${b}`);
    for (const a of add) lines.push(`+ ${indent}  - ${a}`);
  };
  list(
    "routesBack",
    "",
    (site.routesBack ?? []).map((r) => formatCidr(r.cidr)),
    routesAdd,
  );
  if (site.vpn) {
    if (selAdd.length > 0) lines.push("vpn:");
    list(
      "localTrafficSelectors",
      "  ",
      (site.vpn.localTrafficSelectors ?? []).map((r) => formatCidr(r.cidr)),
      selAdd,
    );
  }
  if (allowAdd.length > 0) lines.push("allowlists:");
  for (const a of allowAdd) {
    const al = site.allowlists.find((x) => x.name === a.name);
    lines.push(`  - name: ${a.name}`);
    list(
      "sources",
      "    ",
      (al?.sources ?? []).map((r) => formatCidr(r.cidr)),
      a.add,
    );
  }
  return lines;
}

const TRADEOFF = [
  {
    aspect: "what the far side sees",
    narrow: "one node address per node: easy to allowlist, hides which pod sent what",
    keepPodIdentity: "the pod's own address end to end: attribution per pod",
  },
  {
    aspect: "scope of the change",
    narrow: "cluster-wide: every destination removed from the list now sees node addresses",
    keepPodIdentity:
      "the far side: return routes, VPN traffic selectors and firewalls learn the pod range",
  },
  {
    aspect: "who must act",
    narrow: "the cluster team (one ConfigMap)",
    keepPodIdentity: "the network team on the far side (routers, VPN, firewalls)",
  },
  {
    aspect: "what fails silently afterwards",
    narrow: "logs, allowlists and firewall rules that name pod addresses",
    keepPodIdentity: "nothing on the cluster side; every device in the path must carry a new range",
  },
];

export function planMasquerade(snap: Snapshot, opts: MasqueradePlanOptions): MasqueradePlan {
  const diagnostics: Diagnostic[] = [];
  const missing: Missing[] = [];
  const intent = readAgentIntent(snap.objects);
  const facts = clusterFacts(snap.objects);
  const { sites, diagnostics: siteDiags } = readSites(snap);
  diagnostics.push(...intent.diagnostics, ...siteDiags);
  if (intent.error && intent.error.stage === "validate") {
    diagnostics.push({
      code: "PLAN_CURRENT_CONFIG_REFUSED",
      severity: "warning",
      message: `the agent refuses the current config (${intent.error.message}) and keeps the one it ran with before (the defaults, if it started with this ConfigMap); the plan starts from those, and the new config replaces the refused list`,
      ...(intent.error.source ? { source: intent.error.source } : {}),
    });
  }
  // The pod range: given, or the cluster CIDR a component states, or the nodes' ranges merged.
  const stated = clusterPodRange(snap.objects);
  let podRanges: readonly Cidr[];
  let podRangeWhy: string;
  if (opts.podRange && opts.podRange.length > 0) {
    podRanges = mergeCidrs(opts.podRange);
    podRangeWhy = "the pod range (--pod-range)";
  } else if (stated && stated.cidrs.length > 0) {
    podRanges = mergeCidrs([...stated.cidrs, ...facts.podRanges]);
    podRangeWhy = `the cluster's pod range (${stated.what}, ${stated.source.file}:${stated.source.line})`;
  } else {
    podRanges = facts.podRanges;
    podRangeWhy = "the pod ranges of the nodes in the snapshot";
    if (podRanges.length > 0) {
      diagnostics.push({
        code: "PLAN_POD_RANGE_FROM_NODES",
        severity: "warning",
        message: `the cluster's whole pod range is not in the snapshot, so the plan keeps only the nodes' ranges (${podRanges.map(formatCidr).join(", ")}); nodes added later get ranges outside it and their pods' traffic would be masqueraded. Give --pod-range CIDR (GKE: gcloud container clusters describe CLUSTER --format='value(clusterIpv4Cidr)'), or add kube-proxy's ConfigMap to cluster/`,
      });
      missing.push({
        file: "cluster/kube-proxy.yaml",
        would_decide:
          "the cluster's whole pod range (clusterCIDR), rather than the ranges of the nodes that exist today",
        command: "kubectl -n kube-system get configmap kube-proxy -o yaml",
      });
    }
  }
  if (podRanges.length === 0) {
    throw new PlanError(
      `${snap.name}: the pod range is not known: no Node in cluster/*.yaml has spec.podCIDR(s) (kubectl get nodes -o yaml > cluster/nodes.yaml), or give --pod-range CIDR`,
    );
  }
  const targets = chooseDestinations(
    opts.dest ? { dest: opts.dest } : {},
    sites,
    snap.probes,
    facts,
  ).list;
  if (targets.length === 0) {
    throw new PlanError(
      `${snap.name}: no destination to plan for: give --dest IP[:PORT], or describe the far side in remote/*.yaml`,
    );
  }
  for (const t of targets) {
    if (podRanges.some((r) => contains(r, t.ip))) {
      throw new PlanError(
        `--dest ${formatIp(t.ip)} is inside the pod range: pod-to-pod traffic is never masqueraded by this fix`,
      );
    }
  }
  const current = configEntries(intent);
  const destinations = targets.map((t) => {
    const ex = isExempt(intent.config, t.ip, intent.flags);
    const entry = ex.exempt && ex.reason === "non-masquerade-cidr" ? ex.entry : undefined;
    return {
      ip: formatIp(t.ip),
      ...(t.port ? { port: t.port } : {}),
      exemptToday: ex.exempt,
      ...(entry ? { exemptBy: entry.text } : {}),
      ...(entry?.source ? { exemptBySource: entry.source } : {}),
    };
  });
  const destBlocks = targets.map((t) => parseCidr(formatIp(t.ip)));

  // narrow: the pod ranges, plus in-cluster blocks the old list already covered
  const keep: { cidr: Cidr; why: string }[] = podRanges.map((c) => ({
    cidr: c,
    why: `${podRangeWhy}: pod-to-pod traffic keeps pod addresses, as Kubernetes networking requires`,
  }));
  const oldCidrs = current.flatMap((e) => (e.cidr ? [e.cidr] : []));
  for (const s of nodeSubnets(snap, facts)) {
    if (oldCidrs.some((c) => contains(c, s.cidr)) && !keep.some((k) => contains(k.cidr, s.cidr))) {
      keep.push({
        cidr: s.cidr,
        why: `${s.why}: pods talking to node addresses (hostNetwork pods, the kubelet) keep their pod source, as today`,
      });
    }
  }
  const merged = excludeCidrs(mergeCidrs(keep.map((k) => k.cidr)), destBlocks);
  const newList: KeptBlock[] = merged.map((c) => ({
    cidr: formatCidr(c),
    why: keep.find((k) => overlaps(k.cidr, c))?.why ?? "in-cluster",
  }));
  // IPv6 entries stay as they are: this plan narrows the IPv4 list
  for (const e of current) {
    if (e.cidr?.family === 6) newList.push({ cidr: e.text, why: "IPv6 entry, unchanged" });
  }
  const dropped = current
    .filter((e) => e.cidr?.family !== 6 && !newList.some((n) => n.cidr === e.text))
    .map((e) => ({
      text: e.text,
      ...(e.source ? { source: e.source } : {}),
      why: destBlocks.some((d) => e.cidr && contains(e.cidr, ipOf(d)))
        ? `covers ${destBlocks
            .filter((d) => e.cidr && contains(e.cidr, ipOf(d)))
            .map((d) => formatIp(ipOf(d)))
            .join(", ")}, which must be masqueraded`
        : "no in-cluster address in the snapshot needs it",
    }));

  const nowMasqueraded = excludeCidrs(
    oldCidrs.filter((c) => c.family === 4),
    merged,
  ).map(formatCidr);

  const cmText =
    typeof (intent.configMap?.raw["data"] as Record<string, unknown> | undefined)?.["config"] ===
    "string"
      ? ((intent.configMap!.raw["data"] as Record<string, unknown>)["config"] as string)
      : undefined;
  const rewrite = rewriteConfigTextChecked(
    cmText,
    newList.map((n) => n.cidr),
  );
  const newConfigText = rewrite.text;
  if (!rewrite.rewritten) {
    diagnostics.push({
      code: "PLAN_CONFIG_REPLACED",
      severity: "warning",
      message: `the current config cannot be read${intent.error ? ` (${intent.error.message})` : ""}, so the new one is written from scratch: the new list, and the agent's defaults for every other key`,
      ...(intent.error?.source ? { source: intent.error.source } : {}),
    });
  }
  // Validated the way the agent reads its file: decode the new text, then its validation; the
  // decoded list must be the planned one (a rewrite that lost or added an entry is a bug here).
  const decodedNew = decodeMasqConfig(newConfigText, {
    nomasqAllReservedRanges: intent.flags.nomasqAllReservedRanges,
  });
  let validationError: string | undefined;
  let newConfig = intent.config;
  if ("error" in decodedNew) validationError = decodedNew.error.message;
  else {
    newConfig = decodedNew.config;
    validationError = validateMasqConfig(decodedNew.config, intent.flags)?.message;
    const got = (decodedNew.config.nonMasqueradeCIDRs ?? []).map((e) => e.text).join(",");
    if (validationError === undefined && got !== newList.map((n) => n.cidr).join(","))
      validationError = `the new config decodes to the list [${got}], not the planned one`;
  }
  const base = intent.configMap
    ? stripServerFields(intent.configMap.raw as Record<string, unknown>)
    : {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "ip-masq-agent", namespace: "kube-system" },
        data: {},
      };
  const newCm = configMapYaml({
    ...base,
    data: { ...((base["data"] as object) ?? {}), config: newConfigText },
  });
  const previousCm = intent.configMap
    ? configMapYaml(stripServerFields(intent.configMap.raw as Record<string, unknown>))
    : undefined;

  const expected = expectedAgentChain(newConfig, intent.flags, {
    family: 4,
    toPorts: intent.toPorts,
  });
  const expectedRules = expected ? agentSavedLines(expected) : [];
  const coverage = agentCoverage(facts, intent);
  const pools = new Map<string, { nodes: string[]; reached: boolean; why: string }>();
  for (const n of coverage.nodes) {
    const pool = n.pool ?? `node/${n.node}`;
    const reached =
      n.scheduled !== false && (n.agentPod !== undefined || n.scheduled === undefined);
    const why =
      n.scheduled === false
        ? `the DaemonSet does not run here: ${n.reason ?? "scheduling"}`
        : n.agentPod
          ? `agent pod ${n.agentPod.name} runs here`
          : n.scheduled === undefined
            ? "no DaemonSet in the snapshot: cannot tell whether an agent runs here"
            : "the DaemonSet should run here, but no agent pod is running";
    const p = pools.get(pool) ?? { nodes: [], reached: true, why };
    p.nodes.push(n.node);
    if (!reached) {
      p.reached = false;
      p.why = why;
    }
    pools.set(pool, p);
  }

  // what names pod addresses and will silently stop matching
  const changed = excludeCidrs(
    oldCidrs.filter((c) => c.family === 4),
    merged,
  );
  const namesPodAddresses: PodAddressReference[] = [];
  for (const s of sites) {
    for (const a of s.allowlists) {
      const podSources = a.sources.filter((x) => podRanges.some((p) => overlaps(p, x.cidr)));
      const affected =
        a.destinations.length === 0 ||
        a.destinations.some((d) => changed.some((c) => overlaps(c, d.cidr)));
      for (const src of podSources) {
        if (!affected) continue;
        namesPodAddresses.push({
          what: `allowlist ${a.name} of ${s.name}`,
          file: src.source.file,
          line: src.source.line,
          ...(src.source.text ? { text: src.source.text } : {}),
          consequence: `admits ${formatCidr(src.cidr)} (pod addresses); after the change the requests arrive from node addresses and stop matching`,
        });
      }
    }
    for (const r of s.routesBack ?? []) {
      if (podRanges.some((p) => overlaps(p, r.cidr))) {
        namesPodAddresses.push({
          what: `return route of ${s.name}`,
          file: r.source.file,
          line: r.source.line,
          ...(r.source.text ? { text: r.source.text } : {}),
          consequence:
            "routes pod addresses back; harmless afterwards, but no longer used for the destinations that now see node addresses",
        });
      }
    }
  }
  for (const o of snap.objects) {
    if (o.kind !== "NetworkPolicy") continue;
    const np = readNetworkPolicy(o).value;
    if (!np) continue;
    const raw = o.raw as {
      spec?: {
        ingress?: { from?: { ipBlock?: { cidr?: string } }[] }[];
        egress?: { to?: { ipBlock?: { cidr?: string } }[] }[];
      };
    };
    const visit = (
      dir: "ingress" | "egress",
      rules: { from?: unknown[]; to?: unknown[] }[] | undefined,
    ) => {
      (rules ?? []).forEach((rule, i) => {
        const peers = ((dir === "ingress" ? rule.from : rule.to) ?? []) as {
          ipBlock?: { cidr?: string };
        }[];
        peers.forEach((peer, j) => {
          const text = peer.ipBlock?.cidr;
          if (!text) return;
          const r = goParseCidr(text);
          if (!("ok" in r) || !podRanges.some((p) => overlaps(p, r.ok.cidr))) return;
          const ref =
            o.locate(["spec", dir, i, dir === "ingress" ? "from" : "to", j, "ipBlock", "cidr"]) ??
            o.source;
          namesPodAddresses.push({
            what: `NetworkPolicy ${o.namespace ?? "default"}/${o.name} ${dir} ipBlock`,
            file: ref.file,
            line: ref.line,
            ...(ref.text ? { text: ref.text } : {}),
            consequence:
              "names pod addresses in an ipBlock; traffic that is now masqueraded carries a node address instead",
          });
        });
      });
    };
    visit("ingress", raw.spec?.ingress as never);
    visit("egress", raw.spec?.egress as never);
  }

  // keep-pod-identity: what the far side must learn
  const siteChanges: SiteChange[] = [];
  for (const s of sites) {
    if (!targets.some((t) => s.prefixes.some((p) => contains(p.cidr, t.ip)))) continue;
    const routesAdd = excludeCidrs(
      mergeCidrs(podRanges),
      (s.routesBack ?? []).map((r) => r.cidr),
    ).map(formatCidr);
    const selAdd = s.vpn?.localTrafficSelectors
      ? excludeCidrs(
          mergeCidrs(podRanges),
          s.vpn.localTrafficSelectors.map((r) => r.cidr),
        ).map(formatCidr)
      : [];
    // firewall scope: an allowlist toward the destination that names sources admits pods too
    const allowAdd = s.allowlists
      .filter(
        (a) =>
          a.sources.length > 0 &&
          (a.destinations.length === 0 ||
            a.destinations.some((d) => targets.some((t) => contains(d.cidr, t.ip)))),
      )
      .map((a) => ({
        name: a.name,
        add: excludeCidrs(
          mergeCidrs(podRanges),
          a.sources.map((x) => x.cidr),
        ).map(formatCidr),
      }))
      .filter((a) => a.add.length > 0);
    siteChanges.push({
      site: s.name,
      file: s.source.file,
      routesBackAdd: routesAdd,
      selectorsAdd: selAdd,
      allowlistSourcesAdd: allowAdd,
      diff: siteDiff(s, routesAdd, selAdd, allowAdd),
    });
  }
  if (sites.length === 0) {
    missing.push({
      file: "remote/<site>.yaml",
      would_decide:
        "which far-side allowlists and routes name pod addresses, and what keep-pod-identity must change there",
    });
  }

  // "10.0.0.0/8 (apart from 10.4.0.0/14)": per dropped or shrunk entry, what stays exempt inside it
  const changedText = current
    .filter((e) => e.cidr?.family === 4)
    .flatMap((e) => {
      const kept = merged.filter((m) => e.cidr && contains(e.cidr, m));
      if (
        kept.length === 1 &&
        e.cidr &&
        kept[0]!.start === e.cidr.start &&
        kept[0]!.end === e.cidr.end
      )
        return [];
      return [kept.length ? `${e.text} (apart from ${kept.map(formatCidr).join(", ")})` : e.text];
    });
  const destText = destinations.map((d) => `${d.ip}${d.port ? `:${d.port}` : ""}`).join(", ");
  const announcement =
    opts.strategy === "narrow"
      ? `Behaviour change, cluster-wide: traffic from pods to ${changedText.length ? changedText.join(", ") : destText} will leave with the node's address instead of the pod's. ` +
        "Logs, allowlists and firewall rules on the far side that name pod addresses will stop matching, silently. Announce it as a behaviour change, not as a bug fix."
      : `No change in the cluster: pods keep their own addresses toward ${destText}. The far side must route ${podRanges.map(formatCidr).join(", ")} back and carry it in the VPN's traffic selectors; its firewalls see pod addresses.`;
  const dir = opts.fileDir ? `${opts.fileDir.replace(/\/+$/, "")}/` : "";
  const file = `${dir}ip-masq-agent.new.yaml`;
  const rbFile = `${dir}ip-masq-agent.previous.yaml`;
  // conntrack takes one address or CIDR per -s: the first pod range (the whole range, usually)
  const podRangeText = formatCidr(podRanges[0]!);
  const nodeCheck = `iptables-save -t nat | grep -E '${intent.flags.masqChain}'   # on every node: compare with the expected rules`;
  const checks = [
    "kubectl -n kube-system get pods -l k8s-app=ip-masq-agent -o wide   # an agent on every node that runs affected pods",
    `kubectl -n kube-system logs -l k8s-app=ip-masq-agent --tail=20 | grep -i 'error syncing'   # must print nothing`,
    nodeCheck,
    "# the agent re-reads its file every resyncInterval once the kubelet refreshes the mounted ConfigMap (about 1-2 minutes); no restart is needed",
    `conntrack -L -s ${podRangeText} -d ${destinations[0]?.ip ?? "<DEST>"}   # on every node: connections opened before the change keep their pod source until they expire`,
    `conntrack -D -s ${podRangeText} -d ${destinations[0]?.ip ?? "<DEST>"}   # to end them now (the applications reconnect, with the node address)`,
    `tcpdump -ni any host ${destinations[0]?.ip ?? "<DEST>"}   # on the node: a fresh request must show the node address, and a reply`,
    "podpath verify <before-snapshot> <after-snapshot>" +
      (destinations[0] ? ` --dest ${destText.split(", ")[0]}` : ""),
  ];
  // the rollback is confirmed the same way, with the roles of pod and node address swapped
  const rollbackChecks = [
    checks[0]!,
    checks[1]!,
    nodeCheck.replace("compare with the expected rules", "the previous rules are back"),
    checks[3]!,
    `conntrack -L -s ${podRangeText} -d ${destinations[0]?.ip ?? "<DEST>"}   # on every node: connections opened while the change was in force keep the node address until they expire`,
    `conntrack -D -s ${podRangeText} -d ${destinations[0]?.ip ?? "<DEST>"}   # to end them now (the applications reconnect, with their pod address)`,
    `tcpdump -ni any host ${destinations[0]?.ip ?? "<DEST>"}   # on the node: a fresh request shows the pod address again`,
    "podpath verify <after-snapshot> <rolled-back-snapshot>" +
      (destinations[0] ? ` --dest ${destText.split(", ")[0]}` : ""),
  ];
  return {
    schemaVersion: 1,
    tool: "podpath",
    question: "plan masquerade",
    snapshot: snap.name,
    strategy: opts.strategy,
    podRanges: podRanges.map(formatCidr),
    destinations,
    current: current.map((c) => ({ text: c.text, ...(c.source ? { source: c.source } : {}) })),
    ...(opts.strategy === "narrow"
      ? {
          narrow: {
            newList,
            dropped,
            ...(validationError ? { validationError } : {}),
            newConfigMap: newCm,
            newConfigMapFile: file,
            apply: [`kubectl apply -f ${file}`],
            expectedRules,
            checks,
          },
        }
      : { keepPodIdentity: { sites: siteChanges } }),
    impact: {
      announcement,
      nowMasqueraded: opts.strategy === "narrow" ? nowMasqueraded : [],
      namesPodAddresses: opts.strategy === "narrow" ? namesPodAddresses : [],
    },
    coverage: [...pools].map(([pool, p]) => ({
      pool,
      nodes: p.nodes,
      reached: p.reached,
      why: p.why,
    })),
    tradeoff: TRADEOFF,
    rollback: {
      ...(previousCm ? { previousConfigMap: previousCm } : {}),
      file: rbFile,
      apply: previousCm
        ? [`kubectl apply -f ${rbFile}`]
        : [
            "kubectl -n kube-system delete configmap ip-masq-agent   # there was none before: the agent returns to its defaults",
          ],
      checks: rollbackChecks,
    },
    missing,
    diagnostics,
  };
}
