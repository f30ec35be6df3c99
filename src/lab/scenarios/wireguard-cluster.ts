/**
 * @module lab/scenarios/wireguard-cluster — the cluster objects of the WireGuard replica: a
 * linuxserver/wireguard Deployment and its pod (env PEERS, INTERNAL_SUBNET, ALLOWEDIPS: the
 * AllowedIPs its clients get), with the durable forwarding fix the variant names; the rest
 * (namespaces, web pod's Service, node, the client-pool NetworkPolicy) as the OpenVPN replica's.
 */
import { stringify } from "yaml";
import { CREATED_AT, vpnClusterFiles } from "./vpn-cluster.ts";

export const WG_NS = "vpn";
export const WG_DEPLOYMENT = "wireguard";
export const WG_POD = "wireguard-7c9d8b6f5-q4k2m";

export type WgManifestFix = "none" | "init-container" | "pod-sysctls";

export interface WgReplica {
  readonly pool: string;
  readonly allowedIps: string;
  readonly vpnPodIp: string;
  readonly targetPodIp: string;
  readonly dnsPodIp: string;
  readonly webServiceIp: string;
  readonly dnsServiceIp: string;
  readonly podCidr: string;
  readonly manifest: WgManifestFix;
  readonly policy: boolean;
}

const labels = { app: "wireguard" };

function podSpec(r: WgReplica): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  if (r.manifest === "init-container") {
    spec["initContainers"] = [
      {
        name: "sysctls",
        image: "busybox:1.36",
        command: ["sh", "-c", "sysctl -w net.ipv4.conf.all.forwarding=1"],
        securityContext: { privileged: true },
      },
    ];
  }
  if (r.manifest === "pod-sysctls") {
    spec["securityContext"] = { sysctls: [{ name: "net.ipv4.ip_forward", value: "1" }] };
  }
  spec["containers"] = [
    {
      name: "wireguard",
      image: "lscr.io/linuxserver/wireguard:1.0.20210914",
      env: [
        { name: "PEERS", value: "1" },
        { name: "INTERNAL_SUBNET", value: r.pool.replace(/\/\d+$/, "") },
        { name: "ALLOWEDIPS", value: r.allowedIps },
      ],
      ports: [{ containerPort: 51820, name: "wireguard", protocol: "UDP" }],
      securityContext: { capabilities: { add: ["NET_ADMIN"] } },
    },
  ];
  return spec;
}

/** cluster/*.yaml files of the WireGuard replica: name → text. */
export function wireguardClusterFiles(r: WgReplica): Record<string, string> {
  const shared = vpnClusterFiles({ ...r, manifest: "none", psaLevel: "privileged" });
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: WG_DEPLOYMENT, namespace: WG_NS, labels, creationTimestamp: CREATED_AT },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: podSpec(r) },
    },
  };
  const pods = {
    apiVersion: "v1",
    kind: "List",
    items: [
      {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name: WG_POD,
          namespace: WG_NS,
          labels: { ...labels, "pod-template-hash": "7c9d8b6f5" },
          creationTimestamp: CREATED_AT,
        },
        spec: { nodeName: "lab-node-1", ...podSpec(r) },
        status: { phase: "Running", podIP: r.vpnPodIp, podIPs: [{ ip: r.vpnPodIp }] },
      },
      {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "web-0", namespace: "demo", labels: { app: "web" } },
        spec: { nodeName: "lab-node-1", containers: [{ name: "web", image: "nginx:1.27" }] },
        status: { phase: "Running", podIP: r.targetPodIp, podIPs: [{ ip: r.targetPodIp }] },
      },
    ],
  };
  const files: Record<string, string> = {
    "cluster/namespaces.yaml": shared["cluster/namespaces.yaml"]!,
    "cluster/services.yaml": shared["cluster/services.yaml"]!,
    "cluster/nodes.yaml": shared["cluster/nodes.yaml"]!,
    "cluster/wireguard-deployment.yaml": stringify(deployment, { aliasDuplicateObjects: false }),
    "cluster/pods.yaml": stringify(pods, { aliasDuplicateObjects: false }),
  };
  const policy = shared["cluster/networkpolicy.yaml"];
  if (policy) files["cluster/networkpolicy.yaml"] = policy;
  return files;
}
