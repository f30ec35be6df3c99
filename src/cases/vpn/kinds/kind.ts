/**
 * @module cases/vpn/kinds/kind — the contract of one tunnel kind (OpenVPN, WireGuard, IPsec …)
 * toward the VPN case. The case decides forwarding, durability, the return path and policies on
 * the translated source once; a kind says only what its own evidence shows: that a pod runs it,
 * its client pool and tunnel device, which destinations enter its tunnel, the masquerade its own
 * scripts install, its forwarding switches and fixes, and the findings only it can make.
 *
 * How to add a kind:
 * 1. Readers of the kind's own files in `src/agents/<kind>/` (pure, Diagnostics with file+line).
 * 2. New files beside a pod (`pods/<ns>/<pod>/<file>`): classify them in `snapshot/layout.ts` as
 *    `vpn-config` (additively) so the loader keeps their text; the kind claims them by
 *    {@link TunnelKind.ownsFile} and reads them in {@link TunnelKind.readPod}.
 * 3. `kinds/<kind>.ts` exports a {@link TunnelKind}; one line in `kinds/index.ts` registers it
 *    (order is detection priority between equally strong evidence).
 * 4. Reuse the `vpn/*` finding ids where the meaning is the same (forwarding off, not durable, no
 *    return path, policy on the translated source). Two are kind-neutral and decided by the case
 *    (each id is decided in exactly one file): `vpn/destination-not-tunnelled` from
 *    {@link KindView.tunnelled} and {@link KindView.tunnelledBy} (`cases/vpn/not-tunnelled.ts`),
 *    `vpn/tunnel-down` from {@link KindView.tunnelState} (`cases/vpn/tunnel-down.ts`). A kind gives
 *    their words, never the finding. New ids only for facts of the kind itself, made in
 *    {@link KindView.findings}, listed in `FINDING_IDS` (`model/types.ts`) and the README.
 * 5. Never ask for another kind's files: {@link KindView.configMissing} names the kind's own.
 */

import type { KubeObject } from "../../../evidence/kube-objects.ts";
import type { Diagnostic, Finding, Located, Missing, SourceRef } from "../../../model/types.ts";
import type { Cidr, Ip } from "../../../net/cidr.ts";
import type { ForwardingSetter } from "../durable.ts";
import type { Walk } from "../hops.ts";
import type { VpnInput, VpnPodEvidence } from "../input.ts";
import type { MasqueradeVerdict } from "../masquerade.ts";

/** The tunnel kinds podpath knows. Closed: a new kind adds its id here and in the registry. */
export const TUNNEL_KIND_IDS = ["openvpn", "wireguard", "ipsec"] as const;
export type TunnelKindId = (typeof TUNNEL_KIND_IDS)[number];

/** One VPN file kept beside a pod (`pods/<ns>/<pod>/<file>`), as the snapshot loaded it. */
export interface KindFile {
  readonly file: string;
  readonly text: string;
}

/** What a kind reads for one pod: the files beside it, and the cluster's objects and values. */
export interface KindPodSource {
  readonly namespace: string;
  readonly name: string;
  /** The VPN files beside the pod this kind claimed ({@link TunnelKind.ownsFile}). */
  readonly files: readonly KindFile[];
  readonly objects: readonly KubeObject[];
  /** Helm values files of the snapshot (`helm get values`), any release. */
  readonly values: readonly KindFile[];
  /** No other pod of the snapshot is in this namespace (a namespace's ConfigMap is then its). */
  readonly onlyPodOfNamespace: boolean;
}

/**
 * A kind's reading of one pod's own evidence. The kind's parsed evidence stays inside the
 * closure: only the kind that read it turns it into a {@link KindView}.
 */
export interface KindReading {
  readonly kind: TunnelKindId;
  /** The line that shows this pod runs the kind (its config, its status output). */
  readonly shownBy: SourceRef;
  readonly diagnostics: readonly Diagnostic[];
  readonly view: (ctx: KindContext) => KindView;
}

/** How strongly a pod is shown to run a kind: its own files beat a device name or a manifest. */
export type DetectionStrength = "config" | "device" | "manifest";

export interface Detection {
  readonly kind: TunnelKindId;
  readonly strength: DetectionStrength;
  readonly source?: SourceRef;
}

/** What a kind may look at to tell whether a pod runs it. */
export interface DetectInput {
  readonly evidence?: VpnPodEvidence;
  /** The Pod and the workload whose template makes it. */
  readonly manifests: readonly KubeObject[];
  readonly input: VpnInput;
}

/** The resolved VPN pod as a kind sees it (before the kind adds its own view). */
export interface KindContext {
  readonly namespace: string;
  readonly name: string;
  readonly evidence?: VpnPodEvidence;
  readonly pod?: KubeObject;
  readonly workload?: KubeObject;
  readonly input: VpnInput;
}

/**
 * Which destinations enter the tunnel, as the kind's evidence says: every destination (a default
 * route, `redirect-gateway`, AllowedIPs 0.0.0.0/0), these prefixes only, or unknown.
 */
export type Tunnelled =
  | { readonly kind: "all"; readonly source: SourceRef }
  | { readonly kind: "prefixes"; readonly prefixes: readonly Located<Cidr>[] }
  | { readonly kind: "unknown" };

/**
 * Is the tunnel up at all, by the kind's own status output (`wg show` handshakes, IPsec SAs)?
 * "down" carries the kind's words for `vpn/tunnel-down`; the case gives the id.
 */
export type TunnelState =
  | { readonly kind: "up" }
  | { readonly kind: "unknown" }
  | {
      readonly kind: "down";
      readonly title: string;
      readonly explanation: string;
      readonly evidence: readonly SourceRef[];
      readonly next: readonly string[];
    };

/** Source NAT of the client pool written in the kind's own start scripts (PostUp, configure.sh). */
export interface ScriptMasquerade {
  /** Where it is written, in words: `ConfigMap vpn key configure.sh`, `wg0.conf PostUp`. */
  readonly where: string;
  /** The command as written. */
  readonly text: string;
  readonly at: SourceRef;
}

/** The masquerade fix in the kind's own terms. */
export interface MasqueradeFix {
  /** iptables-save form of the rule (`-A POSTROUTING -s POOL -o eth0 -j MASQUERADE`). */
  readonly rule: string;
  /** The command and where it goes (`PostUp = …` in wg0.conf, the chart's configure.sh). */
  readonly command: string;
  /** The first next step of `vpn/client-pool-unroutable`. */
  readonly next: string;
}

/** The kind's own switch that makes forwarding durable (a chart value), when it has one. */
export interface ChartSwitch {
  readonly description: string;
  readonly helmValues: Readonly<Record<string, unknown>>;
  /** The init container the chart renders for it (put first; one of that name is replaced). */
  readonly initContainer: Readonly<Record<string, unknown>>;
  /** `helm upgrade …` commands, given `-n NS` and the values file's path. */
  readonly commands: (nsArg: string, valuesFile: string) => readonly string[];
}

/** What the case asks a kind's findings hook, once the generic checks have run. */
export interface KindFindingsInput {
  readonly walk: Walk;
  readonly subject: string;
  readonly forwarding: "on" | "off" | "unknown";
  readonly masquerade?: MasqueradeVerdict;
}

/** One pod as one kind sees it: everything the case needs from the kind. */
export interface KindView {
  readonly kind: TunnelKindId;
  readonly displayName: string;
  /** The client pool (the server's config, then values and env, then the device's address). */
  readonly pool?: Located<Cidr>;
  /** The server's own tunnel address: the peer clients reach without forwarding. */
  readonly peer?: Located<Ip>;
  /** The device client packets arrive on (tun0, wg0): the nat question's in-interface. */
  readonly tunnelDevice: string;
  readonly tunnelled: Tunnelled;
  /** What decides `tunnelled`, in words: "the clients' AllowedIPs", "the IPsec traffic selectors". */
  readonly tunnelledBy?: string;
  /** The next step when a destination is outside `tunnelled`. */
  readonly tunnelledFix?: string;
  /**
   * The kind's own words for `vpn/destination-not-tunnelled` about one destination (`list`: the
   * tunnelled prefixes as text); the case's generic words when absent.
   */
  readonly notTunnelledWords?: (
    destination: Ip,
    list: string,
  ) => { readonly explanation: string; readonly next: readonly string[] };
  /** Is the tunnel up at all (`vpn/tunnel-down`)? Unknown when the kind has no status output. */
  readonly tunnelState?: TunnelState;
  /** Prefixes the server tells clients to route (OpenVPN `push "route"`): in-cluster for paths. */
  readonly pushedRoutes: readonly Located<Cidr>[];
  /**
   * Networks behind clients that arrive through the tunnel besides the pool (OpenVPN `iroute`):
   * the return path must cover them too.
   */
  readonly clientNetworks?: readonly Located<Cidr>[];
  /** DNS servers the server hands clients (`dhcp-option DNS`, wg-quick `DNS =`). */
  readonly pushedDns: readonly Located<Ip>[];
  /** The kind's own file that would tell the pool, with the command that collects it. */
  readonly configMissing: Missing;
  /** The command run inside the pod that prints the kind's config (`cat /etc/openvpn/openvpn.conf`). */
  readonly readConfig: string;
  /** Sentence for "the client pool is unknown (…)" in the plan. */
  readonly poolUnknownWhy: string;
  /** The kind's own durable setters beyond init containers and pod sysctls (chart values). */
  readonly extraSetters: readonly ForwardingSetter[];
  /** Words for `vpn/forwarding-not-durable` naming the kind's own switch, e.g. ", and the chart value …". */
  readonly notDurableExtra: string;
  /** The kind's chart switch, or why there is none (the plan's chart-value strategy). */
  readonly chartSwitch: ChartSwitch | { readonly whyNot: string };
  /** Masquerade of `pool` written in the kind's own scripts, when the evidence shows one. */
  readonly scriptMasquerade: (pool: Cidr) => ScriptMasquerade | undefined;
  readonly masqueradeFix: (pool: Cidr) => MasqueradeFix;
  /** The smaller Service-VIP design applies to this kind's configs (OpenVPN: no redirect-gateway). */
  readonly onlyServicesRouted: boolean;
  /** Findings only this kind can make (WireGuard: destination outside AllowedIPs, no handshake). */
  readonly findings: (f: KindFindingsInput) => readonly Finding[];
  /** Missing evidence only this kind asks for. */
  readonly missing: (f: KindFindingsInput) => readonly Missing[];
}

/** One tunnel kind. Pure: reading and deciding never do I/O. */
export interface TunnelKind {
  readonly id: TunnelKindId;
  readonly displayName: string;
  /** Does a file beside a pod (its base name) belong to this kind? */
  readonly ownsFile: (base: string, text: string) => boolean;
  /** Reads the kind's own evidence of one pod; undefined when nothing of this kind is there. */
  readonly readPod: (src: KindPodSource) => KindReading | undefined;
  /** Whether this pod runs the kind, and how strongly the evidence says so. */
  readonly detect: (d: DetectInput) => Detection | undefined;
  /** The kind's view of the resolved pod (with its reading when there is one). */
  readonly view: (ctx: KindContext) => KindView;
}
