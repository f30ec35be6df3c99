/**
 * @module test/k8s-api/small-cluster — a small GKE-like cluster for the fake API server: two node
 * pools (ip-masq-agent runs on pool "a" only), the agent's ConfigMap and DaemonSet, a logging
 * DaemonSet that does not masquerade, an OpenVPN pod, Services, a NetworkPolicy and a Secret
 * (which collection must never read). Object shapes follow `kubectl get -o json` of GKE 1.29
 * clusters (see README.md); exec answers are what the tools print on such nodes.
 */
import type { ExecAnswer, Obj } from "./server.ts";

const managedFields = [
  {
    apiVersion: "v1",
    fieldsType: "FieldsV1",
    fieldsV1: { "f:metadata": { "f:labels": { ".": {} } } },
    manager: "kubectl-client-side-apply",
    operation: "Update",
    time: "2026-11-02T09:12:44Z",
  },
];

export const NODES = ["gke-prod-pool-a-1a2b", "gke-prod-pool-a-3c4d", "gke-prod-pool-b-5e6f"];

export function node(name: string, i: number, pool: string): Obj {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      labels: {
        "beta.kubernetes.io/arch": "amd64",
        "cloud.google.com/gke-nodepool": pool,
        "cloud.google.com/gke-os-distribution": "cos",
        "kubernetes.io/hostname": name,
        "topology.kubernetes.io/zone": "europe-west3-a",
      },
      annotations: { "node.alpha.kubernetes.io/ttl": "0" },
      creationTimestamp: "2026-11-01T08:00:00Z",
      managedFields,
    },
    spec: {
      podCIDR: `10.4.${i}.0/24`,
      podCIDRs: [`10.4.${i}.0/24`],
      providerID: `gce://prod-project/europe-west3-a/${name}`,
    },
    status: {
      addresses: [
        { address: `10.128.${Math.floor(i / 250)}.${(i % 250) + 2}`, type: "InternalIP" },
        { address: name, type: "Hostname" },
      ],
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "KubeletReady",
          message: "kubelet is posting ready status",
          lastHeartbeatTime: "2026-11-29T09:00:00Z",
          lastTransitionTime: "2026-11-01T08:01:00Z",
        },
      ],
      nodeInfo: {
        containerRuntimeVersion: "containerd://1.7.15",
        kernelVersion: "6.1.85+",
        kubeletVersion: "v1.29.6-gke.1038001",
        osImage: "Container-Optimized OS from Google",
        architecture: "amd64",
        operatingSystem: "linux",
      },
    },
  };
}

function pod(
  ns: string,
  name: string,
  nodeName: string,
  labels: Record<string, string>,
  containers: string[],
  extra: Record<string, unknown> = {},
): Obj {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: ns,
      labels,
      creationTimestamp: "2026-11-20T10:00:00Z",
      managedFields,
    },
    spec: {
      nodeName,
      containers: containers.map((c) => ({ name: c, image: `example/${c}:1` })),
      ...extra,
    },
    status: { phase: "Running", podIP: "10.4.0.12", hostIP: "10.128.0.2" },
  };
}

function daemonSet(
  name: string,
  labels: Record<string, string>,
  image: string,
  args: string[],
  pool?: string,
): Obj {
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name, namespace: "kube-system", labels, generation: 1, managedFields },
    spec: {
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          hostNetwork: true,
          ...(pool
            ? {
                affinity: {
                  nodeAffinity: {
                    requiredDuringSchedulingIgnoredDuringExecution: {
                      nodeSelectorTerms: [
                        {
                          matchExpressions: [
                            {
                              key: "cloud.google.com/gke-nodepool",
                              operator: "In",
                              values: [pool],
                            },
                          ],
                        },
                      ],
                    },
                  },
                },
              }
            : {}),
          containers: [
            {
              name,
              image,
              args,
              securityContext: {
                privileged: false,
                capabilities: { add: ["NET_ADMIN", "NET_RAW"] },
              },
            },
          ],
        },
      },
    },
    status: {
      currentNumberScheduled: 2,
      desiredNumberScheduled: 2,
      numberReady: 2,
      numberMisscheduled: 0,
    },
  };
}

const TRICKY_ANNOTATIONS: Record<string, string> = {
  ampersand: "&a",
  colon: "a: b",
  "comment-hash": "a #b",
  json: JSON.stringify({ a: "x".repeat(60), b: [1, 2, 3] }),
  lead: " leading",
  trailing: "trailing ",
  "multi-clean": "line one\nline two\n",
  "multi-space": "line one\nline two with trailing space \n",
  "multi-nofinal": "a\nb",
  unicode: "ünï – “quotes”",
  empty: "",
  tab: "a\tb",
  num: "1e3",
  hex: "0x1F",
  octal: "0777",
  tilde: "~",
  star: "*x",
  bool: "True",
  yes: "yes",
  date: "2026-11-29",
  time: "2026-11-29T10:00:00Z",
  version: "1.10",
  base60: "1:20",
  dash: "- item",
  question: "? x",
  item9: "a",
  item10: "b",
  a_b: "c",
  aB: "d",
  "quote'single": "it's",
  dq: 'say "hi"',
  // longer than 80 columns: kubectl folds them at spaces
  long: "word ".repeat(40).trim(),
  "long-single": `#${"word ".repeat(30).trim()}`,
  "long-double": `tab\t${"ab  ".repeat(30)}`,
  "long-message":
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
};

export function smallCluster(): Obj[] {
  return [
    node(NODES[0]!, 0, "pool-a"),
    node(NODES[1]!, 1, "pool-a"),
    node(NODES[2]!, 2, "pool-b"),
    ...["default", "kube-system", "vpn"].map((n) => ({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: n,
        labels: { "kubernetes.io/metadata.name": n },
        // strings and keys whose YAML style or order kubectl decides in its own way
        ...(n === "vpn" ? { annotations: TRICKY_ANNOTATIONS } : {}),
      },
      spec: { finalizers: ["kubernetes"] },
      status: { phase: "Active" },
    })),
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "ip-masq-agent", namespace: "kube-system", managedFields },
      data: {
        config:
          "nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 172.16.0.0/12\n  - 192.168.0.0/16\nmasqLinkLocal: false\nresyncInterval: 60s\n",
      },
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cluster-autoscaler-status", namespace: "kube-system" },
      data: { status: "unrelated" },
    },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "vpn-server-key", namespace: "vpn" },
      type: "Opaque",
      data: { "server.key": Buffer.from("SECRET-VPN-KEY-never-read").toString("base64") },
    },
    daemonSet(
      "ip-masq-agent",
      { "k8s-app": "ip-masq-agent" },
      "gke.gcr.io/ip-masq-agent:v2.12.3-gke.5",
      ["--v=2", "--logtostderr", "--masq-chain=IP-MASQ", "--nomasq-all-reserved-ranges"],
      "pool-a",
    ),
    daemonSet(
      "fluentbit-gke",
      { "k8s-app": "fluentbit-gke" },
      "gke.gcr.io/fluent-bit:v1.8.12-gke.27",
      ["--config=/etc/fluent-bit.conf"],
    ),
    pod("kube-system", "ip-masq-agent-7k2xq", NODES[0]!, { "k8s-app": "ip-masq-agent" }, [
      "ip-masq-agent",
    ]),
    pod("kube-system", "ip-masq-agent-m9f4s", NODES[1]!, { "k8s-app": "ip-masq-agent" }, [
      "ip-masq-agent",
    ]),
    pod(
      "kube-system",
      `kube-proxy-${NODES[2]}`,
      NODES[2]!,
      { component: "kube-proxy", tier: "node" },
      ["kube-proxy"],
    ),
    pod("kube-system", "fluentbit-gke-abcde", NODES[0]!, { "k8s-app": "fluentbit-gke" }, [
      "fluentbit",
    ]),
    pod("vpn", "openvpn-6f7d8c9b5-x2x7p", NODES[2]!, { app: "openvpn" }, ["openvpn"], {
      securityContext: {},
    }),
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: "kubernetes",
        namespace: "default",
        labels: { component: "apiserver", provider: "kubernetes" },
      },
      spec: {
        clusterIP: "10.8.0.1",
        clusterIPs: ["10.8.0.1"],
        ports: [{ name: "https", port: 443, protocol: "TCP", targetPort: 443 }],
        type: "ClusterIP",
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "openvpn", namespace: "vpn" },
      spec: {
        clusterIP: "10.8.12.7",
        ports: [{ name: "openvpn", port: 443, protocol: "TCP", targetPort: 443 }],
        selector: { app: "openvpn" },
        type: "LoadBalancer",
      },
    },
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: "allow-from-vpn-pool", namespace: "default" },
      spec: {
        podSelector: {},
        policyTypes: ["Ingress"],
        ingress: [{ from: [{ ipBlock: { cidr: "10.8.0.0/24" } }] }],
      },
    },
    {
      apiVersion: "networking.gke.io/v1",
      kind: "EgressNATPolicy",
      metadata: { name: "default" },
      spec: {
        action: "NoSNAT",
        destinations: [
          { cidr: "10.0.0.0/8" },
          { cidr: "172.16.0.0/12" },
          { cidr: "192.168.0.0/16" },
        ],
      },
    },
  ];
}

const AGENT_CHAIN = [
  '-A IP-MASQ -d 169.254.0.0/16 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
  '-A IP-MASQ -d 10.0.0.0/8 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
  '-A IP-MASQ -d 172.16.0.0/12 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
  '-A IP-MASQ -d 192.168.0.0/16 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
  '-A IP-MASQ -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE --random-fully',
];
const STARTUP_CHAIN = [
  '-A IP-MASQ -d 169.254.0.0/16 -m comment --comment "ip-masq: local traffic is not subject to MASQUERADE" -j RETURN',
  '-A IP-MASQ -d 10.0.0.0/8 -m comment --comment "ip-masq: RFC 1918 reserved range is not subject to MASQUERADE" -j RETURN',
  '-A IP-MASQ -m comment --comment "ip-masq: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE',
];

/** A node's `iptables-save` as iptables 1.8.9 (nf_tables) prints it. */
export function nodeIptablesSave(nodeName: string, withAgent: boolean): string {
  return [
    `# Generated by iptables-save v1.8.9 (nf_tables) on Sun Nov 29 10:00:00 2026`,
    "*nat",
    ":PREROUTING ACCEPT [0:0]",
    ":INPUT ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ":POSTROUTING ACCEPT [0:0]",
    ":IP-MASQ - [0:0]",
    // the node-startup script and the agent each write their own jump (comment "ip-masq:" vs "ip-masq-agent:")
    `-A POSTROUTING -m comment --comment "${withAgent ? "ip-masq-agent" : "ip-masq"}: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom IP-MASQ chain" -m addrtype ! --dst-type LOCAL -j IP-MASQ`,
    ...(withAgent ? AGENT_CHAIN : STARTUP_CHAIN),
    "COMMIT",
    `# Completed on Sun Nov 29 10:00:00 2026 (${nodeName})`,
    "",
  ].join("\n");
}

/** A pcap (Ethernet) holding one ICMP echo request from a pod to 10.20.30.40. */
export function tinyPcap(): Buffer {
  const gh = Buffer.alloc(24);
  gh.writeUInt32LE(0xa1b2c3d4, 0);
  gh.writeUInt16LE(2, 4);
  gh.writeUInt16LE(4, 6);
  gh.writeUInt32LE(262144, 16);
  gh.writeUInt32LE(1, 20);
  const ip = Buffer.from("450000540000400040010000" + "0a04000c" + "0a141e28", "hex");
  const icmp = Buffer.from("0800f7ff00010001", "hex");
  const frame = Buffer.concat([
    Buffer.from("0242ac1100020242ac1100030800", "hex"),
    ip,
    icmp,
    Buffer.alloc(56),
  ]);
  const ph = Buffer.alloc(16);
  ph.writeUInt32LE(1764410400, 0);
  ph.writeUInt32LE(frame.length, 8);
  ph.writeUInt32LE(frame.length, 12);
  return Buffer.concat([gh, ph, frame]);
}

/**
 * `sh -c SCRIPT` where SCRIPT loops over quoted commands (`for c in 'a b' 'c'; do`), framing each
 * command's output as the real shell does with the script's printf lines (see
 * collect-commands.ts NODE_SCRIPT, whose real-shell output is checked in its own test).
 */
export function emulateScript(
  argv: readonly string[],
  one: (argv: readonly string[]) => ExecAnswer,
): ExecAnswer | undefined {
  if (argv.length !== 3 || argv[0] !== "sh" || argv[1] !== "-c") return undefined;
  const m = /^for c in (.*); do$/m.exec(argv[2] ?? "");
  if (!m) return undefined;
  const commands = [...m[1]!.matchAll(/'([^']*)'/g)].map((x) => x[1]!);
  const parts: Buffer[] = [];
  for (const c of commands) {
    const a = one(c.split(" "));
    const stderr = a.notFound ? `sh: 1: ${c.split(" ")[0]}: not found\n` : (a.stderr ?? "");
    parts.push(
      Buffer.from(`\x1epodpath-begin ${c}\n`),
      Buffer.from(a.notFound ? "" : (a.stdout ?? "")),
      Buffer.from(
        `\n\x1epodpath-stderr\n${stderr}\n\x1epodpath-end ${a.notFound ? 127 : (a.code ?? 0)}\n`,
      ),
    );
  }
  return { stdout: Buffer.concat(parts) };
}

/** What the fixed read commands print in this cluster's pods and collector pods. */
export function smallClusterExec(pod: Obj, argv: readonly string[]): ExecAnswer {
  const framed = emulateScript(argv, (a) => smallClusterExec(pod, a));
  if (framed) return framed;
  const cmd = argv.join(" ");
  const nodeName = String((pod["spec"] as { nodeName?: string }).nodeName ?? "");
  const isCollector =
    pod.metadata.labels?.["app.kubernetes.io/managed-by"] === "podpath" ||
    pod.metadata.labels?.["bench/floor"] === "true";
  if (isCollector) {
    if (cmd === "iptables-save")
      return { stdout: nodeIptablesSave(nodeName, nodeName.includes("pool-a")) };
    if (cmd === "ip6tables-save")
      return {
        stdout:
          "# Generated by ip6tables-save v1.8.9 (nf_tables)\n*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n",
      };
    if (argv[0] === "sysctl")
      return {
        stdout:
          "net.ipv4.ip_forward = 1\nnet.ipv4.conf.all.rp_filter = 1\nnet.ipv4.conf.default.rp_filter = 1\n",
      };
    if (cmd === "ip route show table all")
      return {
        stdout:
          "default via 10.128.0.1 dev eth0 proto dhcp src 10.128.0.2 metric 1024\n10.4.0.12 dev gke3f1e2d3c4b5 scope host\nlocal 10.128.0.2 dev eth0 table local proto kernel scope host src 10.128.0.2\nlocal 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1\nlocal 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1\nbroadcast 127.255.255.255 dev lo table local proto kernel scope link src 127.0.0.1\nlocal ::1 dev lo table local proto kernel metric 0 pref medium\n",
      };
    if (cmd === "ip rule")
      return {
        stdout:
          "0:\tfrom all lookup local\n32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n",
      };
    // pool-b's nodes boot with ipv6.disable=1: `ip -6` answers as such a kernel does
    if (argv[0] === "ip" && argv[1] === "-6" && nodeName.includes("pool-b"))
      return {
        stderr: "RTNETLINK answers: Address family not supported by protocol\nDump terminated\n",
        code: 2,
      };
    if (cmd === "ip -6 route show table all")
      return {
        stdout:
          "fe80::/64 dev eth0 proto kernel metric 256 pref medium\nlocal ::1 dev lo table local proto kernel metric 0 pref medium\n",
      };
    if (cmd === "ip -6 rule")
      return { stdout: "0:\tfrom all lookup local\n32766:\tfrom all lookup main\n" };
    if (cmd === "ip addr")
      return {
        stdout:
          "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\n    inet 127.0.0.1/8 scope host lo\n2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1460 qdisc mq state UP group default qlen 1000\n    inet 10.128.0.2/32 scope global dynamic eth0\n",
      };
    if (cmd === "conntrack -L")
      return {
        stdout:
          "icmp     1 29 src=10.4.0.12 dst=10.20.30.40 type=8 code=0 id=1 [UNREPLIED] src=10.20.30.40 dst=10.4.0.12 type=0 code=0 id=1 mark=0 use=1\n",
        stderr: "conntrack v1.4.7 (conntrack-tools): 1 flow entries have been shown.\n",
      };
    if (argv[0] === "timeout" && argv[2] === "tcpdump")
      return { stdout: tinyPcap(), stderr: "tcpdump: data link type LINUX_SLL2\n", code: 124 };
    return { notFound: true };
  }
  if (pod.metadata.name.startsWith("openvpn-")) {
    if (argv[0] === "sysctl") return { notFound: true }; // the image has no sysctl binary
    if (cmd === "cat /proc/sys/net/ipv4/ip_forward") return { stdout: "0\n" };
    if (cmd === "iptables-save")
      return {
        stdout:
          "# Generated by iptables-save v1.8.9 (legacy)\n*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -s 10.8.0.0/24 -o eth0 -j MASQUERADE\nCOMMIT\n",
      };
    if (cmd === "ip route")
      return {
        stdout:
          "default via 169.254.1.1 dev eth0\n10.8.0.0/24 dev tun0 proto kernel scope link src 10.8.0.1\n",
      };
    if (cmd === "ip addr")
      return {
        stdout:
          "3: eth0@if12: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1460 qdisc noqueue state UP\n    inet 10.4.2.9/24 brd 10.4.2.255 scope global eth0\n4: tun0: <POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UNKNOWN\n    inet 10.8.0.1/24 scope global tun0\n",
      };
  }
  return { notFound: true };
}
