/**
 * @module lab/scenarios/ipsec-cluster — the Kubernetes objects describing the IPsec replica, as
 * kubectl prints them: a strongSwan Deployment (with the chosen durable forwarding fix, or none)
 * and its running Pod, the Namespace, the target pod, the DNS pod, their Services, the Node, and
 * with `--policy` a NetworkPolicy admitting only the client pool.
 */
import { stringify } from "yaml";

export const IPSEC_NS = "vpn";
export const IPSEC_DEPLOYMENT = "vpn-strongswan";
export const IPSEC_POD = "vpn-strongswan-7c9f8d6b5-q4w2n";
const CREATED_AT = "2026-01-01T00:00:00Z";

export type IpsecManifestFix = "none" | "init-container" | "pod-sysctls";

export interface IpsecReplica {
  readonly pool: string;
  readonly vpnPodIp: string;
  readonly targetPodIp: string;
  readonly dnsPodIp: string;
  readonly webServiceIp: string;
  readonly dnsServiceIp: string;
  readonly podCidr: string;
  readonly manifest: IpsecManifestFix;
  readonly policy: boolean;
}

const labels = { app: "strongswan", release: "vpn" };

function podSpec(r: IpsecReplica): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  if (r.manifest === "init-container") {
    spec["initContainers"] = [
      {
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

const y = (o: unknown) => stringify(o, { aliasDuplicateObjects: false });

/** cluster/*.yaml files: name → text. */
export function ipsecClusterFiles(r: IpsecReplica): Record<string, string> {
  const namespaces = {
    apiVersion: "v1",
    kind: "List",
    items: [IPSEC_NS, "demo"].map((name) => ({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name, labels: { "kubernetes.io/metadata.name": name } },
    })),
  };
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: IPSEC_DEPLOYMENT,
      namespace: IPSEC_NS,
      labels,
      creationTimestamp: CREATED_AT,
    },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: podSpec(r) },
    },
  };
  const running = (name: string, ns: string, ip: string, extra: Record<string, unknown>) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns, ...extra },
    status: { phase: "Running", podIP: ip, podIPs: [{ ip }] },
  });
  const vpnPod = {
    ...running(IPSEC_POD, IPSEC_NS, r.vpnPodIp, {
      labels: { ...labels, "pod-template-hash": "7c9f8d6b5" },
      ownerReferences: [
        {
          apiVersion: "apps/v1",
          kind: "ReplicaSet",
          name: `${IPSEC_DEPLOYMENT}-7c9f8d6b5`,
          controller: true,
        },
      ],
      creationTimestamp: CREATED_AT,
    }),
    spec: { nodeName: "lab-node-1", ...podSpec(r) },
  };
  const pods = {
    apiVersion: "v1",
    kind: "List",
    items: [
      vpnPod,
      {
        ...running("web-0", "demo", r.targetPodIp, { labels: { app: "web" } }),
        spec: { nodeName: "lab-node-1", containers: [{ name: "web", image: "nginx:1.27" }] },
      },
      {
        ...running("coredns-0", "kube-system", r.dnsPodIp, { labels: { "k8s-app": "kube-dns" } }),
        spec: {
          nodeName: "lab-node-1",
          containers: [{ name: "coredns", image: "coredns/coredns:1.11.1" }],
        },
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
    "cluster/namespaces.yaml": y(namespaces),
    "cluster/vpn-deployment.yaml": y(deployment),
    "cluster/pods.yaml": y(pods),
    "cluster/services.yaml": y(services),
    "cluster/nodes.yaml": y(node),
  };
  if (r.policy) {
    files["cluster/networkpolicy.yaml"] = y({
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
  return files;
}
