/**
 * @module lab/scenarios/wireguard-cluster — the cluster objects of the WireGuard replica: a
 * linuxserver/wireguard Deployment and its pod (env PEERS, INTERNAL_SUBNET, ALLOWEDIPS: the
 * AllowedIPs its clients get), with the durable forwarding fix the variant names; the rest
 * (namespaces, web pod, Services, node, the client-pool NetworkPolicy) as every tunnel lab
 * writes it (tunnel-cluster.ts).
 */
import {
  IP_FORWARD_POD_SECURITY_CONTEXT,
  type TunnelClusterReplica,
  tunnelClusterFiles,
} from "./tunnel-cluster.ts";

export const WG_NS = "vpn";
export const WG_DEPLOYMENT = "wireguard";
export const WG_POD = "wireguard-7c9d8b6f5-q4k2m";

export type WgManifestFix = "none" | "init-container" | "pod-sysctls";

export interface WgReplica extends TunnelClusterReplica {
  readonly allowedIps: string;
  readonly manifest: WgManifestFix;
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
    spec["securityContext"] = IP_FORWARD_POD_SECURITY_CONTEXT;
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
  return tunnelClusterFiles(r, {
    namespace: WG_NS,
    psaLevel: "privileged",
    deploymentName: WG_DEPLOYMENT,
    deploymentFile: "cluster/wireguard-deployment.yaml",
    labels,
    podName: WG_POD,
    podTemplateHash: "7c9d8b6f5",
    ownedByReplicaSet: false,
    podSpec: podSpec(r),
    dnsPod: false,
  });
}
