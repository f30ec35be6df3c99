/**
 * @module test/components/real-node — a real Kubernetes node for the component tests: the real
 * kubelet (built from k8s.io/kubernetes into .components/) and containerd with runc and the CNI
 * plugins from Debian, all inside a lab network namespace, registered with the test API server
 * (test/components/cluster.ts). Pods scheduled to it (by `spec.nodeName`: no scheduler runs) get
 * their sandbox, network namespace and address from the real bridge plugin, and run images built
 * on this machine (oci-image.ts), since no registry is reachable.
 *
 * Everything the node creates stays in one temporary folder: containerd's root and state (pod
 * network namespaces are mounted under the state folder, not /run/netns), the kubelet's root, the
 * CNI configuration and the logs. The node's namespace comes from the lab harness (src/lab/netns.ts)
 * and is removed with it. containerd and the kubelet are started with `nsenter --net` rather than
 * `ip netns exec`, which would mount a fresh /sys without the cgroup hierarchies they need.
 *
 * Two facts of these machines shape the configuration: the cgroup hierarchy is v1 (hybrid), so the
 * kubelet runs with `failCgroupV1: false` and the runtime is runc (crun refuses hybrid mode); and
 * root lacks CAP_SYS_RESOURCE, so containerd must not lower the sandbox's oom_score_adj
 * (`restrict_oom_score_adj`), or runc fails with "can't get final child's PID from pipe".
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Lab, Namespace } from "../../src/lab/netns.ts";
import { reachApiFrom, writeInnerKubeconfig } from "./api-bridge.ts";
import type { Cluster } from "./cluster.ts";
import { componentPath } from "./component-guard.ts";
import { buildImage, type ImageSpec } from "./oci-image.ts";

/** Where the node's folders start; a stale one (its owner dead) is cleaned at the next start. */
const DIR_PREFIX = "podpath-real-node-";
const INNER_API_PORT = 6443;
export const CNI_BIN_DIR = "/usr/lib/cni";

/** The pod sandbox image the node's containerd is configured with (sandbox_image): it only sleeps. */
export const PAUSE_IMAGE: ImageSpec = {
  ref: "podpath.local/pause:1",
  binaries: ["/bin/busybox"],
  applets: ["sleep"],
  cmd: ["/bin/sleep", "2147483647"],
};

/** What collect --node-state runs in its collector pods (--collector-image), named `ref`. */
export function collectorImage(ref: string): ImageSpec {
  return {
    ref,
    binaries: [
      "/bin/busybox",
      "/usr/sbin/iptables-save",
      "/usr/sbin/ip6tables-save",
      "/sbin/ip",
      "/usr/sbin/conntrack",
      "/usr/bin/tcpdump",
      "/usr/bin/timeout",
    ],
    applets: ["sh", "sleep", "cat", "sysctl", "date"],
    // the match and target extensions iptables-save loads by name
    folders: ["/usr/lib/x86_64-linux-gnu/xtables"],
    cmd: ["/bin/sleep", "2147483647"],
  };
}

/** Why a real node cannot run here (false when it can); in CI a missing tool is an error. */
export function realNodeSkip(): false | string {
  const reason = missingTool();
  if (reason === undefined) return false;
  if (process.env["CI"]) throw new Error(`the real-node tests must run in CI, but ${reason}`);
  return `real-node test skipped locally: ${reason}`;
}

function missingTool(): string | undefined {
  for (const tool of ["containerd", "ctr", "runc", "containerd-shim-runc-v2", "nsenter"]) {
    try {
      execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
    } catch {
      return `${tool} is not installed (Debian packages containerd, runc)`;
    }
  }
  if (!existsSync(join(CNI_BIN_DIR, "bridge"))) {
    return `no CNI plugins in ${CNI_BIN_DIR} (Debian package containernetworking-plugins)`;
  }
  if (!existsSync(componentPath("kubelet"))) return "the kubelet is not built";
  return undefined;
}

export interface RealNodeOptions {
  readonly name: string;
  /** The node's address on `eth0` in its namespace (the kubelet's --node-ip). */
  readonly nodeIp: string;
  /** `<file name>` → content of the CNI configuration folder. */
  readonly cni: Record<string, string>;
  readonly images: readonly ImageSpec[];
  /** The cluster's node egress socket (ClusterOptions.nodeEgressSocket), for exec and logs. */
  readonly egressSocket?: string;
}

export interface RealNode {
  readonly name: string;
  readonly ns: Namespace;
  readonly dir: string;
  readonly cniDir: string;
  /** `ctr -n k8s.io …` against the node's containerd. */
  ctr(args: readonly string[], timeoutMs?: number): string;
  /** Runs a command in a running container (a task) with the runtime's own exec. */
  execIn(containerId: string, argv: readonly string[]): { code: number; output: string };
  /** The last lines of the kubelet's and containerd's logs, for failure messages. */
  logs(): string;
  stop(): Promise<void>;
}

/**
 * The API server's way to the kubelet: an HTTP CONNECT proxy on a Unix socket (the cluster's
 * egress socket), running inside the node's namespace. A CONNECT to the node's name goes to its
 * address (the API server tries the Hostname address first).
 */
const CONNECT_PROXY = `const net = require("node:net");
const [sock, nodeName, nodeIp] = process.argv.slice(1);
net.createServer((c) => {
  let head = Buffer.alloc(0);
  const onData = (d) => {
    head = Buffer.concat([head, d]);
    const end = head.indexOf("\\r\\n\\r\\n");
    if (end < 0) return;
    c.off("data", onData);
    const m = /^CONNECT ([^\\s:]+):(\\d+) /.exec(head.toString("latin1"));
    if (!m) return c.end("HTTP/1.1 400 Bad Request\\r\\n\\r\\n");
    const host = m[1] === nodeName ? nodeIp : m[1];
    const u = net.connect(Number(m[2]), host, () => {
      c.write("HTTP/1.1 200 Connection established\\r\\n\\r\\n");
      const rest = head.subarray(end + 4);
      if (rest.length) u.write(rest);
      c.pipe(u); u.pipe(c);
    });
    u.on("error", () => c.destroy()); c.on("error", () => u.destroy());
  };
  c.on("data", onData);
}).listen(sock, () => console.log("listening"));`;

function containerdConfig(dir: string): string {
  return `version = 2
root = "${dir}/containerd/root"
state = "${dir}/containerd/state"
[grpc]
  address = "${dir}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE.ref}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN_DIR}"
    conf_dir = "${dir}/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`;
}

function kubeletConfig(dir: string): string {
  return JSON.stringify({
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    failCgroupV1: false,
    cgroupDriver: "cgroupfs",
    cgroupsPerQOS: false,
    enforceNodeAllocatable: [],
    failSwapOn: false,
    authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
    authorization: { mode: "AlwaysAllow" },
    readOnlyPort: 0,
    address: "0.0.0.0",
    healthzBindAddress: "127.0.0.1",
    healthzPort: 0,
    resolvConf: "",
    evictionHard: {},
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    containerRuntimeEndpoint: `unix://${dir}/containerd.sock`,
  });
}

function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs: number): Promise<T> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const tick = () => {
      let v: T | undefined;
      try {
        v = probe();
      } catch {
        v = undefined;
      }
      if (v !== undefined) return resolve(v);
      if (Date.now() - start > timeoutMs) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(tick, 250);
    };
    tick();
  });
}

/** The mount points under `dir`, deepest first. */
function mountsUnder(dir: string): string[] {
  const points: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const p = line.split(" ")[4];
    if (p && (p === dir || p.startsWith(`${dir}/`))) points.push(p);
  }
  return points.sort((a, b) => b.length - a.length);
}

/** Kills every process whose root or working folder lies under `dir` (the pods' processes). */
function killProcessesUnder(dir: string): void {
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    for (const link of ["root", "cwd"]) {
      let target = "";
      try {
        target = readlinkSync(`/proc/${pid}/${link}`);
      } catch {
        continue;
      }
      if (target.startsWith(`${dir}/`)) {
        try {
          process.kill(Number(pid), "SIGKILL");
        } catch {
          // already gone
        }
        break;
      }
    }
  }
}

/** Removes a node folder: its pods' processes, its mounts, its files. */
function removeNodeDir(dir: string): void {
  killProcessesUnder(dir);
  for (const p of mountsUnder(dir)) {
    try {
      execFileSync("umount", ["-l", p], { stdio: "ignore" });
    } catch {
      // already gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

/** Removes node folders whose owner process died (a killed test run). */
export function removeStaleNodes(): void {
  for (const d of readdirSync(tmpdir())) {
    if (!d.startsWith(DIR_PREFIX)) continue;
    const dir = join(tmpdir(), d);
    let owner = 0;
    try {
      owner = Number(readFileSync(join(dir, "owner.pid"), "utf8"));
    } catch {
      // no owner file: a folder being made, or not ours to judge
      continue;
    }
    if (owner > 0 && existsSync(`/proc/${owner}`)) continue;
    removeNodeDir(dir);
  }
}

/**
 * Starts containerd and the kubelet in a new namespace of `lab`, linked by `eth0` to `uplink`
 * (the caller addresses the far end), and resolves once the API server shows the Node Ready.
 */
export async function startRealNode(
  cluster: Cluster,
  lab: Lab,
  uplink: { ns: Namespace; ifname: string },
  opts: RealNodeOptions,
): Promise<RealNode> {
  removeStaleNodes();
  const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  writeFileSync(join(dir, "owner.pid"), String(process.pid));
  const cniDir = join(dir, "cni");
  mkdirSync(cniDir);
  for (const [file, text] of Object.entries(opts.cni)) writeFileSync(join(cniDir, file), text);
  writeFileSync(join(dir, "containerd.toml"), containerdConfig(dir));
  writeFileSync(join(dir, "kubelet.json"), kubeletConfig(dir));

  const ns = await lab.addNamespace("node");
  await lab.link(ns, "eth0", uplink.ns, uplink.ifname);
  for (const argv of [
    ["ip", "link", "set", "lo", "up"],
    ["ip", "addr", "add", `${opts.nodeIp}/24`, "dev", "eth0"],
    ["ip", "link", "set", "eth0", "up"],
  ]) {
    const r = await ns.exec(argv);
    if (r.code !== 0) throw new Error(`${argv.join(" ")}: ${r.stderr}`);
  }

  // the API server, reached from inside the namespace through a Unix socket
  const apiPort = Number(new URL(cluster.url).port);
  const outer = await reachApiFrom(ns, apiPort, join(dir, "api.sock"), INNER_API_PORT);
  if (opts.egressSocket !== undefined) {
    const proxy = ns.spawn([
      process.execPath,
      "-e",
      CONNECT_PROXY,
      opts.egressSocket,
      opts.name,
      opts.nodeIp,
    ]);
    await new Promise<void>((resolve, reject) => {
      proxy.stdout?.on("data", (d: Buffer) => (d.toString().includes("listening") ? resolve() : 0));
      proxy.once("exit", (code) => reject(new Error(`CONNECT proxy exited ${code}`)));
    });
  }
  writeInnerKubeconfig(join(dir, "kubeconfig"), cluster, INNER_API_PORT);

  const logs: Record<string, string> = { containerd: "", kubelet: "" };
  const children: ChildProcess[] = [];
  const start = (name: string, argv: readonly string[]): ChildProcess => {
    const child = spawn("nsenter", [`--net=/run/netns/${ns.name}`, ...argv], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const keep = (d: Buffer) => {
      logs[name] = ((logs[name] ?? "") + d.toString()).slice(-20_000);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    children.push(child);
    return child;
  };
  const ctr = (args: readonly string[], timeoutMs = 60_000): string =>
    execFileSync("ctr", ["-a", join(dir, "containerd.sock"), "-n", "k8s.io", ...args], {
      encoding: "utf8",
      timeout: timeoutMs,
      stdio: ["ignore", "pipe", "pipe"],
    });

  let stopped = false;
  const node: RealNode = {
    name: opts.name,
    ns,
    dir,
    cniDir,
    ctr,
    execIn(containerId, argv) {
      const id = `x${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
      try {
        const output = ctr(["task", "exec", "--exec-id", id, containerId, ...argv], 120_000);
        return { code: 0, output };
      } catch (e) {
        const err = e as { status?: number; stdout?: string; stderr?: string };
        return { code: err.status ?? 1, output: `${err.stdout ?? ""}${err.stderr ?? ""}` };
      }
    },
    logs: () =>
      Object.entries(logs)
        .map(([k, v]) => `--- ${k} ---\n${v.slice(-4_000)}`)
        .join("\n"),
    async stop() {
      if (stopped) return;
      stopped = true;
      for (const c of children.reverse()) c.kill("SIGKILL");
      // the pods' processes (their root is under dir) and the runtime shims (their working
      // folder is the bundle under dir); the namespace itself goes with the caller's lab
      killProcessesUnder(dir);
      outer.close();
      removeNodeDir(dir);
    },
  };

  try {
    start("containerd", ["containerd", "--config", join(dir, "containerd.toml")]);
    await waitFor("containerd", () => (ctr(["version"], 5_000) ? true : undefined), 60_000);
    for (const image of opts.images) {
      const tar = join(dir, `${image.ref.replace(/[^a-z0-9]+/g, "-")}.tar`);
      buildImage(image, tar);
      ctr(["images", "import", tar], 120_000);
    }
    start("kubelet", [
      componentPath("kubelet"),
      `--config=${join(dir, "kubelet.json")}`,
      `--kubeconfig=${join(dir, "kubeconfig")}`,
      `--root-dir=${join(dir, "kubelet")}`,
      `--hostname-override=${opts.name}`,
      `--node-ip=${opts.nodeIp}`,
      "--v=1",
    ]);
    const ready = async (): Promise<boolean> => {
      const a = await cluster.api("GET", `/api/v1/nodes/${opts.name}`, cluster.adminToken);
      const conds = (a.body as { status?: { conditions?: { type: string; status: string }[] } })
        .status?.conditions;
      return a.status === 200 && !!conds?.some((c) => c.type === "Ready" && c.status === "True");
    };
    const start0 = Date.now();
    while (!(await ready())) {
      if (Date.now() - start0 > 180_000) throw new Error("the node did not become Ready in 180 s");
      await new Promise((r) => setTimeout(r, 500));
    }
  } catch (e) {
    const text = node.logs();
    await node.stop();
    throw new Error(`${(e as Error).message}\n${text}`);
  }
  return node;
}
