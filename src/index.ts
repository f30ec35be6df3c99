/**
 * @module podpath — the public API: the questions (diagnose, plan masquerade, plan vpn, verify,
 * admission check, ipmasq config and rules, capture reading, collect), the evidence readers and
 * their result types, the nat evaluator and CIDR arithmetic. Explicit named exports only: anything
 * not exported here is internal and may change. `src/index.test.ts` pins the list.
 */

export {
  type AgentView,
  type AgentViewInput,
  agentView,
} from "./agents/ip-masq-agent/agent-view.ts";
export {
  type ConfigError,
  type ConfigFile,
  decodeMasqConfig,
  type MasqConfig,
  type NonMasqEntry,
  renderMasqConfigJson,
  type SyncOutcome,
  type ValidationError,
  validateMasqConfig,
} from "./agents/ip-masq-agent/config.ts";
export type { AgentConfigInput } from "./agents/ip-masq-agent/config-source.ts";
export type { AgentFlags, AgentFlagsResult } from "./agents/ip-masq-agent/flags.ts";
export {
  type AgentChain,
  type AgentRule,
  agentRestoreInput,
  expectedAgentChain,
} from "./agents/ip-masq-agent/rules.ts";
export {
  type KubeletSysctlConfig,
  readKubeletSysctlConfig,
} from "./agents/pod-security/kubelet-config.ts";
export {
  type AdmissionPrediction,
  type Platform,
  type PredictOptions,
  predictAdmission,
} from "./agents/pod-security/predict.ts";
export {
  type Conversation,
  type ConversationOptions,
  type ConversationSummary,
  conversations,
} from "./capture/conversations.ts";
export type { Direction, Frame, Packet, Transport } from "./capture/packet.ts";
export {
  type CaptureFormat,
  type CaptureStream,
  type ReadCaptureOptions,
  readCapture,
} from "./capture/read-capture.ts";
export { parseTcpdumpLines } from "./capture/tcpdump-text.ts";
export type { CaseProof, ProofOptions, ProofVerdict } from "./cases/case.ts";
export {
  type Destination,
  type FromEndpoint,
  parseDestination,
  parseFrom,
} from "./cases/endpoints.ts";
export {
  type MasqueradePlan,
  type MasqueradePlanOptions,
  type MasqueradeStrategy,
  PlanError,
  planMasquerade,
} from "./cases/masquerade/plan.ts";
export { type ChangeRecord, type VerifyOptions, verifyChange } from "./cases/masquerade/proof.ts";
export { analyzeVpn, type VpnAnswer } from "./cases/vpn/analyze.ts";
export type { VpnContext, VpnInput } from "./cases/vpn/input.ts";
export {
  type PlanOptions as VpnPlanOptions,
  planVpn,
  type Strategy as VpnStrategy,
  type VpnPlan,
} from "./cases/vpn/plan.ts";
export { vpnInputFromSnapshot } from "./cases/vpn/snapshot-input.ts";
export { type CaptureMeta, type CapturePoint, readCaptureMeta } from "./evidence/capture-meta.ts";
export {
  type ConntrackEntry,
  type ConntrackTuple,
  readConntrack,
} from "./evidence/conntrack.ts";
export { type InterfaceAddress, type NetInterface, readIpAddr } from "./evidence/ip-addr.ts";
export { lookupRoute, type Route, type RouteType, readIpRoute } from "./evidence/ip-route.ts";
export { type KubeObject, readKubeObjects } from "./evidence/kube-objects.ts";
export {
  type ProbeCommand,
  type ProbeResult,
  type ProbeTranscript,
  parseProbeFile,
  parseProbeJson,
  parseProbeTranscript,
} from "./evidence/probes.ts";
export { type RemoteSite, readRemoteSites } from "./evidence/remote-site.ts";
export { readSysctl, type SysctlEntry, type SysctlValues } from "./evidence/sysctl.ts";
export type {
  Chain as IptablesChain,
  IptablesDump,
  Match as IptablesMatch,
  Rule as IptablesRule,
  Table as IptablesTable,
  TableName as IptablesTableName,
  Target as IptablesTarget,
} from "./iptables/dump.ts";
export { compileNat } from "./iptables/nat-eval.ts";
export type {
  Flow as NatFlow,
  NatContext,
  NatDecision,
  NatEvaluator,
  NatStep,
  NatTrace,
  SourceOut,
} from "./iptables/nat-trace.ts";
export { type ReadIptablesTextOptions, readIptablesText } from "./iptables/read-iptables-text.ts";
export { type ParseIptablesOptions, parseIptablesSave } from "./iptables/save-parser.ts";
export { type ClusterSource, type OpenClusterOptions, openCluster } from "./k8s/cluster.ts";
export { collectSnapshot } from "./live/collect.ts";
export type { CollectOptions, CollectReport, SnapshotWriter } from "./live/collect-types.ts";
export { folderWriter } from "./live/collect-writer.ts";
export type { Answer, PathHop, PathView, Verdict } from "./model/answer.ts";
export type {
  Diagnostic,
  Evidence,
  Finding,
  FindingId,
  Missing,
  Parsed,
  Severity,
  SourceRef,
} from "./model/types.ts";
export {
  type Cidr,
  CidrError,
  contains,
  excludeCidrs,
  type Family,
  formatCidr,
  formatIp,
  type Ip,
  mergeCidrs,
  overlaps,
  parseCidr,
  parseIp,
  tryParseCidr,
  tryParseIp,
} from "./net/cidr.ts";
export { type DiagnoseOptions, diagnose } from "./questions/diagnose.ts";
export { verifySnapshots } from "./questions/verify.ts";
export { renderJson } from "./report/json.ts";
export { renderMarkdown } from "./report/markdown.ts";
export { renderText } from "./report/text.ts";
export { loadSnapshot, type Snapshot } from "./snapshot/load.ts";
export { openSnapshot, type SnapshotSource } from "./snapshot/source.ts";
