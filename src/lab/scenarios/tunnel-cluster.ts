/**
 * @module lab/scenarios/tunnel-cluster — the Kubernetes objects every VPN-pod lab writes the same
 * way, as kubectl prints them: the Namespaces (Pod Security labels on the VPN's), the VPN
 * Deployment and its running Pod around the pod spec the kind supplies, the web and DNS pods, their
 * Services, the Node and, with `policy`, the NetworkPolicy admitting only the client pool.
 */
import { stringify } from "yaml";

export const CREATED_AT = "2026-01-01T00:00:00Z";

export type PsaLevel = "privileged" | "baseline" | "restricted";

/** The addresses and the policy switch of the replica the objects describe. */
export interface TunnelClusterReplica {
  readonly pool: string;
  readonly vpnPodIp: string;
  readonly targetPodIp: string;
  readonly dnsPodIp: string;
  readonly webServiceIp: string;
  readonly dnsServiceIp: string;
  readonly podCidr: string;
  readonly policy: boolean;
}

/** What a VPN kind supplies: its workload's names, labels and pod spec. */
export interface TunnelWorkload {
  readonly namespace: string;
  readonly psaLevel: PsaLevel;
  readonly deploymentName: string;
  /** The Deployment's file, e.g. `cluster/vpn-deployment.yaml`. */
  readonly deploymentFile: string;
  /** The selector labels of Deployment and Pod. */
  readonly labels: Readonly<Record<string, string>>;
  /** Labels only the Deployment's metadata carries (a chart's `chart`, `heritage`). */
  readonly deploymentLabels?: Readonly<Record<string, string>>;
  readonly podName: string;
  readonly podTemplateHash: string;
  /** Whether the Pod names its ReplicaSet `<deployment>-<hash>` as owner. */
  readonly ownedByReplicaSet: boolean;
  readonly podSpec: Readonly<Record<string, unknown>>;
  /** A coredns pod in pods.yaml. */
  readonly dnsPod: boolean;
  /** Each Pod's `status` before its `spec`, as the IPsec lab's snapshots have always listed them. */
  readonly statusBeforeSpec?: boolean;
}

/** The durable forwarding fix as an init container (same pod sandbox, so it carries to the VPN). */
export const IP_FORWARD_INIT_CONTAINER = {
  name: "enable-ip-forward",
  image: "busybox:1.36",
  command: ["sysctl", "-w", "net.ipv4.ip_forward=1"],
  securityContext: { privileged: true },
} as const;

/** The durable forwarding fix as pod-level sysctls (no privilege; the sysctl must be allowed). */
export const IP_FORWARD_POD_SECURITY_CONTEXT = {
  sysctls: [{ name: "net.ipv4.ip_forward", value: "1" }],
} as const;

const y = (o: unknown) => stringify(o, { aliasDuplicateObjects: false });

/** cluster/*.yaml files: path → text. */
export function tunnelClusterFiles(
  r: TunnelClusterReplica,
  w: TunnelWorkload,
): Record<string, string> {
  const psa = {
    "kubernetes.io/metadata.name": w.namespace,
    ...(w.psaLevel === "privileged"
      ? {}
      : {
          "pod-security.kubernetes.io/enforce": w.psaLevel,
          "pod-security.kubernetes.io/enforce-version": "latest",
        }),
  };
  const namespaces = {
    apiVersion: "v1",
    kind: "List",
    items: [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: w.namespace, labels: psa } },
      {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "demo", labels: { "kubernetes.io/metadata.name": "demo" } },
      },
    ],
  };
  const labels = w.labels;
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: w.deploymentName,
      namespace: w.namespace,
      labels: { ...labels, ...w.deploymentLabels },
      creationTimestamp: CREATED_AT,
    },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: w.podSpec },
    },
  };
  const pod = (metadata: object, ip: string, spec: object) => {
    const status = { phase: "Running", podIP: ip, podIPs: [{ ip }] };
    return w.statusBeforeSpec
      ? { apiVersion: "v1", kind: "Pod", metadata, status, spec }
      : { apiVersion: "v1", kind: "Pod", metadata, spec, status };
  };
  const vpnPod = pod(
    {
      name: w.podName,
      namespace: w.namespace,
      labels: { ...labels, "pod-template-hash": w.podTemplateHash },
      ...(w.ownedByReplicaSet
        ? {
            ownerReferences: [
              {
                apiVersion: "apps/v1",
                kind: "ReplicaSet",
                name: `${w.deploymentName}-${w.podTemplateHash}`,
                controller: true,
              },
            ],
          }
        : {}),
      creationTimestamp: CREATED_AT,
    },
    r.vpnPodIp,
    { nodeName: "lab-node-1", ...w.podSpec },
  );
  const webPod = pod({ name: "web-0", namespace: "demo", labels: { app: "web" } }, r.targetPodIp, {
    nodeName: "lab-node-1",
    containers: [{ name: "web", image: "nginx:1.27" }],
  });
  const dnsPod = pod(
    { name: "coredns-0", namespace: "kube-system", labels: { "k8s-app": "kube-dns" } },
    r.dnsPodIp,
    { nodeName: "lab-node-1", containers: [{ name: "coredns", image: "coredns/coredns:1.11.1" }] },
  );
  const pods = {
    apiVersion: "v1",
    kind: "List",
    items: w.dnsPod ? [vpnPod, webPod, dnsPod] : [vpnPod, webPod],
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
    [w.deploymentFile]: y(deployment),
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
