/**
 * @module cases/vpn/input — what the VPN checks read from a snapshot, and the VPN pod's context
 * resolved from it: which pod is the VPN server, its workload manifest, its client pool, its
 * tunnel address and its own address (the source after masquerade).
 */

import {
  type ChartRef,
  type OpenvpnChartValues,
  recognizeChart,
} from "../../agents/openvpn/chart.ts";
import type { OpenvpnClientConfig } from "../../agents/openvpn/client-config.ts";
import type { OpenvpnServerConfig } from "../../agents/openvpn/server-config.ts";
import type { KubeletSysctlConfig } from "../../agents/pod-security/kubelet-config.ts";
import type { NetInterface } from "../../evidence/ip-addr.ts";
import type { Route } from "../../evidence/ip-route.ts";
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { ProbeTranscript } from "../../evidence/probes.ts";
import type { SysctlValues } from "../../evidence/sysctl.ts";
import type { IptablesDump } from "../../iptables/dump.ts";
import { clusterFacts, podRangesOf, serviceAddresses } from "../../k8s/cluster-facts.ts";
import { type PodView, readPod } from "../../k8s/objects.ts";
import { WORKLOAD_KINDS, workloadOf } from "../../k8s/workloads.ts";
import type { Located, SourceRef } from "../../model/types.ts";
import { type Cidr, contains, type Ip } from "../../net/cidr.ts";
import { rawWord, sh, whole } from "../../report/shell-quote.ts";
import { detectKind, viewOf } from "./kinds/index.ts";
import type { KindReading, KindView } from "./kinds/kind.ts";

/** Evidence read inside one pod's network namespace (`pods/<ns>/<pod>/…`). */
export interface VpnPodEvidence {
  readonly namespace: string;
  readonly name: string;
  /** `pods/NS/POD/sysctl`: the pod's own kernel parameters. */
  readonly sysctl?: { readonly file: string; readonly values: SysctlValues };
  /** `pods/NS/POD/iptables-save`. */
  readonly iptables?: IptablesDump;
  readonly ipAddr?: { readonly file: string; readonly interfaces: readonly NetInterface[] };
  readonly ipRoute?: { readonly file: string; readonly routes: readonly Route[] };
  /** `pods/NS/POD/openvpn.conf` (or the chart's ConfigMap key), parsed. */
  readonly openvpn?: OpenvpnServerConfig;
  /** `pods/NS/POD/ccd/<cn>`: the server's client-config-dir files, one per client. */
  readonly openvpnClients?: readonly OpenvpnClientConfig[];
  /** The other tunnel kinds' readings of their own files beside the pod (`cases/vpn/kinds`). */
  readonly readings?: readonly KindReading[];
}

/** One far-side site (`remote/*.yaml`): only what the VPN checks use. */
export interface RemoteSiteInput {
  readonly name: string;
  readonly file: string;
  readonly allowlists: readonly {
    readonly name: string;
    readonly sources: readonly Located<Cidr>[];
  }[];
}

/** The pieces of a loaded snapshot the VPN checks read. Every field is optional evidence. */
export interface VpnInput {
  readonly pods: readonly VpnPodEvidence[];
  /** Everything under `cluster/`. */
  readonly objects: readonly KubeObject[];
  readonly probes: readonly ProbeTranscript[];
  readonly remotes?: readonly RemoteSiteInput[];
  /** Helm values of the VPN release (`helm get values`), when the snapshot has them. */
  readonly chartValues?: readonly OpenvpnChartValues[];
  /** Node routing tables (`nodes/<node>/ip-route`): does the cluster route the client pool? */
  readonly nodeRoutes?: readonly {
    readonly node: string;
    readonly file: string;
    readonly routes: readonly Route[];
  }[];
  readonly kubeletConfigs?: readonly KubeletSysctlConfig[];
  /** `NS/NAME` of the VPN pod, when the user named it; otherwise it is found from the evidence. */
  readonly vpnPod?: string;
}

/** The VPN server pod and what is known about it. */
export interface VpnContext {
  readonly namespace: string;
  readonly name: string;
  readonly evidence?: VpnPodEvidence;
  readonly pod?: KubeObject;
  /** The object whose template makes the pod (Deployment, StatefulSet …), or the Pod itself. */
  readonly workload?: KubeObject;
  readonly namespaceObject?: KubeObject;
  readonly chart?: ChartRef;
  readonly chartValues?: OpenvpnChartValues;
  readonly pool?: Located<Cidr>;
  /** The server's tunnel address (10.8.0.1): the peer clients reach without forwarding. */
  readonly peer?: Located<Ip>;
  /** The pod's own address: what a masqueraded client packet carries as source. */
  readonly podIp?: Located<Ip>;
  /** The pod as its tunnel kind sees it (OpenVPN, WireGuard …): pool, device, fixes. */
  readonly kind: KindView;
}

const isTunnelDevice = (i: NetInterface) => /^(tun|tap|wg)/.test(i.name);

/** The pod's own address: the Pod's status.podIP, else the primary address of its eth0. */
function podIpOf(
  ev: VpnPodEvidence | undefined,
  pod: PodView | undefined,
): Located<Ip> | undefined {
  if (pod?.podIP) return { value: pod.podIP.ip, source: pod.podIP.source };
  const eth = ev?.ipAddr?.interfaces.find((i) => i.name === "eth0" || i.name.startsWith("eth0@"));
  const a = eth?.addresses?.find((x) => x.family === 4 && !x.secondary);
  return a ? { value: a.local, source: a.source } : undefined;
}

/** The VPN pod's `NS/NAME`: the one named, else one with a kind's own config, a tunnel device, or a kind's manifest. */
function vpnPodName(input: VpnInput): { namespace: string; name: string } | undefined {
  if (input.vpnPod) {
    const [namespace, name] = input.vpnPod.includes("/")
      ? input.vpnPod.split("/", 2)
      : ["default", input.vpnPod];
    return namespace === undefined || name === undefined ? undefined : { namespace, name };
  }
  const ev =
    input.pods.find((p) => detectKind(p, [], input)?.strength === "config") ??
    input.pods.find((p) => p.ipAddr?.interfaces.some(isTunnelDevice));
  if (ev) return { namespace: ev.namespace, name: ev.name };
  const byManifest = (o: KubeObject) => detectKind(undefined, [o], input) !== undefined;
  const pod = input.objects.find((o) => o.kind === "Pod" && byManifest(o));
  const wl = input.objects.find((o) => WORKLOAD_KINDS.includes(o.kind) && byManifest(o));
  const chosen = pod ?? wl;
  return chosen ? { namespace: chosen.namespace ?? "default", name: chosen.name } : undefined;
}

/** Picks the VPN pod (see `vpnPodName`) and resolves what is known about it. */
export function resolveVpn(input: VpnInput): VpnContext | undefined {
  const named = vpnPodName(input);
  if (!named) return undefined;
  const { namespace, name } = named;
  const evidence = input.pods.find((p) => p.namespace === namespace && p.name === name);
  const pod = input.objects.find(
    (o) => o.kind === "Pod" && o.name === name && (o.namespace ?? "default") === namespace,
  );
  const workload =
    workloadOf(input.objects, namespace, name, pod?.labels) ??
    pod ??
    input.objects.find(
      (o) =>
        WORKLOAD_KINDS.includes(o.kind) &&
        o.name === name &&
        (o.namespace ?? "default") === namespace,
    );
  const namespaceObject = input.objects.find((o) => o.kind === "Namespace" && o.name === namespace);
  const chart = (workload && recognizeChart(workload)) ?? (pod && recognizeChart(pod));
  const chartValues = input.chartValues?.[0];
  const manifests = [pod, workload].filter((o): o is KubeObject => o !== undefined);
  const kind = viewOf(
    {
      namespace,
      name,
      input,
      ...(evidence ? { evidence } : {}),
      ...(pod ? { pod } : {}),
      ...(workload ? { workload } : {}),
    },
    detectKind(evidence, manifests, input),
  );
  const pool = kind.pool;
  const peer = kind.peer;
  const podIp = podIpOf(evidence, pod ? readPod(pod).value : undefined);
  return {
    namespace,
    name,
    ...(evidence ? { evidence } : {}),
    ...(pod ? { pod } : {}),
    ...(workload ? { workload } : {}),
    ...(namespaceObject ? { namespaceObject } : {}),
    ...(chart ? { chart } : {}),
    ...(chartValues ? { chartValues } : {}),
    ...(pool ? { pool } : {}),
    ...(peer ? { peer } : {}),
    ...(podIp ? { podIp } : {}),
    kind,
  };
}

/**
 * `kubectl exec` reading one thing inside the VPN pod: the namespace and the pod quoted as shell
 * words, `argv` podpath's own words (a value from input in it is quoted by the caller, sh`…`).
 */
export function execIn(ctx: { namespace: string; name: string }, argv: string): string {
  return whole(sh`kubectl exec -n ${ctx.namespace} ${ctx.name} -- ${rawWord(argv)}`);
}

/** The pod address space with its lines: Nodes' pod CIDRs and pods' own addresses. */
export function clusterPodRanges(objects: readonly KubeObject[]): Located<Cidr>[] {
  return podRangesOf(clusterFacts(objects));
}

/** Service cluster IPs with their Service. */
export function serviceIps(
  objects: readonly KubeObject[],
): { ip: Ip; service: KubeObject; source: SourceRef }[] {
  return serviceAddresses(objects).value.map((a) => ({
    ip: a.ip,
    service: a.service.object,
    source: a.source,
  }));
}

export function rangeContaining(
  ranges: readonly Located<Cidr>[],
  ip: Ip,
): Located<Cidr> | undefined {
  return ranges.find((r) => contains(r.value, ip));
}
