/**
 * @module lab/scenarios/vpn-cluster — the Kubernetes objects describing the VPN replica, as kubectl
 * prints them: the VPN Deployment as stable/openvpn 4.2.5 renders it (with the chosen durable
 * fix, or none), its running Pod, the Namespace with Pod Security labels, the target pod, the DNS
 * pod, their Services, the Node, and with `--policy` a NetworkPolicy admitting only the client pool.
 */
import { stringify } from "yaml";

export const VPN_NS = "vpn";
export const VPN_DEPLOYMENT = "vpn-openvpn";
export const VPN_POD = "vpn-openvpn-6d9c7b5f4-x2x7k";
export const CREATED_AT = "2026-01-01T00:00:00Z";

export type ManifestFix = "none" | "init-container" | "pod-sysctls" | "chart-value";

export interface VpnReplica {
  readonly pool: string; // 10.8.0.0/24
  readonly vpnPodIp: string;
  readonly targetPodIp: string;
  readonly dnsPodIp: string;
  readonly webServiceIp: string;
  readonly dnsServiceIp: string;
  readonly podCidr: string;
  readonly manifest: ManifestFix;
  readonly psaLevel: "privileged" | "baseline" | "restricted";
  readonly policy: boolean;
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
        : {
            name: "enable-ip-forward",
            image: "busybox:1.36",
            command: ["sysctl", "-w", "net.ipv4.ip_forward=1"],
            securityContext: { privileged: true },
          },
    ];
  }
  if (r.manifest === "pod-sysctls") {
    spec["securityContext"] = { sysctls: [{ name: "net.ipv4.ip_forward", value: "1" }] };
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
  const psa = {
    "kubernetes.io/metadata.name": VPN_NS,
    ...(r.psaLevel === "privileged"
      ? {}
      : {
          "pod-security.kubernetes.io/enforce": r.psaLevel,
          "pod-security.kubernetes.io/enforce-version": "latest",
        }),
  };
  const namespaces = {
    apiVersion: "v1",
    kind: "List",
    items: [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: VPN_NS, labels: psa } },
      {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "demo", labels: { "kubernetes.io/metadata.name": "demo" } },
      },
    ],
  };
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: VPN_DEPLOYMENT,
      namespace: VPN_NS,
      labels: { ...labels, chart: "openvpn-4.2.5", heritage: "Helm" },
      creationTimestamp: CREATED_AT,
    },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: vpnPodSpec(r) },
    },
  };
  const vpnPod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: VPN_POD,
      namespace: VPN_NS,
      labels: { ...labels, "pod-template-hash": "6d9c7b5f4" },
      ownerReferences: [
        {
          apiVersion: "apps/v1",
          kind: "ReplicaSet",
          name: `${VPN_DEPLOYMENT}-6d9c7b5f4`,
          controller: true,
        },
      ],
      creationTimestamp: CREATED_AT,
    },
    spec: { nodeName: "lab-node-1", ...vpnPodSpec(r) },
    status: { phase: "Running", podIP: r.vpnPodIp, podIPs: [{ ip: r.vpnPodIp }] },
  };
  const pods = {
    apiVersion: "v1",
    kind: "List",
    items: [
      vpnPod,
      {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "web-0", namespace: "demo", labels: { app: "web" } },
        spec: { nodeName: "lab-node-1", containers: [{ name: "web", image: "nginx:1.27" }] },
        status: { phase: "Running", podIP: r.targetPodIp, podIPs: [{ ip: r.targetPodIp }] },
      },
      {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name: "coredns-0",
          namespace: "kube-system",
          labels: { "k8s-app": "kube-dns" },
        },
        spec: {
          nodeName: "lab-node-1",
          containers: [{ name: "coredns", image: "coredns/coredns:1.11.1" }],
        },
        status: { phase: "Running", podIP: r.dnsPodIp, podIPs: [{ ip: r.dnsPodIp }] },
      },
    ],
  };
  const services = {
    apiVersion: "v1",
    kind: "List",
    items: [
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "web", namespace: "demo" },
        spec: {
          clusterIP: r.webServiceIp,
          selector: { app: "web" },
          ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }],
        },
      },
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "kube-dns", namespace: "kube-system" },
        spec: {
          clusterIP: r.dnsServiceIp,
          selector: { "k8s-app": "kube-dns" },
          ports: [{ name: "dns", port: 53, protocol: "UDP" }],
        },
      },
    ],
  };
  const node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "lab-node-1", labels: { "kubernetes.io/hostname": "lab-node-1" } },
    spec: { podCIDR: r.podCidr, podCIDRs: [r.podCidr] },
  };
  const files: Record<string, string> = {
    "cluster/namespaces.yaml": stringify(namespaces, { aliasDuplicateObjects: false }),
    "cluster/vpn-deployment.yaml": stringify(deployment, { aliasDuplicateObjects: false }),
    "cluster/pods.yaml": stringify(pods, { aliasDuplicateObjects: false }),
    "cluster/services.yaml": stringify(services, { aliasDuplicateObjects: false }),
    "cluster/nodes.yaml": stringify(node, { aliasDuplicateObjects: false }),
  };
  if (r.policy) {
    files["cluster/networkpolicy.yaml"] = stringify({
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: "allow-vpn-clients", namespace: "demo" },
      spec: {
        podSelector: { matchLabels: { app: "web" } },
        policyTypes: ["Ingress"],
        ingress: [{ from: [{ ipBlock: { cidr: r.pool } }] }],
      },
    });
  }
  if (r.manifest === "chart-value") {
    files["pods/vpn/vpn-openvpn-6d9c7b5f4-x2x7k/helm-values.yaml"] = stringify({
      ipForwardInitContainer: true,
      openvpn: { OVPN_NETWORK: "10.8.0.0", OVPN_SUBNET: "255.255.255.0", OVPN_PROTO: "udp" },
    });
  }
  return files;
}
