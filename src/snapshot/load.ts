/**
 * @module snapshot/load — reads every file of a snapshot with the reader its place in the layout
 * calls for, and gathers the results and every reader's diagnostics in one typed value. A file that
 * cannot be read becomes a diagnostic; the rest of the snapshot is still used. Captures are only
 * located here (they can be large); questions stream them.
 */

import { type ConntrackEntry, readConntrack } from "../evidence/conntrack.ts";
import { type NetInterface, readIpAddr } from "../evidence/ip-addr.ts";
import { type Route, readIpRoute } from "../evidence/ip-route.ts";
import { type IpRule, readIpRule } from "../evidence/ip-rule.ts";
import { type KubeObject, readKubeObjects } from "../evidence/kube-objects.ts";
import { type ProbeTranscript, parseProbeFile } from "../evidence/probes.ts";
import { readSysctl, type SysctlValues } from "../evidence/sysctl.ts";
import type { IptablesDump } from "../iptables/dump.ts";
import { type IpsetDump, parseIpset } from "../iptables/ipset-parser.ts";
import { readIptablesText } from "../iptables/read-iptables-text.ts";
import type { Diagnostic } from "../model/types.ts";
import { activeRules } from "../nftables/active-rules.ts";
import type { NftRuleset } from "../nftables/model.ts";
import { readNftRuleset } from "../nftables/read-ruleset.ts";
import { streamClusterFile } from "./kube-list-stream.ts";
import { type Artifact, classifyPath, type OwnerArtifact } from "./layout.ts";
import { decodeText, type SnapshotSource } from "./source.ts";

/** What one host (a node, or a pod's network namespace) showed. */
export interface HostEvidence {
  /** The files read, by artifact: snapshot-relative paths for citing. */
  readonly files: Partial<Record<Artifact, string>>;
  iptables?: IptablesDump;
  ip6tables?: IptablesDump;
  sysctl?: SysctlValues;
  routes?: Route[];
  interfaces?: NetInterface[];
  conntrack?: ConntrackEntry[];
  /** `ip rule` (nodes/<node>/ip-rule.txt): the routing policy database. */
  ipRules?: IpRule[];
  /** `ip -6 route show table all` (nodes/<node>/ip6-route.txt): the IPv6 routes. */
  routes6?: Route[];
  /** `ip -6 rule` (nodes/<node>/ip6-rule.txt): the IPv6 routing policy database. */
  ipRules6?: IpRule[];
  /** `ipset save` / `ipset list` (nodes/<node>/ipset.txt), read once here for every owner. */
  ipsets?: IpsetDump;
  /** `nft list ruleset` / `nft -j list ruleset` (nodes/<node>/nft-ruleset.txt), read once here. */
  nftables?: NftRuleset;
  /**
   * Which reading answers the nat question when the node shows nftables rules (set at load with
   * a NFT_ACTIVE_RULES diagnostic saying what the kernel runs): see nftables/active-rules.
   */
  natFrom?: "iptables" | "nftables" | "none";
  /**
   * Owner evidence as text, in the order read (several CNI config files may be there); its
   * owner's reader parses it (cases/masquerade/owners) and cites `file`.
   */
  readonly texts?: OwnerText[];
}

/** One owner file of a host, unparsed. */
export interface OwnerText {
  readonly artifact: OwnerArtifact;
  readonly file: string;
  readonly text: string;
}

/** The host's owner files of one kind, in the order read. */
export function ownerTexts(host: HostEvidence | undefined, artifact: OwnerArtifact): OwnerText[] {
  return (host?.texts ?? []).filter((t) => t.artifact === artifact);
}

export interface NodeEvidence extends HostEvidence {
  readonly name: string;
}

export interface PodEvidence extends HostEvidence {
  readonly namespace: string;
  readonly name: string;
  /** OpenVPN server configs found beside the pod's other files. */
  readonly vpnConfigs: { readonly file: string; readonly text: string }[];
}

export interface CaptureRef {
  readonly name: string;
  /** Snapshot-relative path, for citing. */
  readonly file: string;
  readonly format: "pcap" | "pcapng" | "text";
  /** The `captures/<name>.yaml` beside it, as text (read by the wire question). */
  readonly metaFile?: string;
}

export interface Snapshot {
  readonly name: string;
  readonly source: SnapshotSource;
  readonly objects: KubeObject[];
  readonly nodes: Map<string, NodeEvidence>;
  /** Keyed `namespace/name`. */
  readonly pods: Map<string, PodEvidence>;
  readonly captures: CaptureRef[];
  /** Paths of `remote/*.yaml`. */
  readonly remoteFiles: string[];
  readonly probes: ProbeTranscript[];
  /** Paths of kubelet configuration files. */
  readonly kubeletConfigFiles: string[];
  /** Paths of `helm get values` files (read by the VPN checks). */
  readonly chartValuesFiles: string[];
  readonly diagnostics: Diagnostic[];
  /** Files that fit no place in the layout. */
  readonly unknownFiles: string[];
}

/** A file's diagnostics beyond these are counted, not listed (a dump of garbage has one per line). */
export const MAX_DIAGNOSTICS_PER_FILE = 100;

/**
 * Appends a reader's diagnostics for one file: the first {@link MAX_DIAGNOSTICS_PER_FILE}, then one
 * that counts the rest (never spread onto the stack: a file can have hundreds of thousands).
 */
export function appendDiagnostics(
  into: Diagnostic[],
  from: readonly Diagnostic[],
  file: string,
): void {
  const n = Math.min(from.length, MAX_DIAGNOSTICS_PER_FILE);
  for (let i = 0; i < n; i++) into.push(from[i]!);
  if (from.length > n) {
    const rest = from.slice(n);
    const worst = rest.some((d) => d.severity === "error")
      ? "error"
      : rest.some((d) => d.severity === "warning")
        ? "warning"
        : "info";
    into.push({
      code: "TOO_MANY_DIAGNOSTICS",
      severity: worst,
      message: `${file}: ${rest.length} more problems like these (from line ${rest[0]?.source?.line ?? "?"} on) are not listed; the first ${n} are`,
      source: { file, line: rest[0]?.source?.line ?? 0 },
    });
  }
}

/** Per-file size limit for text evidence; larger files are refused with a diagnostic. */
const MAX_TEXT_BYTES = 512 * 1024 * 1024;

function readHostArtifact(
  host: HostEvidence,
  artifact: Artifact,
  rel: string,
  text: string,
  diagnostics: Diagnostic[],
): void {
  (host.files as Partial<Record<Artifact, string>>)[artifact] = rel;
  switch (artifact) {
    case "iptables-save": {
      // any form a person pastes: iptables-save, -S, -L (with prompts and warnings)
      const r = readIptablesText(text, rel, { family: 4 });
      if (r.value) host.iptables = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      return;
    }
    case "ip6tables-save": {
      const r = readIptablesText(text, rel, { family: 6 });
      if (r.value) host.ip6tables = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      return;
    }
    case "sysctl": {
      const r = readSysctl(text, rel);
      host.sysctl = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      return;
    }
    case "ip-route": {
      const r = readIpRoute(text, rel);
      host.routes = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      return;
    }
    case "ip6-route": {
      const r = readIpRoute(text, rel, { family: 6 });
      host.routes6 = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      return;
    }
    case "ip6-rule": {
      const r = readIpRule(text, rel);
      host.ipRules6 = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      return;
    }
    case "ip-addr": {
      const r = readIpAddr(text, rel);
      host.interfaces = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      return;
    }
    case "conntrack": {
      const r = readConntrack(text, rel);
      host.conntrack = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      return;
    }
    case "ip-rule": {
      const r = readIpRule(text, rel);
      host.ipRules = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      return;
    }
    case "ipset": {
      const r = parseIpset(text, rel);
      host.ipsets = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      keepOwnerText(host, artifact, rel, text);
      return;
    }
    case "nft-ruleset": {
      const r = readNftRuleset(text, rel);
      host.nftables = r.value;
      appendDiagnostics(diagnostics, r.diagnostics, rel);
      keepOwnerText(host, artifact, rel, text);
      return;
    }
    default:
      keepOwnerText(host, artifact, rel, text);
      return;
  }
}

/** An owner file kept as text for its owner's reader (and cited by its path). */
function keepOwnerText(host: HostEvidence, artifact: OwnerArtifact, rel: string, text: string) {
  const texts = (host as { texts?: OwnerText[] }).texts ?? [];
  texts.push({ artifact, file: rel, text });
  (host as { texts?: OwnerText[] }).texts = texts;
}

/**
 * One text file of a snapshot; undefined, with a diagnostic naming the file, when it cannot be read
 * or is too large to be evidence.
 */
export function readSnapshotText(
  source: SnapshotSource,
  rel: string,
  diagnostics: Diagnostic[],
): string | undefined {
  const tooLarge = (size: number): undefined => {
    diagnostics.push({
      code: "FILE_TOO_LARGE",
      severity: "error",
      message: `${rel} is ${size} bytes; text evidence over ${MAX_TEXT_BYTES} bytes is not read`,
      source: { file: rel, line: 0 },
    });
    return undefined;
  };
  try {
    if (source.sizeOf) {
      const size = source.sizeOf(rel);
      return size > MAX_TEXT_BYTES ? tooLarge(size) : source.readText(rel);
    }
    const bytes = source.readBytes(rel);
    return bytes.length > MAX_TEXT_BYTES ? tooLarge(bytes.length) : decodeText(bytes);
  } catch (e) {
    diagnostics.push({
      code: "FILE_UNREADABLE",
      severity: "error",
      message: `${rel} could not be read: ${(e as Error).message}`,
      source: { file: rel, line: 0 },
    });
    return undefined;
  }
}

/** Reads a snapshot. Never throws for bad content: every problem is a diagnostic. */
export function loadSnapshot(source: SnapshotSource): Snapshot {
  const snap: Snapshot = {
    name: source.name,
    source,
    objects: [],
    nodes: new Map(),
    pods: new Map(),
    captures: [],
    remoteFiles: [],
    probes: [],
    kubeletConfigFiles: [],
    chartValuesFiles: [],
    diagnostics: [...source.diagnostics],
    unknownFiles: [],
  };
  const captureMeta = new Map<string, string>();
  for (const rel of source.paths) readSnapshotFile(snap, source, rel, captureMeta);
  for (let i = 0; i < snap.captures.length; i++) {
    const c = snap.captures[i]!;
    const meta = captureMeta.get(c.name);
    if (meta) snap.captures[i] = { ...c, metaFile: meta };
  }
  // a node showing nftables rules: which rules the kernel runs, and which answers the nat question
  for (const node of snap.nodes.values()) {
    if (!node.nftables) continue;
    const nftFile = node.nftables.file;
    const iptFile = node.iptables?.file ?? `nodes/${node.name}/iptables-save.txt`;
    const a = activeRules(node.iptables, node.nftables, iptFile, nftFile);
    node.natFrom = a.nat;
    snap.diagnostics.push(a.diagnostic);
  }
  if (snap.unknownFiles.length > 0) {
    snap.diagnostics.push({
      code: "SNAPSHOT_UNKNOWN_FILES",
      severity: "info",
      message: `not part of the snapshot layout, not read: ${snap.unknownFiles.slice(0, 10).join(", ")}${
        snap.unknownFiles.length > 10 ? ` and ${snap.unknownFiles.length - 10} more` : ""
      }`,
    });
  }
  return snap;
}

/**
 * Reads one file of the snapshot into `snap` by where it lies in the layout; a capture's
 * metadata file is noted in `captureMeta` by the capture's name.
 */
function readSnapshotFile(
  snap: Snapshot,
  source: SnapshotSource,
  rel: string,
  captureMeta: Map<string, string>,
): void {
  const readText = (rel: string) => readSnapshotText(source, rel, snap.diagnostics);
  const role = classifyPath(rel);
  switch (role.kind) {
    case "cluster": {
      // a cluster-sized JSON List is streamed item by item, never held as one text
      const streamed = streamCluster(source, rel, snap.diagnostics);
      if (streamed !== undefined) {
        for (const o of streamed.value) snap.objects.push(o);
        appendDiagnostics(snap.diagnostics, streamed.diagnostics, rel);
        return;
      }
      const text = readText(rel);
      if (text === undefined) return;
      const r = readKubeObjects(text, rel);
      for (const o of r.value) snap.objects.push(o);
      appendDiagnostics(snap.diagnostics, r.diagnostics, rel);
      return;
    }
    case "node": {
      const text = readText(rel);
      if (text === undefined) return;
      let node = snap.nodes.get(role.node);
      if (!node) {
        node = { name: role.node, files: {} };
        snap.nodes.set(role.node, node);
      }
      readHostArtifact(node, role.artifact, rel, text, snap.diagnostics);
      return;
    }
    case "pod": {
      const text = readText(rel);
      if (text === undefined) return;
      const pod = podOf(snap, role.namespace, role.pod);
      readHostArtifact(pod, role.artifact, rel, text, snap.diagnostics);
      return;
    }
    case "vpn-config": {
      const text = readText(rel);
      if (text === undefined || role.namespace === undefined || role.pod === undefined) return;
      podOf(snap, role.namespace, role.pod).vpnConfigs.push({ file: rel, text });
      return;
    }
    case "capture":
      snap.captures.push({ name: role.name, file: rel, format: role.format });
      return;
    case "capture-meta":
      captureMeta.set(role.name, rel);
      return;
    case "remote":
      snap.remoteFiles.push(rel);
      return;
    case "probe": {
      const text = readText(rel);
      if (text === undefined) return;
      const r = parseProbeFile(text, rel);
      snap.probes.push(r.value);
      appendDiagnostics(snap.diagnostics, r.diagnostics, rel);
      return;
    }
    case "kubelet-config":
      snap.kubeletConfigFiles.push(rel);
      return;
    case "chart-values":
      snap.chartValuesFiles.push(rel);
      if (role.namespace !== undefined && role.pod !== undefined)
        podOf(snap, role.namespace, role.pod);
      return;
    case "ignored":
      return;
    case "unknown":
      snap.unknownFiles.push(rel);
      return;
  }
}

/** A big JSON List of cluster/ streamed; undefined when the file is read whole instead. */
function streamCluster(
  source: SnapshotSource,
  rel: string,
  diagnostics: Diagnostic[],
): ReturnType<typeof streamClusterFile> {
  try {
    return streamClusterFile(source, rel);
  } catch (e) {
    diagnostics.push({
      code: "FILE_UNREADABLE",
      severity: "error",
      message: `${rel} could not be read: ${(e as Error).message}`,
      source: { file: rel, line: 0 },
    });
    return { value: [], diagnostics: [] };
  }
}

function podOf(snap: Snapshot, namespace: string, name: string): PodEvidence {
  const key = `${namespace}/${name}`;
  let pod = snap.pods.get(key);
  if (!pod) {
    pod = { namespace, name, files: {}, vpnConfigs: [] };
    snap.pods.set(key, pod);
  }
  return pod;
}

/**
 * True when nothing in the folder fits the layout: the user pointed at something else. A file of
 * the layout that could not be read (its diagnostics name it) is not "nothing".
 */
export function isEmptySnapshot(snap: Snapshot): boolean {
  return (
    !snap.diagnostics.some((d) => d.severity === "error" && d.source !== undefined) &&
    snap.objects.length === 0 &&
    snap.nodes.size === 0 &&
    snap.pods.size === 0 &&
    snap.captures.length === 0 &&
    snap.remoteFiles.length === 0 &&
    snap.probes.length === 0 &&
    snap.kubeletConfigFiles.length === 0 &&
    snap.chartValuesFiles.length === 0
  );
}
