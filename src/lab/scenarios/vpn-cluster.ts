/**
 * @module lab/scenarios/vpn-cluster — the OpenVPN replica's own Kubernetes objects: the pod spec
 * stable/openvpn 4.2.5 renders (with the chosen durable fix, or none), its names and labels, the
 * Pod Security level, and the chart values for `--manifest chart-value`; the rest as every tunnel
 * lab writes it (tunnel-cluster.ts).
 */
import { stringify } from "yaml";
import {
  IP_FORWARD_INIT_CONTAINER,
  IP_FORWARD_POD_SECURITY_CONTEXT,
  type PsaLevel,
  type TunnelClusterReplica,
  tunnelClusterFiles,
} from "./tunnel-cluster.ts";

export const VPN_NS = "vpn";
export const VPN_DEPLOYMENT = "vpn-openvpn";
export const VPN_POD = "vpn-openvpn-6d9c7b5f4-x2x7k";

export type ManifestFix = "none" | "init-container" | "pod-sysctls" | "chart-value";

export interface VpnReplica extends TunnelClusterReplica {
  readonly manifest: ManifestFix;
  readonly psaLevel: PsaLevel;
}

function vpnPodSpec(r: VpnReplica): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  if (r.manifest === "init-container" || r.manifest === "chart-value") {
    spec["initContainers"] = [
      r.manifest === "chart-value"
        ? {
            args: ["-c", "sysctl -w net.ipv4.ip_forward=1"],
            command: ["/bin/sh"],
            image: "busybox:1.29",
            imagePullPolicy: "IfNotPresent",
            name: "sysctl",
            resources: { requests: { cpu: "1m", memory: "1Mi" } },
            securityContext: { privileged: true },
          }
        : IP_FORWARD_INIT_CONTAINER,
    ];
  }
  if (r.manifest === "pod-sysctls") {
    spec["securityContext"] = IP_FORWARD_POD_SECURITY_CONTEXT;
  }
  spec["containers"] = [
    {
      name: "openvpn",
      image: "jfelten/openvpn-docker:1.1.0",
      imagePullPolicy: "IfNotPresent",
      command: ["/etc/openvpn/setup/configure.sh"],
      ports: [{ containerPort: 1194, name: "openvpn", protocol: "UDP" }],
      securityContext: { capabilities: { add: ["NET_ADMIN"] } },
      volumeMounts: [{ mountPath: "/etc/openvpn/setup", name: "openvpn" }],
    },
  ];
  spec["volumes"] = [{ name: "openvpn", configMap: { name: VPN_DEPLOYMENT, defaultMode: 0o775 } }];
  return spec;
}

const labels = { app: "openvpn", release: "vpn" };

/** cluster/*.yaml files: name → text. */
export function vpnClusterFiles(r: VpnReplica): Record<string, string> {
  const files = tunnelClusterFiles(r, {
    namespace: VPN_NS,
    psaLevel: r.psaLevel,
    deploymentName: VPN_DEPLOYMENT,
    deploymentFile: "cluster/vpn-deployment.yaml",
    labels,
    deploymentLabels: { chart: "openvpn-4.2.5", heritage: "Helm" },
    podName: VPN_POD,
    podTemplateHash: "6d9c7b5f4",
    ownedByReplicaSet: true,
    podSpec: vpnPodSpec(r),
    dnsPod: true,
  });
  if (r.manifest === "chart-value") {
    files[`pods/${VPN_NS}/${VPN_POD}/helm-values.yaml`] = stringify({
      ipForwardInitContainer: true,
      openvpn: { OVPN_NETWORK: "10.8.0.0", OVPN_SUBNET: "255.255.255.0", OVPN_PROTO: "udp" },
    });
  }
  return files;
}
