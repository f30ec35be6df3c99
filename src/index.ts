/**
 * @module podpath — the public API. Explicit named exports only: anything not exported here is
 * internal and may change.
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
  defaultMasqConfig,
  type MasqConfig,
  type NonMasqEntry,
  renderMasqConfigJson,
  type SyncOutcome,
  syncMasqConfig,
  type ValidationError,
  validateMasqConfig,
} from "./agents/ip-masq-agent/config.ts";
export {
  type AgentConfigInput,
  readAgentConfigInput,
} from "./agents/ip-masq-agent/config-source.ts";
export {
  type AgentContainerArgs,
  agentArgsFromDaemonSet,
} from "./agents/ip-masq-agent/daemonset-args.ts";
export {
  type AgentChainComparison,
  type AgentChainDrift,
  compareAgentChain,
} from "./agents/ip-masq-agent/drift.ts";
export { type Exemption, isExempt } from "./agents/ip-masq-agent/exempt.ts";
export {
  type AgentFlags,
  type AgentFlagsResult,
  agentFlagsFromArgs,
  DEFAULT_AGENT_FLAGS,
} from "./agents/ip-masq-agent/flags.ts";
export {
  type AgentChain,
  type AgentRule,
  agentRestoreInput,
  expectedAgentChain,
  type RestoreProblem,
  restoreProblems,
} from "./agents/ip-masq-agent/rules.ts";
export {
  chartMasqueradeRule,
  type OpenvpnChartValues,
  readChartValues,
  recognizeChart,
} from "./agents/openvpn/chart.ts";
export {
  clientPools,
  type OpenvpnServerConfig,
  parseOpenvpnConfig,
} from "./agents/openvpn/server-config.ts";
export {
  type AdmissionResponse,
  admit,
  checkPodSecurity,
  type PodSecurityResult,
  type Violation,
} from "./agents/pod-security/evaluate.ts";
export { type AutopilotVerdict, checkAutopilot } from "./agents/pod-security/gke-autopilot.ts";
export {
  configzCommand,
  type KubeletSysctlConfig,
  readKubeletSysctlConfig,
} from "./agents/pod-security/kubelet-config.ts";
export {
  kubeletAdmitSysctls,
  kubeletSafeSysctls,
  normalizeSysctlName,
  sysctlNamespace,
} from "./agents/pod-security/kubelet-sysctls.ts";
export {
  type Level,
  type NamespacePolicy,
  type PolicyVersion,
  parseVersion,
  policyFromLabels,
} from "./agents/pod-security/policy-level.ts";
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
  ConversationTracker,
  conversations,
} from "./capture/conversations.ts";
export { type HostTalkers, hostTalkers } from "./capture/host-talkers.ts";
export type { Direction, Frame, Packet, Transport } from "./capture/packet.ts";
export {
  type CaptureFormat,
  type CaptureStream,
  type ReadCaptureOptions,
  readCapture,
} from "./capture/read-capture.ts";
export { parseTcpdumpLines } from "./capture/tcpdump-text.ts";
export {
  type Destination,
  type FromEndpoint,
  parseDestination,
  parseFrom,
} from "./cases/endpoints.ts";
export {
  type MasqueradePlan,
  type MasqueradePlanOptions,
  planMasquerade,
} from "./cases/masquerade/plan.ts";
export { type ChangeRecord, verifyChange } from "./cases/masquerade/proof.ts";
export {
  type WireCapture,
  type WireInput,
  wireFindings,
} from "./cases/masquerade/wire-findings.ts";
export { analyzeVpn, type VpnAnswer, vpnFindings } from "./cases/vpn/analyze.ts";
export {
  type PodEvidence,
  resolveVpn,
  type VpnContext,
  type VpnInput,
} from "./cases/vpn/input.ts";
export { type PlanOptions, planVpn, type Strategy, type VpnPlan } from "./cases/vpn/plan.ts";
export { type CaptureMeta, type CapturePoint, readCaptureMeta } from "./evidence/capture-meta.ts";
export {
  type ConntrackEntry,
  type ConntrackTuple,
  readConntrack,
  translatedDestination,
  translatedSource,
} from "./evidence/conntrack.ts";
export {
  type InterfaceAddress,
  type NetInterface,
  primaryAddress,
  readIpAddr,
} from "./evidence/ip-addr.ts";
export {
  lookupRoute,
  type Route,
  type RouteType,
  readIpRoute,
  routeDestination,
} from "./evidence/ip-route.ts";
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
export { renderDump, renderRule } from "./iptables/render.ts";
export { type ParseIptablesOptions, parseIptablesSave } from "./iptables/save-parser.ts";
export { quoteSaveString, tokenize } from "./iptables/tokenize.ts";
export { type ClusterSource, openCluster } from "./k8s/cluster.ts";
export { type DaemonSetMatch, nodeMatchesDaemonSet } from "./k8s/daemonset-scheduling.ts";
export {
  type ConfigMapView,
  type DaemonSetView,
  type NodeView,
  type PodView,
  readConfigMap,
  readDaemonSet,
  readNamespace,
  readNetworkPolicy,
  readNode,
  readPod,
  readService,
  type ServiceView,
} from "./k8s/objects.ts";
export { type FlowSpec, formatFlowSpec, parseFlowSpec } from "./lab/flow-spec.ts";
export {
  createLab,
  type ExecResult,
  type Lab,
  labUnavailableReason,
  type Namespace,
} from "./lab/netns.ts";
export { ReplayError, type ReplayOptions, type ReplayResult, replayFlow } from "./lab/replay.ts";
export { collectSnapshot } from "./live/collect.ts";
export type { CollectOptions, CollectReport } from "./live/collect-types.ts";
export { folderWriter } from "./live/collect-writer.ts";
export { type ProbeRun, type ProbeTargets, probeOutward, realSystem } from "./live/probe.ts";
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
export { type ConnectionSet, formatConnections } from "./policy/connection-set.ts";
export { connectivityList, renderConnlist } from "./policy/connlist.ts";
export {
  connectionsBetween,
  type EvaluateOptions,
  evaluateNetworkPolicies,
  type FlowQuery,
  type PolicyVerdict,
} from "./policy/evaluate.ts";
export {
  type IpBlockMatch,
  ipBlockMatches,
  type TranslationEffect,
  translationEffect,
} from "./policy/ip-block-match.ts";
export { type NetworkPolicy, readNetworkPolicies } from "./policy/network-policy.ts";
export { buildPolicyWorld, type Endpoint, type PolicyWorld } from "./policy/policy-world.ts";
export { type DiagnoseOptions, diagnose } from "./questions/diagnose.ts";
export { renderJson } from "./report/json.ts";
export { renderMarkdown } from "./report/markdown.ts";
export { renderText } from "./report/text.ts";
export { loadSnapshot, type Snapshot } from "./snapshot/load.ts";
export { openSnapshot, type SnapshotSource } from "./snapshot/source.ts";
