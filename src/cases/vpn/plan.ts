/**
 * @module cases/vpn/plan — the durable fix for forwarding in a VPN pod: per strategy (privileged init
 * container, pod-level `securityContext.sysctls`, the chart's `ipForwardInitContainer` value) a
 * strategic-merge patch, the full patched manifest and, for the chart, a values override; the
 * return-path rule the client pool needs; an admission prediction with the message the user would
 * see; and the check to run after the rollout. Pure.
 */
import { stringify } from "yaml";
import type { KubeletSysctlConfig } from "../../agents/pod-security/kubelet-config.ts";
import {
  type AdmissionPrediction,
  type Platform,
  predictAdmission,
} from "../../agents/pod-security/predict.ts";
import type { KubeObject } from "../../evidence/kube-objects.ts";
import { deleteServerFields } from "../../k8s/server-fields.ts";
import type { Evidence } from "../../model/types.ts";
import { refToEvidence } from "../../model/types.ts";
import { formatCidr, formatIp } from "../../net/cidr.ts";
import { rawWord, sh, whole } from "../../report/shell-quote.ts";
import { type ForwardingSetter, forwardingSetters, IP_FORWARD, podSpecPath } from "./durable.ts";
import { execIn, type VpnContext } from "./input.ts";
import { masqueradeOf } from "./masquerade.ts";

export const STRATEGIES = ["init-container", "pod-sysctls", "chart-value"] as const;
export type Strategy = (typeof STRATEGIES)[number];

export interface AdmissionSummary {
  readonly allowed: "yes" | "no" | "unknown";
  /** The exact messages the user would see, in the order they would meet them. */
  readonly messages: readonly string[];
  /** What would make an "unknown" or "no" pass, and the command that tells. */
  readonly notes: readonly string[];
  readonly prediction: AdmissionPrediction;
}

export interface StrategyPlan {
  readonly strategy: Strategy;
  readonly applicable: boolean;
  readonly whyNot?: string;
  readonly description: string;
  /** Strategic-merge patch for the workload (`kubectl patch --type strategic`). */
  readonly patch?: Readonly<Record<string, unknown>>;
  /** The full manifest after the change. */
  readonly patched?: Readonly<Record<string, unknown>>;
  /** For the chart: the values override file and the upgrade command. */
  readonly helmValues?: Readonly<Record<string, unknown>>;
  readonly commands: readonly string[];
  readonly admission?: AdmissionSummary;
}

export interface ReturnPathStep {
  readonly needed: boolean;
  readonly explanation: string;
  /** iptables-save form of the rule the pod needs (as the chart's configure.sh writes it). */
  readonly rule?: string;
  readonly command?: string;
  /** The alternative: a route for the pool towards the VPN pod. */
  readonly route?: string;
  readonly evidence: readonly Evidence[];
}

export interface VpnPlan {
  readonly schemaVersion: 1;
  readonly pod: string;
  readonly workload?: { readonly kind: string; readonly name: string; readonly evidence: Evidence };
  readonly forwardingNow?: { readonly value: string; readonly evidence: Evidence };
  readonly alreadySet: readonly {
    readonly kind: string;
    readonly value: string;
    readonly evidence: Evidence;
  }[];
  readonly strategies: readonly StrategyPlan[];
  /** Facts that change what every strategy means (a hostNetwork pod shares the node's namespace). */
  readonly warnings: readonly string[];
  readonly returnPath: ReturnPathStep;
  readonly verify: readonly string[];
}

export interface PlanOptions {
  readonly strategies?: readonly Strategy[];
  readonly kubeletConfig?: KubeletSysctlConfig;
  readonly platform?: Platform;
  readonly kubernetesVersion?: string;
  /** The folder `--write` puts the plan's files in: the commands name them there. */
  readonly fileDir?: string;
}

export { CHART_INIT_CONTAINER } from "./kinds/openvpn.ts";

/** The init container podpath proposes when no chart does it. */
export const INIT_CONTAINER = {
  name: "enable-ip-forward",
  image: "busybox:1.36",
  command: ["sysctl", "-w", `${IP_FORWARD}=1`],
  securityContext: { privileged: true },
} as const;

/** A copy of the object as one would apply it: no status, no server-set metadata. */
function applyable(obj: KubeObject): Record<string, unknown> {
  const copy = structuredClone(obj.raw) as Record<string, unknown>;
  delete copy["status"];
  const meta = copy["metadata"] as Record<string, unknown> | undefined;
  if (meta) {
    deleteServerFields(meta);
    const ann = meta["annotations"] as Record<string, unknown> | undefined;
    if (ann) delete ann["kubectl.kubernetes.io/last-applied-configuration"];
  }
  return copy;
}

function specOf(
  obj: Record<string, unknown>,
  path: readonly (string | number)[],
): Record<string, unknown> {
  let c: Record<string, unknown> = obj;
  for (const p of path) {
    const next = c[p] as Record<string, unknown> | undefined;
    if (next === undefined) {
      const made: Record<string, unknown> = {};
      c[p] = made;
      c = made;
    } else c = next;
  }
  return c;
}

/** Wraps a pod-spec fragment into the workload's shape: `{spec: {template: {spec: …}}}`. */
function nest(
  path: readonly (string | number)[],
  leaf: Record<string, unknown>,
): Record<string, unknown> {
  let out = leaf;
  for (const p of [...path].reverse()) out = { [p]: out };
  return out;
}

function summarize(p: AdmissionPrediction | undefined): AdmissionSummary | undefined {
  if (!p) return undefined;
  const messages: string[] = [];
  const notes: string[] = [];
  if (p.autopilot && !p.autopilot.allowed) messages.push(p.autopilot.message);
  if (!p.apiValidation.allowed) messages.push(p.apiValidation.message);
  if (!p.podSecurity.allowed) messages.push(p.podSecurity.message);
  messages.push(...p.podSecurity.warnings);
  if (p.kubelet.outcome === "SysctlForbidden") messages.push(p.kubelet.message);
  if (p.kubelet.outcome === "unknown") notes.push(p.kubelet.message);
  if (p.kubelet.needs && p.kubelet.outcome !== "ok") notes.push(`needs: ${p.kubelet.needs}`);
  if (p.kubelet.command && p.kubelet.outcome !== "ok") notes.push(`tells: ${p.kubelet.command}`);
  return { allowed: p.allowed, messages, notes, prediction: p };
}

/** GKE Autopilot nodes are named `gk3-…`; GKE Standard `gke-…`. */
export function platformOf(objects: readonly KubeObject[]): Platform {
  const nodes = objects.filter((o) => o.kind === "Node");
  if (
    nodes.some((n) => n.name.startsWith("gk3-") || "cloud.google.com/gke-autopilot" in n.labels)
  ) {
    return "gke-autopilot";
  }
  if (nodes.some((n) => n.name.startsWith("gke-"))) return "gke-standard";
  return "generic";
}

/** What every strategy starts from: the workload, a copy to patch and how to apply a patch. */
interface StrategyBase {
  readonly wl: NonNullable<VpnContext["workload"]>;
  readonly path: readonly (string | number)[];
  /** A fresh applyable copy of the workload; `spec` is its pod spec. */
  readonly patched: Record<string, unknown>;
  readonly spec: Record<string, unknown>;
  readonly isPod: boolean;
  readonly nsArg: string;
  readonly kindArg: string;
  readonly predict: (obj: Record<string, unknown>) => AdmissionPrediction | undefined;
  /** A plan file's name as the commands give it (inside `--write DIR` when there is one). */
  readonly file: (name: string) => string;
  /** The kubelet refuses its config (`file:line: why`): it runs, and so admits, no pod. */
  readonly kubeletRefused: readonly string[];
}

function applyCommands(b: StrategyBase, name: string): string[] {
  const file = b.file(name);
  return b.isPod
    ? [
        whole(sh`kubectl delete ${rawWord(b.nsArg)} ${`pod/${b.wl.name}`}`),
        whole(`kubectl apply -f ${file}`),
      ]
    : [whole(`kubectl patch ${b.kindArg} ${b.nsArg} --type strategic --patch-file ${file}`)];
}

/**
 * A strategy applied as a strategic-merge patch (`patch-STRATEGY.yaml`; a bare Pod is replaced
 * from its patched manifest), with the admission prediction for the patched workload.
 */
function patchPlan(
  b: StrategyBase,
  strategy: "init-container" | "pod-sysctls",
  description: string,
  patch: Record<string, unknown>,
): StrategyPlan {
  return {
    strategy,
    applicable: true,
    description,
    patch,
    patched: b.patched,
    commands: b.isPod
      ? applyCommands(b, `${strategy}-patched.yaml`)
      : applyCommands(b, `patch-${strategy}.yaml`),
    ...admission(b.predict(b.patched), b.kubeletRefused),
  };
}

/** A privileged init container that sets forwarding before the VPN container starts. */
function initContainerPlan(b: StrategyBase): StrategyPlan {
  const { spec, path } = b;
  const inits = Array.isArray(spec["initContainers"]) ? (spec["initContainers"] as unknown[]) : [];
  spec["initContainers"] = [...inits, structuredClone(INIT_CONTAINER)];
  const patch = nest(path, { initContainers: [structuredClone(INIT_CONTAINER)] });
  return patchPlan(
    b,
    "init-container",
    "A privileged init container writes net.ipv4.ip_forward=1 in the pod's network namespace before the VPN container starts (containers of a pod share it). Works on any CNI (it runs after the CNI set the namespace up); Pod Security baseline and restricted reject privileged containers.",
    patch,
  );
}

/** Pod-level `securityContext.sysctls`: the kubelet sets forwarding when it creates the sandbox. */
function podSysctlsPlan(b: StrategyBase): StrategyPlan {
  const { spec, path } = b;
  const sc = (spec["securityContext"] ?? {}) as Record<string, unknown>;
  const existing = (
    Array.isArray(sc["sysctls"]) ? (sc["sysctls"] as { name?: string }[]) : []
  ).filter((x) => x.name !== IP_FORWARD);
  const sysctls = [...existing, { name: IP_FORWARD, value: "1" }];
  spec["securityContext"] = { ...sc, sysctls };
  // sysctls has no merge key: a strategic merge patch replaces the whole list, so it carries all.
  const patch = nest(path, { securityContext: { sysctls } });
  return patchPlan(
    b,
    "pod-sysctls",
    "Pod-level securityContext.sysctls: the kubelet sets net.ipv4.ip_forward=1 when it creates the pod sandbox, with no privileged container. It is an unsafe sysctl: the node's kubelet must allowlist it (allowedUnsafeSysctls), and Pod Security baseline forbids it at every version.",
    patch,
  );
}

/** The tunnel kind's own chart switch (OpenVPN: `ipForwardInitContainer: true`), when it has one. */
function chartValuePlan(b: StrategyBase, ctx: VpnContext): StrategyPlan {
  const { spec, patched } = b;
  const sw = ctx.kind.chartSwitch;
  if ("whyNot" in sw) {
    return {
      strategy: "chart-value",
      applicable: false,
      whyNot: sw.whyNot,
      description: "",
      commands: [],
    };
  }
  const name = sw.initContainer["name"];
  const inits = (
    Array.isArray(spec["initContainers"]) ? (spec["initContainers"] as { name?: string }[]) : []
  ).filter((c) => c.name !== name);
  spec["initContainers"] = [structuredClone(sw.initContainer), ...inits];
  return {
    strategy: "chart-value",
    applicable: true,
    description: sw.description,
    helmValues: sw.helmValues,
    patched,
    commands: sw.commands(b.nsArg, b.file("values-ip-forward.yaml")),
    ...admission(b.predict(patched), b.kubeletRefused),
  };
}

/** One strategy's plan: not applicable without the workload's manifest. */
function strategyPlan(
  s: Strategy,
  ctx: VpnContext,
  base: Omit<StrategyBase, "wl" | "path" | "patched" | "spec" | "isPod">,
): StrategyPlan {
  const wl = ctx.workload;
  if (!wl) {
    return {
      strategy: s,
      applicable: false,
      whyNot: `the snapshot holds no manifest for ${ctx.namespace}/${ctx.name} (cluster/*.yaml: kubectl get deploy,pod ${base.nsArg} -o yaml)`,
      description: "",
      commands: [],
    };
  }
  const path = podSpecPath(wl.kind);
  const patched = applyable(wl);
  const b: StrategyBase = {
    ...base,
    wl,
    path,
    patched,
    spec: specOf(patched, path),
    isPod: wl.kind === "Pod",
  };
  if (s === "init-container") return initContainerPlan(b);
  if (s === "pod-sysctls") return podSysctlsPlan(b);
  return chartValuePlan(b, ctx);
}

/** Facts that change what every strategy means: a hostNetwork pod shares the node's namespace. */
function hostNetworkWarnings(wl: VpnContext["workload"]): string[] {
  if (!wl) return [];
  const spec = podSpecPath(wl.kind).reduce<unknown>(
    (c, k) => (c as Record<string | number, unknown> | undefined)?.[k],
    wl.raw,
  ) as Record<string, unknown> | undefined;
  if (spec?.["hostNetwork"] !== true) return [];
  return [
    `${wl.kind} ${wl.name} uses hostNetwork: its network namespace is the node's, so net.ipv4.ip_forward there is the node's own setting. An init container would change forwarding for the whole node, and pod-level sysctls for net.* are invalid with hostNetwork. Fix it on the node (sysctl.d or the node pool's system config), or drop hostNetwork.`,
  ];
}

/** Forwarding is already set when the pod starts: the strategy adds nothing. */
function alreadyDone(s: Strategy, setters: readonly ForwardingSetter[]): StrategyPlan {
  const by = setters.map((f) => `${f.kind} (${f.value}, ${f.source.file}:${f.source.line})`);
  return {
    strategy: s,
    applicable: false,
    whyNot: `nothing to add: forwarding is already set when the pod starts, by ${by.join("; ")}`,
    description: "",
    commands: [],
  };
}

/** The label selector of a controller's pods (`spec.selector.matchLabels`), as `-l` takes it. */
function selectorOf(wl: VpnContext["workload"]): string | undefined {
  const sel = (wl?.raw["spec"] as { selector?: unknown } | undefined)?.selector;
  const match =
    typeof sel === "object" && sel !== null
      ? ((sel as { matchLabels?: unknown }).matchLabels ?? (wl?.kind === "Job" ? undefined : sel))
      : undefined;
  if (typeof match !== "object" || match === null) return undefined;
  const pairs = Object.entries(match as Record<string, unknown>).filter(
    ([, v]) => typeof v === "string",
  );
  return pairs.length > 0 ? pairs.map(([k, v]) => `${k}=${String(v)}`).join(",") : undefined;
}

/** What `kubectl exec` names: the pod when the snapshot has it, else its controller by kind. */
function execTarget(ctx: VpnContext): { namespace: string; name: string } {
  const wl = ctx.workload;
  if (ctx.pod || !wl || wl.kind === "Pod") return ctx;
  return { namespace: ctx.namespace, name: `${wl.kind.toLowerCase()}/${wl.name}` };
}

/**
 * The checks after the rollout: the controller finished rolling out, the NEW pods (by the
 * controller's selector, not by the old pod's `pod-template-hash`) forward, every hop answers.
 */
function verifyCommands(ctx: VpnContext, wl: VpnContext["workload"], kindArg: string): string[] {
  const ns = sh`-n ${ctx.namespace}`;
  const selector = selectorOf(wl);
  const rolls = wl !== undefined && ["Deployment", "StatefulSet", "DaemonSet"].includes(wl.kind);
  const out: string[] = [];
  if (rolls) out.push(whole(`kubectl ${ns} rollout status ${kindArg}`));
  else out.push(whole(`kubectl ${ns} wait --for=condition=Ready ${kindArg} --timeout=120s`));
  if (selector)
    out.push(whole(sh`kubectl ${rawWord(ns)} get pods -l ${selector}   # the new pod: NEW_POD`));
  const pod =
    wl?.kind === "Pod" || !selector
      ? { namespace: ctx.namespace, name: wl?.name ?? ctx.name }
      : { namespace: ctx.namespace, name: "NEW_POD" };
  out.push(
    `${execIn(pod, `sysctl ${IP_FORWARD}`)}   # must print "${IP_FORWARD} = 1"${pod.name === "NEW_POD" ? " in the NEW pod" : ""}`,
    `podpath probe --peer ${ctx.peer ? formatIp(ctx.peer.value) : "PEER"} --pod-ip POD_IP --service-ip SERVICE_IP   # from a VPN client: every hop answers`,
  );
  return out;
}

/**
 * The plan for one VPN pod.
 * @example planVpn(resolveVpn(input)!, objects, { strategies: ["pod-sysctls"] }).strategies[0].admission?.messages
 */
export function planVpn(
  ctx: VpnContext,
  objects: readonly KubeObject[],
  opts: PlanOptions = {},
): VpnPlan {
  const wl = ctx.workload;
  const nsLabels = ctx.namespaceObject?.labels ?? {};
  const platform = opts.platform ?? platformOf(objects);
  const predict = (obj: Record<string, unknown>) =>
    predictAdmission(obj, {
      namespaceLabels: nsLabels,
      platform,
      ...(opts.kubeletConfig ? { kubeletConfig: opts.kubeletConfig } : {}),
      ...(opts.kubernetesVersion ? { version: opts.kubernetesVersion } : {}),
    });
  // names from the snapshot, quoted as shell words where the commands are built
  const kindArg = sh`${wl ? `${wl.kind.toLowerCase()}/${wl.name}` : `pod/${ctx.name}`}`;
  const nsArg = sh`-n ${ctx.namespace}`;
  const kubeletRefused = (opts.kubeletConfig?.refused ?? []).map(
    (r) => `${r.source.file}:${r.source.line}: ${r.message}`,
  );
  const file = (name: string) =>
    sh`${opts.fileDir === undefined ? name : `${opts.fileDir.replace(/\/+$/, "")}/${name}`}`;
  const setters = forwardingSetters(wl, ctx.kind.extraSetters);
  const strategies = (opts.strategies ?? STRATEGIES).map((s) =>
    setters.length > 0
      ? alreadyDone(s, setters)
      : strategyPlan(s, ctx, { nsArg, kindArg, predict, file, kubeletRefused }),
  );
  return {
    schemaVersion: 1,
    pod: `${ctx.namespace}/${ctx.name}`,
    ...(wl
      ? { workload: { kind: wl.kind, name: wl.name, evidence: refToEvidence(wl.source) } }
      : {}),
    ...forwardingNow(ctx),
    alreadySet: setters.map((f) => ({
      kind: f.kind,
      value: f.value,
      evidence: refToEvidence(f.source),
    })),
    strategies,
    warnings: hostNetworkWarnings(wl),
    returnPath: returnPath(ctx),
    verify: verifyCommands(ctx, wl, kindArg),
  };
}

function admission(
  p: AdmissionPrediction | undefined,
  kubeletRefused: readonly string[],
): { admission?: AdmissionSummary } {
  const s = summarize(p);
  if (!s) return {};
  if (kubeletRefused.length === 0) return { admission: s };
  const refusal = `the node's kubelet refuses its config and runs no pod: ${kubeletRefused.join("; ")}`;
  return { admission: { ...s, allowed: "no", messages: [...s.messages, refusal] } };
}

function forwardingNow(ctx: VpnContext): Pick<VpnPlan, "forwardingNow"> {
  const e = ctx.evidence?.sysctl?.values.get(IP_FORWARD);
  return e ? { forwardingNow: { value: e.value, evidence: refToEvidence(e.source) } } : {};
}

function returnPath(ctx: VpnContext): ReturnPathStep {
  const pool = ctx.pool;
  if (!pool) {
    return {
      needed: false,
      explanation: `The client pool is unknown (${ctx.kind.poolUnknownWhy}): ${execIn(execTarget(ctx), ctx.kind.readConfig)}`,
      evidence: [],
    };
  }
  const fix = ctx.kind.masqueradeFix(pool.value);
  const rule = fix.rule;
  const dump = ctx.evidence?.iptables;
  const client = { family: pool.value.family, value: pool.value.start + 2n };
  const verdict = dump
    ? masqueradeOf(dump, {
        src: client,
        dst: { family: 4, value: 0x0a000001n },
        outIface: "eth0",
        inIface: ctx.kind.tunnelDevice,
      })
    : undefined;
  if (verdict?.kind === "masqueraded") {
    return {
      needed: false,
      explanation: `The pod already masquerades the client pool ${formatCidr(pool.value)} (${verdict.source.file}:${verdict.source.line}). Policies and allowlists see the pod's address, not the pool.`,
      evidence: [refToEvidence(pool.source), refToEvidence(verdict.source)],
    };
  }
  const script = ctx.kind.scriptMasquerade(pool.value);
  if (script) {
    const where = `${script.at.file}:${script.at.line}`;
    return {
      needed: false,
      explanation:
        `The pod's start script masquerades the client pool ${formatCidr(pool.value)}: ${script.where} runs "${script.text}" (${where}). ` +
        (dump
          ? "The pod's nat table in the snapshot does not show it yet: it is added when the VPN container starts. "
          : "") +
        "Policies and allowlists see the pod's address, not the pool.",
      evidence: [refToEvidence(pool.source), refToEvidence(script.at)],
    };
  }
  return {
    needed: true,
    explanation:
      `Forwarding alone is not enough: the cluster does not route the client pool ${formatCidr(pool.value)}, so replies need ` +
      `the pod to masquerade the pool on eth0${dump ? "" : " (the pod's nat table is not in the snapshot: " + execIn(execTarget(ctx), "iptables-save -t nat") + ")"}, ` +
      `or a route for the pool to the VPN pod in the cluster network. Masquerading makes policies and allowlists see the pod's address.`,
    rule,
    command: fix.command,
    ...(ctx.podIp
      ? {
          route: `ip route add ${formatCidr(pool.value)} via ${formatIp(ctx.podIp.value)}   # on every node / in the VPC, instead of masquerading`,
        }
      : {}),
    evidence: [refToEvidence(pool.source)],
  };
}

/** The plan as YAML documents for files: the patch, the patched manifest, the values override. */
export function planFiles(plan: VpnPlan): { name: string; text: string }[] {
  const out: { name: string; text: string }[] = [];
  for (const s of plan.strategies) {
    if (s.patch)
      out.push({
        name: `patch-${s.strategy}.yaml`,
        text: stringify(s.patch, { aliasDuplicateObjects: false }),
      });
    if (s.patched)
      out.push({
        name: `${s.strategy}-patched.yaml`,
        text: stringify(s.patched, { aliasDuplicateObjects: false }),
      });
    if (s.helmValues)
      out.push({
        name: "values-ip-forward.yaml",
        text: stringify(s.helmValues, { aliasDuplicateObjects: false }),
      });
  }
  return out;
}
