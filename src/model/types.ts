/**
 * @module model/types — the shapes every layer shares: where a fact came from (SourceRef), what
 * went wrong while reading (Diagnostic), and what podpath concludes (Finding, Answer).
 */

/** Where a fact was read: a file relative to the snapshot root (or as given), 1-based line. */
export interface SourceRef {
  readonly file: string;
  readonly line: number;
  readonly col?: number;
  /** The line's text (or the relevant part of it), for reports. */
  readonly text?: string;
}

/** A value with the line it was read from. */
export interface Located<T> {
  readonly value: T;
  readonly source: SourceRef;
}

export type Severity = "error" | "warning" | "info";

/**
 * An expected problem with the input: reported, never thrown. Readers keep going after one.
 * `code` is stable and upper-snake-case; tests assert on it.
 */
export interface Diagnostic {
  readonly code: string;
  readonly severity: Severity;
  /** Plain English: what happened and what it means. Names what was expected. */
  readonly message: string;
  readonly source?: SourceRef;
}

/** The result of a reader: a value (possibly partial) and what went wrong on the way. */
export interface Parsed<T> {
  readonly value: T;
  readonly diagnostics: Diagnostic[];
}

/** Finding ids are a public contract (DESIGN.md): add new ones, never rename. */
export const FINDING_IDS = [
  "masq/exempt-destination",
  "masq/intent-rules-drift",
  "masq/agent-missing",
  "masq/config-invalid",
  "masq/no-return-route",
  "masq/wire-pod-source",
  "masq/wire-node-source",
  "masq/reply-missing",
  "masq/ebpf-dataplane",
  "masq/source-undecided",
  "masq/remote-allowlist-rejects",
  "masq/filter-blocks",
  "masq/service-no-endpoints",
  "masq/service-node-rejects",
  "masq/policy-route-elsewhere",
  "vpn/forwarding-disabled",
  "vpn/forwarding-not-durable",
  "vpn/client-pool-unroutable",
  "vpn/policy-source-mismatch",
  "vpn/admission-rejects",
  "vpn/dns-layer",
  "vpn/first-silent-hop",
  "vpn/service-vip-suffices",
  "vpn/destination-not-tunnelled",
  "vpn/tunnel-down",
  "vpn/iroute-unrouted",
  "evidence/unplaced",
] as const;
export type FindingId = (typeof FINDING_IDS)[number];

/** Evidence as it appears in JSON output: file, line, and the line's text. */
export interface Evidence {
  readonly file: string;
  readonly line: number;
  readonly text?: string;
}

/** One conclusion. Every finding cites at least one piece of evidence. */
export interface Finding {
  readonly id: FindingId;
  readonly severity: Severity;
  readonly title: string;
  /** What it is about: `node/NAME`, `pod/NS/NAME`, `pool/NAME`, `flow/SRC->DST`. */
  readonly subject: string;
  readonly explanation: string;
  readonly evidence: readonly Evidence[];
  /** Commands or steps that would take the user further. */
  readonly next: readonly string[];
}

/** Evidence that is absent, and what it would have decided. */
export interface Missing {
  readonly file: string;
  readonly would_decide: string;
  /** The command that collects it. */
  readonly command?: string;
}

export function refToEvidence(ref: SourceRef): Evidence {
  return ref.text === undefined
    ? { file: ref.file, line: ref.line }
    : { file: ref.file, line: ref.line, text: ref.text };
}
