/**
 * @module cases/masquerade/proof-case — the masquerade case's part of `verify`: whether two
 * snapshots hold anything this case compares (the ip-masq-agent ConfigMap, DaemonSet or pods, its
 * chain in a node's nat table, a far side), and if so the change record of `proof.ts` with its
 * renderings, unchanged.
 */
import type { Snapshot } from "../../snapshot/load.ts";
import type { CaseProof, ProofOptions } from "../case.ts";
import { masqueradeModel } from "./model.ts";
import { isIntendedVerdict, verifyChange } from "./proof.ts";
import {
  changeRecordDocument,
  renderChangeRecordMarkdown,
  renderChangeRecordText,
} from "./proof-render.ts";

/** Does this snapshot hold anything of the SNAT exception list, its agent or a far side? */
export function holdsMasquerade(snap: Snapshot): boolean {
  const { intent, facts, farSites } = masqueradeModel(snap);
  if (intent.configMap || intent.daemonSet) return true;
  const agentPod = facts.pods.some(
    (p) => p.namespace === "kube-system" && p.labels["k8s-app"] === "ip-masq-agent",
  );
  if (agentPod) return true;
  const chain = intent.flags.masqChain;
  for (const n of snap.nodes.values()) {
    if (n.iptables?.tables.get("nat")?.chains.has(chain)) return true;
  }
  return farSites.sites.length > 0;
}

/** The change record, or undefined when neither snapshot holds anything this case compares. */
export async function masqueradeProof(
  before: Snapshot,
  after: Snapshot,
  opts: ProofOptions,
): Promise<CaseProof | undefined> {
  if (!holdsMasquerade(before) && !holdsMasquerade(after)) return undefined;
  const record = await verifyChange(before, after, opts.dest ? { dest: opts.dest } : {});
  return {
    case: "masquerade",
    verdict: isIntendedVerdict(record) ? "intended" : "not-intended",
    proofLine: record.proof,
    record,
    document: changeRecordDocument(record),
    text: renderChangeRecordText(record),
    markdown: renderChangeRecordMarkdown(record),
  };
}
