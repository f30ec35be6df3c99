/**
 * Benchmark inputs at cluster scale, deterministic: `kubectl get pods -A -o json` of N pods (the
 * shape, field order and 4-space indentation kubectl prints, the kubelet's managedFields entry included,
 * ~4 KB a pod), and snapshot folders of N nodes (a Node List, and per node an iptables-save of a small
 * kube-proxy node, ip route, ip addr and sysctl). Written as streams, never held whole.
 *
 *   node --import tsx bench/gen-cluster.ts pods N OUT.json
 *   node --import tsx bench/gen-cluster.ts nodes N OUT_DIR
 */
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";

/** A small linear congruential generator: the same input for the same N on every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 4294967296;
  };
}

const hex = (r: () => number, n: number) =>
  Array.from({ length: n }, () => Math.floor(r() * 16).toString(16)).join("");

/** A pod as the API returns it (kubectl get pods -A -o json), for pod `i` of `n` nodes. */
export function pod(i: number, nodes: number, r: () => number): Record<string, unknown> {
  const app = `svc-${i % 997}`;
  const ns = `team-${i % 53}`;
  const rs = `${app}-${hex(r, 10)}`;
  const name = `${rs}-${hex(r, 5)}`;
  const node = `gke-prod-pool-${i % nodes}`;
  const podIp = `10.${4 + ((i >> 16) & 3)}.${(i >> 8) & 255}.${i & 255}`;
  const hostIp = `10.128.${(i % nodes) >> 8}.${(i % nodes) & 255}`;
  const ts = `2026-11-${String(1 + (i % 28)).padStart(2, "0")}T0${i % 10}:1${i % 6}:2${i % 10}Z`;
  const uid = `${hex(r, 8)}-${hex(r, 4)}-${hex(r, 4)}-${hex(r, 4)}-${hex(r, 12)}`;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      creationTimestamp: ts,
      generateName: `${rs}-`,
      labels: { app, "pod-template-hash": rs.slice(-10), tier: i % 3 === 0 ? "web" : "backend" },
      annotations: { "kubectl.kubernetes.io/restartedAt": ts },
      managedFields: [
        {
          apiVersion: "v1",
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:status": {
              "f:containerStatuses": {},
              "f:hostIP": {},
              "f:phase": {},
              "f:podIP": {},
              "f:startTime": {},
            },
          },
          manager: "kubelet",
          operation: "Update",
          subresource: "status",
          time: ts,
        },
      ],
      name,
      namespace: ns,
      ownerReferences: [
        {
          apiVersion: "apps/v1",
          blockOwnerDeletion: true,
          controller: true,
          kind: "ReplicaSet",
          name: rs,
          uid,
        },
      ],
      resourceVersion: String(1_000_000 + i),
      uid: `${hex(r, 8)}-${hex(r, 4)}-${hex(r, 4)}-${hex(r, 4)}-${hex(r, 12)}`,
    },
    spec: {
      containers: [
        {
          image: `europe-docker.pkg.dev/prod/apps/${app}:v${i % 40}`,
          imagePullPolicy: "IfNotPresent",
          name: app,
          ports: [{ containerPort: 8080, name: "http", protocol: "TCP" }],
          resources: { requests: { cpu: "100m", memory: "128Mi" } },
          terminationMessagePath: "/dev/termination-log",
          terminationMessagePolicy: "File",
        },
      ],
      dnsPolicy: "ClusterFirst",
      enableServiceLinks: true,
      nodeName: node,
      preemptionPolicy: "PreemptLowerPriority",
      priority: 0,
      restartPolicy: "Always",
      schedulerName: "default-scheduler",
      securityContext: {},
      serviceAccount: "default",
      serviceAccountName: "default",
      terminationGracePeriodSeconds: 30,
      tolerations: [
        {
          effect: "NoExecute",
          key: "node.kubernetes.io/not-ready",
          operator: "Exists",
          tolerationSeconds: 300,
        },
      ],
    },
    status: {
      conditions: ["Ready", "PodScheduled"].map((type) => ({
        lastProbeTime: null,
        lastTransitionTime: ts,
        status: "True",
        type,
      })),
      containerStatuses: [
        {
          containerID: `containerd://${hex(r, 64)}`,
          image: `europe-docker.pkg.dev/prod/apps/${app}:v${i % 40}`,
          lastState: {},
          name: app,
          ready: true,
          restartCount: i % 7 === 0 ? 1 : 0,
          started: true,
          state: { running: { startedAt: ts } },
        },
      ],
      hostIP: hostIp,
      hostIPs: [{ ip: hostIp }],
      phase: "Running",
      podIP: podIp,
      podIPs: [{ ip: podIp }],
      qosClass: "Burstable",
      startTime: ts,
    },
  };
}

/** Indents kubectl's way: its JSON printer uses 4 spaces, and items sit at depth 2. */
function indented(value: unknown, depth: number): string {
  const pad = " ".repeat(4 * depth);
  return JSON.stringify(value, null, 4).replace(/\n/g, `\n${pad}`);
}

/** Writes `kubectl get pods -A -o json` of `n` pods spread over `nodes` nodes; returns its size. */
export function writePodList(file: string, n: number, nodes = Math.max(1, Math.ceil(n / 100))) {
  const fd = openSync(file, "w");
  const r = rng(17);
  let size = 0;
  const out = (s: string) => {
    size += writeSync(fd, s);
  };
  try {
    out('{\n    "apiVersion": "v1",\n    "items": [\n');
    let batch = "";
    for (let i = 0; i < n; i++) {
      batch += `        ${indented(pod(i, nodes, r), 2)}${i + 1 < n ? "," : ""}\n`;
      if (batch.length > 1 << 20) {
        out(batch);
        batch = "";
      }
    }
    out(batch);
    out(
      '    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n',
    );
  } finally {
    closeSync(fd);
  }
  return size;
}

/** A Node object as kubectl prints it. */
function node(i: number): Record<string, unknown> {
  const name = `gke-prod-pool-${i}`;
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      labels: {
        "kubernetes.io/hostname": name,
        "cloud.google.com/gke-nodepool": `pool-${i % 8}`,
        "topology.kubernetes.io/zone": `europe-west1-${"bcd"[i % 3]}`,
      },
      name,
    },
    spec: {
      podCIDR: `10.${4 + (i >> 8)}.${i & 255}.0/24`,
      podCIDRs: [`10.${4 + (i >> 8)}.${i & 255}.0/24`],
    },
    status: {
      addresses: [
        { address: `10.128.${i >> 8}.${i & 255}`, type: "InternalIP" },
        { address: name, type: "Hostname" },
      ],
    },
  };
}

/** A small kube-proxy node's iptables-save: `services` service chains, and GKE's IP-MASQ. */
function iptablesSave(i: number, services: number): string {
  const lines = [
    "# Generated by iptables-save v1.8.9 (nf_tables)",
    "*nat",
    ":PREROUTING ACCEPT [0:0]",
    ":INPUT ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ":POSTROUTING ACCEPT [0:0]",
    ":IP-MASQ - [0:0]",
    ":KUBE-POSTROUTING - [0:0]",
    ":KUBE-SERVICES - [0:0]",
  ];
  for (let s = 0; s < services; s++) lines.push(`:KUBE-SVC-${String(s).padStart(16, "0")} - [0:0]`);
  lines.push(
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    '-A POSTROUTING -m comment --comment "ip-masq: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom IP-MASQ chain" -m addrtype ! --dst-type LOCAL -j IP-MASQ',
    '-A IP-MASQ -d 169.254.0.0/16 -m comment --comment "ip-masq: local traffic is not subject to MASQUERADE" -j RETURN',
    '-A IP-MASQ -d 10.0.0.0/8 -m comment --comment "ip-masq: RFC 1918 reserved range is not subject to MASQUERADE" -j RETURN',
    '-A IP-MASQ -m comment --comment "ip-masq: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE',
  );
  for (let s = 0; s < services; s++) {
    const chain = `KUBE-SVC-${String(s).padStart(16, "0")}`;
    lines.push(
      `-A KUBE-SERVICES -d 10.${8 + (s >> 16)}.${(s >> 8) & 255}.${s & 255}/32 -p tcp -m comment --comment "ns/svc-${s}:http cluster IP" -m tcp --dport 80 -j ${chain}`,
      `-A ${chain} -m comment --comment "ns/svc-${s}:http -> 10.4.${i & 255}.${s & 255}:8080" -j DNAT --to-destination 10.4.${i & 255}.${s & 255}:8080`,
    );
  }
  lines.push("COMMIT", "");
  return lines.join("\n");
}

/**
 * Writes a snapshot folder of `n` nodes: cluster/nodes.json (a Node List) and, per node,
 * iptables-save.txt (20 services), ip-route.txt, ip-addr.txt and sysctl.txt.
 */
export function writeNodesSnapshot(dir: string, n: number): void {
  mkdirSync(join(dir, "cluster"), { recursive: true });
  const fd = openSync(join(dir, "cluster/nodes.json"), "w");
  try {
    writeSync(fd, '{\n    "apiVersion": "v1",\n    "items": [\n');
    for (let i = 0; i < n; i++)
      writeSync(fd, `        ${indented(node(i), 2)}${i + 1 < n ? "," : ""}\n`);
    writeSync(
      fd,
      '    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n',
    );
  } finally {
    closeSync(fd);
  }
  for (let i = 0; i < n; i++) {
    const d = join(dir, "nodes", `gke-prod-pool-${i}`);
    mkdirSync(d, { recursive: true });
    const ip = `10.128.${i >> 8}.${i & 255}`;
    writeFileSync(join(d, "iptables-save.txt"), iptablesSave(i, 20));
    writeFileSync(
      join(d, "ip-route.txt"),
      `default via 10.128.0.1 dev eth0 proto dhcp src ${ip} metric 100\n10.128.0.0/20 via 10.128.0.1 dev eth0 proto dhcp src ${ip} metric 100\n10.4.${i & 255}.0/24 dev cbr0 proto kernel scope link src 10.4.${i & 255}.1\n`,
    );
    writeFileSync(
      join(d, "ip-addr.txt"),
      `1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\n    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n    inet 127.0.0.1/8 scope host lo\n       valid_lft forever preferred_lft forever\n2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1460 qdisc mq state UP group default qlen 1000\n    link/ether 42:01:0a:80:00:02 brd ff:ff:ff:ff:ff:ff\n    inet ${ip}/32 scope global dynamic eth0\n       valid_lft 86000sec preferred_lft 86000sec\n`,
    );
    writeFileSync(
      join(d, "sysctl.txt"),
      "net.ipv4.ip_forward = 1\nnet.ipv4.conf.all.rp_filter = 1\nnet.bridge.bridge-nf-call-iptables = 1\n",
    );
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [what, count, out] = process.argv.slice(2);
  const n = Number(count);
  if (what === "pods" && out) console.log(`${writePodList(out, n)} bytes`);
  else if (what === "nodes" && out) writeNodesSnapshot(out, n);
  else {
    console.error("usage: gen-cluster.ts pods N OUT.json | nodes N OUT_DIR");
    process.exit(2);
  }
}
