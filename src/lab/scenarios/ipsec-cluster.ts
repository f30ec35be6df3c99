/**
 * @module lab/scenarios/ipsec-cluster — the IPsec replica's own Kubernetes objects: a strongSwan
 * pod spec (with the chosen durable forwarding fix, or none), its names and labels; the rest
 * (namespaces, web and DNS pods, Services, node, the client-pool NetworkPolicy) as every tunnel
 * lab writes it (tunnel-cluster.ts).
 */
import {
  IP_FORWARD_INIT_CONTAINER,
  IP_FORWARD_POD_SECURITY_CONTEXT,
  type TunnelClusterReplica,
  tunnelClusterFiles,
} from "./tunnel-cluster.ts";

export const IPSEC_NS = "vpn";
export const IPSEC_DEPLOYMENT = "vpn-strongswan";
export const IPSEC_POD = "vpn-strongswan-7c9f8d6b5-q4w2n";

export type IpsecManifestFix = "none" | "init-container" | "pod-sysctls";

export interface IpsecReplica extends TunnelClusterReplica {
  readonly manifest: IpsecManifestFix;
}

const labels = { app: "strongswan", release: "vpn" };

function podSpec(r: IpsecReplica): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  if (r.manifest === "init-container") {
    spec["initContainers"] = [IP_FORWARD_INIT_CONTAINER];
  }
  if (r.manifest === "pod-sysctls") {
    spec["securityContext"] = IP_FORWARD_POD_SECURITY_CONTEXT;
  }
  spec["containers"] = [
    {
      name: "strongswan",
      image: "strongx509/strongswan:5.9.8",
      command: ["ipsec", "start", "--nofork"],
      ports: [
        { containerPort: 500, name: "ike", protocol: "UDP" },
        { containerPort: 4500, name: "ike-natt", protocol: "UDP" },
      ],
      securityContext: { capabilities: { add: ["NET_ADMIN"] } },
      volumeMounts: [
        { mountPath: "/etc/ipsec.conf", name: "config", subPath: "ipsec.conf" },
        { mountPath: "/etc/ipsec.secrets", name: "secrets", subPath: "ipsec.secrets" },
      ],
    },
  ];
  spec["volumes"] = [
    { name: "config", configMap: { name: IPSEC_DEPLOYMENT } },
    { name: "secrets", secret: { secretName: IPSEC_DEPLOYMENT } },
  ];
  return spec;
}

/** cluster/*.yaml files: name → text. */
export function ipsecClusterFiles(r: IpsecReplica): Record<string, string> {
  return tunnelClusterFiles(r, {
    namespace: IPSEC_NS,
    psaLevel: "privileged",
    deploymentName: IPSEC_DEPLOYMENT,
    deploymentFile: "cluster/vpn-deployment.yaml",
    labels,
    podName: IPSEC_POD,
    podTemplateHash: "7c9f8d6b5",
    ownedByReplicaSet: true,
    podSpec: podSpec(r),
    dnsPod: true,
    statusBeforeSpec: true,
  });
}
