/**
 * @module scripts/make-schema.types — the JSON each command prints with `-o json` (or `-o jsonl`),
 * as TypeScript types that scripts/make-schema.mjs turns into docs/schema/*.schema.json. Where a
 * renderer prints a declared type (the Answer, the plans, the change record) the type here is that
 * type, or the object literal the command builds around it; where a renderer builds its object
 * inline and declares it only as `Record<string, unknown>` (capture/render.ts), the shape it builds
 * is written out here, with field types taken from the source types. The e2e test
 * (test/e2e/json-schema.test.ts) validates the real output against the schemas with
 * `additionalProperties: false`, so a renderer that adds, renames or drops a field fails it.
 * bigint fields are described as printed (strings) by make-schema.mjs, not here.
 */

import type { AdmissionPrediction } from "../src/agents/pod-security/predict.ts";
import type { Conversation, TcpSummary } from "../src/capture/conversation.ts";
import type { Direction, EthernetHeader, Tunnel } from "../src/capture/packet.ts";
import type { CaptureFormat } from "../src/capture/read-capture.ts";
import type { MasqueradePlan } from "../src/cases/masquerade/plan.ts";
import type { ReplayLine } from "../src/cases/masquerade/plan-render.ts";
import type { ChangeRecord } from "../src/cases/masquerade/proof.ts";
import type { VpnPlan } from "../src/cases/vpn/plan.ts";
import type { VpnChangeRecord } from "../src/cases/vpn/proof.ts";
import type { NatTrace } from "../src/iptables/nat-trace.ts";
import type { CollectReport } from "../src/live/collect-types.ts";
import type { ProbeRun } from "../src/live/probe.ts";
import type { Answer } from "../src/model/answer.ts";
import type { Diagnostic } from "../src/model/types.ts";
import type { AdmissionCheckResult, AdmissionRejection } from "../src/questions/admission.ts";

/** `podpath diagnose SNAPSHOT -o json` (report/json.ts renderJson). */
export type DiagnoseOutput = Answer;

/** `podpath plan masquerade SNAPSHOT -o json`: the plan and the kernel replay of its rules. */
export interface PlanMasqueradeOutput extends MasqueradePlan {
  /** Empty without `--replay`. */
  readonly replay: readonly ReplayLine[];
}

/** `podpath plan vpn SNAPSHOT --pod NS/NAME -o json`. */
export interface PlanVpnOutput extends VpnPlan {
  readonly tool: "podpath";
  readonly question: "plan vpn";
}

/**
 * `podpath verify BEFORE AFTER -o json`: the change record of the one case the snapshots hold
 * (masquerade or VPN), or the records of several in registry order.
 */
export type VerifyOutput = ChangeRecord | VpnChangeRecord | (ChangeRecord | VpnChangeRecord)[];

/** An IP protocol by name (`tcp`, `udp`, `icmp`, ...) or, when podpath has no name for it, its number. */
export type ProtocolJson = string | number;

/** One decoded frame of `capture read -o jsonl` (capture/render.ts frameJson). */
export interface FrameJson {
  readonly ether?: EthernetHeader;
  readonly arp?: {
    readonly op: number;
    readonly senderIp?: string;
    readonly senderName?: string;
    readonly targetIp?: string;
    readonly targetName?: string;
  };
  readonly src?: string;
  /** A host name tcpdump printed (text without -n) where it has no address. */
  readonly srcName?: string;
  readonly dst?: string;
  readonly dstName?: string;
  readonly protocol?: ProtocolJson;
  readonly ttl?: number;
  readonly ipId?: number;
  readonly srcPort?: number;
  /** A service name podpath does not know: the port stays unknown. */
  readonly srcService?: string;
  readonly dstPort?: number;
  readonly dstService?: string;
  /** tcpdump's flag letters, e.g. `S.` */
  readonly tcpFlags?: string;
  readonly seq?: number;
  readonly icmpType?: number;
  readonly icmpCode?: number;
  readonly quoted?: {
    readonly src: string;
    readonly dst: string;
    readonly srcPort?: number;
    readonly dstPort?: number;
  };
  readonly esp?: { readonly spi: number; readonly seq: number };
  readonly encapsulation?: {
    readonly kind: Tunnel["kind"];
    readonly vni: number;
    readonly inner: FrameJson;
  };
}

/** `podpath capture read FILE -o jsonl`: one such object per line (capture/render.ts packetJson). */
export interface CaptureReadPacket extends FrameJson {
  /** 1-based position in the capture. */
  readonly index: number;
  readonly time: string;
  /** Nanoseconds, as a decimal string (a bigint). */
  readonly timeNs: string;
  readonly interface?: string;
  readonly direction?: Direction;
  readonly length?: number;
  readonly capturedLength?: number;
  readonly offset?: number;
  readonly line?: number;
}

/** A packet a conversation points at (capture/render.ts conversationJson). */
export interface PacketRefJson {
  readonly file: string;
  readonly line?: number;
  readonly packet: number;
  readonly time: string;
}

export interface EndpointJson {
  readonly ip: string;
  readonly port?: number;
}

/** One conversation of `capture flows -o json` (capture/render.ts conversationJson). */
export interface ConversationJson {
  readonly protocol: Conversation["protocol"];
  readonly initiator: EndpointJson;
  readonly responder: EndpointJson;
  readonly sourceOnWire: string;
  readonly initiatorBasis: Conversation["initiatorBasis"];
  readonly packetsFromInitiator: number;
  readonly packetsFromResponder: number;
  readonly replied: boolean;
  readonly tcp?: TcpSummary;
  readonly icmpErrors: readonly {
    readonly from: string;
    readonly type: number;
    readonly code?: number;
    readonly what: string;
    readonly at: PacketRefJson;
  }[];
  readonly first: PacketRefJson;
  readonly firstReply?: PacketRefJson;
  readonly seenOn: readonly string[];
  readonly tunnel?: { readonly kind: string; readonly vni: number };
  readonly verdict: string;
}

/** `podpath capture flows FILE -o json` (cli/commands/capture-flows.ts). */
export interface CaptureFlowsOutput {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "capture flows";
  readonly file: string;
  /** Absent when nothing in the file was recognised. */
  readonly format?: CaptureFormat;
  /** Where the capture was taken, from the metadata file beside it. */
  readonly point?: string;
  readonly phase?: string;
  readonly packets: number;
  readonly conversations: readonly ConversationJson[];
  readonly assumptions: readonly string[];
  readonly diagnostics: readonly Diagnostic[];
}

/** `podpath capture flows FILE --host IP --talkers -o json` (cli/commands/capture-flows.ts). */
export interface CaptureTalkersOutput {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "capture talkers";
  readonly file: string;
  readonly host: string;
  readonly records: number;
  readonly rows: readonly { readonly count: number; readonly src: string; readonly dst: string }[];
  readonly senders: readonly {
    readonly address: string;
    readonly sent: number;
    readonly replies: number;
    readonly replied: boolean;
  }[];
}

/**
 * `podpath ipmasq config FILE -o json` (agents/ip-masq-agent/config.ts renderMasqConfigJson):
 * the config as the agent's json.Marshal prints it, or the error the agent stops with.
 */
export type IpmasqConfigOutput = IpmasqConfig | IpmasqConfigError;

export interface IpmasqConfig {
  /** null when the config sets it to null. */
  readonly nonMasqueradeCIDRs: readonly string[] | null;
  /** @asType integer */
  readonly cidrLimit: number;
  readonly masqLinkLocal: boolean;
  readonly masqLinkLocalIPv6: boolean;
  /** A Go duration, e.g. `1m0s`. */
  readonly resyncInterval: string;
}

export interface IpmasqConfigError {
  readonly error: string;
  readonly file?: string;
  readonly line?: number;
}

/** The rules for one family in `ipmasq rules -o json` (cli/commands/ipmasq-rules.ts). */
export interface IpmasqFamilyRules {
  /** What the agent hands to iptables-restore. */
  readonly restoreInput: string;
  /** The POSTROUTING jump it adds. */
  readonly postroutingJump: string;
  /** The lines iptables-save then prints. */
  readonly savedLines: readonly string[];
}

/** `podpath ipmasq rules FILE -o json`: ip6tables only with --enable-ipv6. */
export interface IpmasqRulesOutput {
  readonly iptables?: IpmasqFamilyRules;
  readonly ip6tables?: IpmasqFamilyRules;
}

/** `podpath admission check MANIFEST -o json` (cli/commands/admission-check.ts). */
export interface AdmissionCheckOutput {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "admission-check";
  readonly results: readonly AdmissionResult[];
  /** Objects the API server rejects (strict decoding) with no pod spec to predict for. */
  readonly rejected?: readonly AdmissionRejection[];
  readonly diagnostics: readonly Diagnostic[];
}

export interface AdmissionResult {
  readonly object: {
    readonly kind: string;
    readonly namespace?: string;
    readonly name: string;
    readonly file: string;
    readonly line: number;
  };
  readonly allowed: AdmissionPrediction["allowed"];
  /** Where the level came from (a flag, the Namespace's labels, the default). */
  readonly policySource: string;
  /** The API server's strict field validation, when it rejects the object before admission. */
  readonly strictDecoding?: AdmissionCheckResult["strictDecoding"];
  /** The kubelet refuses its config: it admits no pod. */
  readonly kubeletRefusal?: AdmissionCheckResult["kubeletRefusal"];
  readonly podSecurity: AdmissionPrediction["podSecurity"];
  readonly apiValidation: AdmissionPrediction["apiValidation"];
  readonly kubelet: AdmissionPrediction["kubelet"];
  readonly autopilot?: NonNullable<AdmissionPrediction["autopilot"]>;
}

/** `podpath probe ... -o json` (cli/commands/probe.ts). */
export interface ProbeOutput {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "probe";
  readonly stoppedAt: NonNullable<ProbeRun["stoppedAt"]> | null;
  readonly steps: ProbeRun["steps"];
  /** The transcript, one line per item. */
  readonly transcript: readonly string[];
}

/** `podpath lab replay --iptables FILE --flow SRC->DST -o json` (cli/commands/lab-replay.ts). */
export interface LabReplayOutput {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "lab-replay";
  readonly flow: string;
  /** What the kernel put on the wire; null where it shows nothing. */
  readonly kernel: {
    readonly source: string | null;
    /** @asType integer */
    readonly sport: number | null;
    readonly destination: string | null;
    /** @asType integer */
    readonly dport: number | null;
    readonly conntrack: string | null;
    readonly error: string | null;
  };
  /** What podpath's nat evaluator predicts. */
  readonly predicted: {
    readonly decision: NatTrace["decision"];
    readonly summary: string;
    readonly rule: { readonly file: string; readonly line: number; readonly text?: string } | null;
  };
  /** null: the evaluator cannot decide this flow. */
  readonly agree: boolean | null;
  readonly why: string;
}

/**
 * `podpath capture read FILE -o json`: every packet in one document (cli/commands/capture-read.ts),
 * each as one line of `-o jsonl` writes it.
 */
export interface CaptureReadOutput {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "capture read";
  readonly file: string;
  readonly format?: CaptureFormat;
  readonly packets: readonly CaptureReadPacket[];
  readonly diagnostics: readonly Diagnostic[];
}

/** `podpath collect --out DIR -o json`: the collect report (cli/commands/collect.ts). */
export interface CollectOutput extends CollectReport {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "collect";
  /** The snapshot folder written. */
  readonly snapshot: string;
}

/** `podpath lab run SCENARIO --out DIR -o json` (cli/commands/lab.ts). */
export interface LabRunOutput {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "lab run";
  /** The snapshot folder written (with `--out`). */
  readonly snapshot?: string;
  readonly scenario: string;
  /** The files written. */
  readonly files: readonly string[];
  /** What the scenario saw, one line each. */
  readonly summary: readonly string[];
}
