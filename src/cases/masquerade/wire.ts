/**
 * @module cases/masquerade/wire — the captures of a snapshot, read as conversations and judged
 * against the cluster's pod and node addresses: which source address left toward the destination,
 * and whether replies came back (`wire-findings.ts` decides the findings).
 */
import { parseCaptureMeta } from "../../capture/capture-meta.ts";
import { conversations } from "../../capture/conversations.ts";
import { readCapture } from "../../capture/read-capture.ts";
import type { Diagnostic, Finding } from "../../model/types.ts";
import type { Ip } from "../../net/cidr.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { TracedDestination } from "./destinations.ts";
import type { ClusterFacts } from "./facts.ts";
import { ownerWireWording, SOURCE_OWNERS, type SourceOwnerCase } from "./owners/index.ts";
import { hostAddress } from "./sources.ts";
import { type WireCapture, wireFindings } from "./wire-findings.ts";

export async function readWireCaptures(
  snap: Snapshot,
  diagnostics: Diagnostic[],
  host?: Ip,
): Promise<WireCapture[]> {
  const out: WireCapture[] = [];
  for (const c of snap.captures) {
    let meta: WireCapture["meta"];
    if (c.metaFile) {
      const m = parseCaptureMeta(snap.source.readText(c.metaFile), c.metaFile);
      diagnostics.push(...m.diagnostics);
      meta = {
        ...(m.value.pointText ? { point: m.value.pointText } : {}),
        ...(m.value.phase ? { phase: m.value.phase } : {}),
      };
    }
    const input = snap.source.diskPath(c.file) ?? snap.source.readBytes(c.file);
    const stream = readCapture(input, { file: c.file });
    try {
      const summary = await conversations(stream, { file: c.file, ...(host ? { host } : {}) });
      out.push({ file: c.file, ...(meta ? { meta } : {}), conversations: summary.conversations });
    } catch (e) {
      diagnostics.push({
        code: "CAPTURE_UNREADABLE",
        severity: "error",
        message: `${c.file} could not be read: ${(e as Error).message}`,
        source: { file: c.file, line: 0 },
      });
    }
    diagnostics.push(...stream.diagnostics);
  }
  return out;
}

export async function wireQuestion(
  snap: Snapshot,
  facts: ClusterFacts,
  targets: readonly TracedDestination[],
  diagnostics: Diagnostic[],
  owners: readonly SourceOwnerCase[] = SOURCE_OWNERS,
): Promise<{ findings: Finding[]; captures: readonly WireCapture[] }> {
  if (snap.captures.length === 0) return { findings: [], captures: [] };
  // With one destination, only its conversations are kept (a whole node's capture can hold tens
  // of thousands).
  const captures = await readWireCaptures(
    snap,
    diagnostics,
    targets.length === 1 ? targets[0]!.ip : undefined,
  );
  const nodeAddresses: Ip[] = [];
  for (const n of facts.nodes) for (const a of n.internalIPs) nodeAddresses.push(a.ip);
  for (const name of snap.nodes.keys()) {
    const h = hostAddress(snap, facts, name, targets[0]?.ip);
    if (h && !nodeAddresses.some((x) => x.value === h.ip.value)) nodeAddresses.push(h.ip);
  }
  const podIps = facts.pods.filter((p) => !p.hostNetwork).flatMap((p) => p.podIPs.map((x) => x.ip));
  const findings: Finding[] = [];
  const ownerWording = ownerWireWording(snap, owners);
  const dests = targets.length > 0 ? targets : [undefined];
  for (const t of dests) {
    findings.push(
      ...wireFindings({
        captures,
        podCidrs: facts.podRanges,
        nodeAddresses,
        podIps,
        ...(ownerWording ? { ownerWording } : {}),
        ...(t ? { dest: { ip: t.ip, ...(t.port ? { port: t.port } : {}) } } : {}),
      }),
    );
  }
  return { findings, captures };
}
