/**
 * @module lab/scenarios/service-lab — the node the Service and filter scenarios share: a client
 * pod and an endpoint pod attached by routed veths (a /32 route per pod, proxy ARP on the node's
 * end, as Calico attaches them), the node's eth0 toward a second host, the node's whole rule set
 * loaded with iptables-restore; and the probe that says how the kernel answered a connection:
 * connected, or refused with which ICMP message (tcpdump in the client pod sees it).
 *
 * Topology (IPv4):
 *   client pod (10.244.1.7/32) ─ node (veth-client · veth-ep · eth0 192.168.50.10/24) ─ peer (192.168.50.20/24)
 *   endpoint pod (10.244.1.8/32) ─┘
 */
import type { ChildProcess } from "node:child_process";
import {
  collectKernelState,
  renderTranscript,
  stopProcess,
  writeSnapshotFile,
} from "../artifacts.ts";
import type { Lab, Namespace } from "../netns.ts";
import { kubectlList } from "./masquerade-cluster.ts";
import { appPod, ipBatch, must, nodeObject } from "./snat-replica.ts";

export const SVC_NODE = "worker-1";
export const SVC_NODE_IP = "192.168.50.10";
export const SVC_PEER_IP = "192.168.50.20";
export const SVC_CLUSTER_CIDR = "10.244.0.0/16";
export const SVC_CLIENT_IP = "10.244.1.7";
export const SVC_ENDPOINT_IP = "10.244.1.8";
export const SVC_CLIENT_POD = "client-7c9d5b8f4-k2p9q";
export const SVC_ENDPOINT_POD = "web-6b7f9c5d8-x4m2n";
/** The port the endpoint pod and the peer host listen on. */
export const SVC_LISTEN_PORT = 8080;
const GATEWAY = "169.254.1.1";

/** The namespaces of the built node. */
export interface ServiceLab {
  readonly client: Namespace;
  readonly endpoint: Namespace;
  readonly node: Namespace;
  readonly peer: Namespace;
  readonly listeners: readonly ChildProcess[];
}

/** Starts a TCP server answering "pong" on `port`; resolves once it listens. */
async function listen(ns: Namespace, port: number): Promise<ChildProcess> {
  const script =
    "const s=require('net').createServer(c=>{c.on('error',()=>{});c.end('pong\\n')});" +
    `s.listen(${port},'0.0.0.0',()=>process.stdout.write('ready\\n'))`;
  const child = ns.spawn([process.execPath, "-e", script]);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`listener in ${ns.name} did not start`)),
      10_000,
    );
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      if (d.includes("ready")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`listener in ${ns.name} exited ${code}`));
    });
  });
  return child;
}

/** Builds the node and its neighbours, loads `restore` (iptables-restore input) on the node. */
export async function buildServiceLab(lab: Lab, restore: string): Promise<ServiceLab> {
  const client = await lab.addNamespace("client");
  const endpoint = await lab.addNamespace("ep");
  const node = await lab.addNamespace("node");
  const peer = await lab.addNamespace("peer");
  await lab.link(client, "eth0", node, "veth-client");
  await lab.link(endpoint, "eth0", node, "veth-ep");
  await lab.link(node, "eth0", peer, "eth0");
  const pod = (ip: string) => [
    `addr add ${ip}/32 dev eth0`,
    "link set eth0 up",
    `route add ${GATEWAY} dev eth0 scope link`,
    `route add default via ${GATEWAY} dev eth0`,
  ];
  await ipBatch(client, pod(SVC_CLIENT_IP));
  await ipBatch(endpoint, pod(SVC_ENDPOINT_IP));
  await ipBatch(node, [
    `addr add ${SVC_NODE_IP}/24 dev eth0`,
    "link set eth0 up",
    "link set lo up",
    "link set veth-client up",
    "link set veth-ep up",
    `route add ${SVC_CLIENT_IP}/32 dev veth-client scope link`,
    `route add ${SVC_ENDPOINT_IP}/32 dev veth-ep scope link`,
    `route add default via ${SVC_PEER_IP} dev eth0`,
  ]);
  await must(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  for (const dev of ["veth-client", "veth-ep"]) {
    await must(node, ["sysctl", "-q", "-w", `net.ipv4.conf.${dev}.proxy_arp=1`]);
  }
  await ipBatch(peer, [
    `addr add ${SVC_PEER_IP}/24 dev eth0`,
    "link set eth0 up",
    `route add ${SVC_CLUSTER_CIDR} via ${SVC_NODE_IP}`,
  ]);
  await must(node, ["iptables-restore", "-w"], restore);
  const listeners = [await listen(endpoint, SVC_LISTEN_PORT), await listen(peer, SVC_LISTEN_PORT)];
  return { client, endpoint, node, peer, listeners };
}

/** Stops the listeners the lab started. */
export async function stopServiceLab(l: ServiceLab): Promise<void> {
  for (const c of l.listeners) await stopProcess(c);
}

/** What the kernel did with one connection attempt, as the client saw it. */
export interface ConnectResult {
  /** The command as typed, and its output (for the probe transcript). */
  readonly shown: string;
  readonly output: string;
  readonly connected: boolean;
  /** The ICMP error that came back, as tcpdump printed it; undefined when none did. */
  readonly icmp?: string;
}

/** tcpdump's words for the ICMP errors a REJECT sends (print-icmp.c). */
export function icmpKindOf(line: string): string | undefined {
  if (/tcp port \d+ unreachable|udp port \d+ unreachable/.test(line))
    return "icmp-port-unreachable";
  if (/host [\d.]+ unreachable - admin prohibited filter/.test(line))
    return "icmp-admin-prohibited";
  if (/host [\d.]+ unreachable - admin prohibited/.test(line)) return "icmp-host-prohibited";
  if (/net [\d.]+ unreachable - admin prohibited/.test(line)) return "icmp-net-prohibited";
  if (/host [\d.]+ unreachable/.test(line)) return "icmp-host-unreachable";
  if (/net [\d.]+ unreachable/.test(line)) return "icmp-net-unreachable";
  if (/protocol \d+ unreachable/.test(line)) return "icmp-proto-unreachable";
  return undefined;
}

/** `nc` from the client pod to ip:port, with tcpdump watching for the ICMP error. */
export async function connectFrom(ns: Namespace, ip: string, port: number): Promise<ConnectResult> {
  const dump = ns.spawn(["tcpdump", "-l", "-nn", "-c", "1", "-i", "eth0", "icmp"]);
  let out = "";
  let err = "";
  dump.stdout?.setEncoding("utf8").on("data", (d: string) => {
    out += d;
  });
  const exited = new Promise<void>((resolve) => dump.on("exit", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tcpdump did not start: ${err}`)), 10_000);
    dump.stderr?.setEncoding("utf8").on("data", (d: string) => {
      err += d;
      if (/listening on/.test(err)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  const argv = ["nc", "-v", "-N", "-w", "2", ip, String(port)];
  const r = await ns.exec(argv, { input: "", timeoutMs: 15_000 });
  const connected = r.code === 0;
  if (!connected && /refused|No route|unreachable|prohibited/i.test(r.stderr)) {
    // nc saw the error the ICMP message carried: tcpdump has it (or is about to print it)
    await Promise.race([exited, new Promise((res) => setTimeout(res, 3_000))]);
  }
  await stopProcess(dump);
  const line = out.split("\n").find((l) => l.includes("ICMP"));
  const icmp = line ? icmpKindOf(line) : undefined;
  return {
    shown: `${argv.join(" ")} </dev/null`,
    output: r.stderr + r.stdout,
    connected,
    ...(icmp ? { icmp } : {}),
  };
}

/** One connection a scenario probes from the client pod, and what it expects the kernel to do. */
export interface ProbeTarget {
  readonly ip: string;
  readonly port: number;
  /** How the summary names it ("web ClusterIP"). */
  readonly label: string;
}

/** The cluster objects of the node: the Node and the two pods. */
export function serviceClusterObjects(): string {
  const node = nodeObject({
    name: SVC_NODE,
    ip: SVC_NODE_IP,
    spec: { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24"] },
    nodeInfo: { kubeletVersion: "v1.33.2", kernelVersion: "6.8.0-60-generic" },
  });
  const pod = (name: string, ip: string) =>
    appPod({ name, namespace: "default", nodeName: SVC_NODE, nodeIp: SVC_NODE_IP, podIp: ip });
  return kubectlList([
    node,
    pod(SVC_CLIENT_POD, SVC_CLIENT_IP),
    pod(SVC_ENDPOINT_POD, SVC_ENDPOINT_IP),
  ]);
}

/**
 * Probes every target from the client pod and, with `out`, writes the snapshot: the node's
 * iptables-save, `ip route show table all`, `ip rule`, ip addr, sysctl; the client's transcript;
 * the cluster objects. Returns the kernel's answers in the targets' order.
 */
export async function probeServiceLab(
  l: ServiceLab,
  targets: readonly ProbeTarget[],
  out: string | undefined,
): Promise<{ results: ConnectResult[]; files: string[]; summary: string[] }> {
  const results: ConnectResult[] = [];
  for (const t of targets) results.push(await connectFrom(l.client, t.ip, t.port));
  const summary = targets.map((t, i) => {
    const r = results[i]!;
    return `${t.label} ${t.ip}:${t.port}: ${r.connected ? "connected" : `refused (${r.icmp ?? "no ICMP seen"})`}`;
  });
  const files: string[] = [];
  if (out === undefined) return { results, files, summary };
  const dir = `nodes/${SVC_NODE}`;
  files.push(
    ...(await collectKernelState(l.node, out, dir, ["iptables-save", "ip-addr", "sysctl"])),
  );
  files.push(
    writeSnapshotFile(
      out,
      `${dir}/ip-route.txt`,
      await must(l.node, ["ip", "route", "show", "table", "all"]),
    ),
    writeSnapshotFile(out, `${dir}/ip-rule.txt`, await must(l.node, ["ip", "rule", "show"])),
    writeSnapshotFile(
      out,
      `probes/pod-${SVC_CLIENT_POD}.txt`,
      renderTranscript(
        results.map((r) => ({ shown: r.shown, code: r.connected ? 0 : 1, output: r.output })),
        `# client: pod/default/${SVC_CLIENT_POD}`,
      ),
    ),
    writeSnapshotFile(out, "cluster/cluster.yaml", serviceClusterObjects()),
  );
  return { results, files, summary };
}
