/**
 * @module agents/pod-security/kubelet-sysctls — the kubelet's sysctl admission: the safe set per
 * Kubernetes version (pkg/kubelet/sysctl/safe_sysctls.go), which sysctls are namespaced
 * (component-helpers node/util/sysctl/namespace.go), `--allowed-unsafe-sysctls` patterns
 * (pkg/kubelet/sysctl/allowlist.go) and the exact rejection a user sees (`SysctlForbidden`).
 */

/** Kubelet safe sysctls: the Kubernetes minor that added each, and the kernel it needs. */
export const KUBELET_SAFE_SYSCTLS: readonly {
  readonly name: string;
  readonly since: number;
  readonly kernel?: string;
}[] = [
  { name: "kernel.shm_rmid_forced", since: 0 },
  { name: "net.ipv4.ip_local_port_range", since: 0 },
  { name: "net.ipv4.tcp_syncookies", since: 0 },
  { name: "net.ipv4.ping_group_range", since: 18 },
  { name: "net.ipv4.ip_unprivileged_port_start", since: 22 },
  { name: "net.ipv4.ip_local_reserved_ports", since: 27, kernel: "3.16" },
  { name: "net.ipv4.tcp_keepalive_time", since: 29, kernel: "4.5" },
  { name: "net.ipv4.tcp_fin_timeout", since: 29, kernel: "4.6" },
  { name: "net.ipv4.tcp_keepalive_intvl", since: 29, kernel: "4.5" },
  { name: "net.ipv4.tcp_keepalive_probes", since: 29, kernel: "4.5" },
  { name: "net.ipv4.tcp_rmem", since: 32, kernel: "4.15" },
  { name: "net.ipv4.tcp_wmem", since: 32, kernel: "4.15" },
  { name: "net.ipv4.tcp_slow_start_after_idle", since: 37, kernel: "4.15" },
  { name: "net.ipv4.tcp_notsent_lowat", since: 37, kernel: "4.7" },
];

function kernelAtLeast(have: string, need: string): boolean {
  const a = have.split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0);
  const b = need.split(".").map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < b.length; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    if (x !== y) return x > y;
  }
  return true;
}

/** The kubelet's safe set at a Kubernetes minor; kernel-gated entries drop out on older kernels. */
export function kubeletSafeSysctls(minor: number, kernelVersion?: string): string[] {
  return KUBELET_SAFE_SYSCTLS.filter(
    (s) =>
      s.since <= minor &&
      (s.kernel === undefined ||
        kernelVersion === undefined ||
        kernelAtLeast(kernelVersion, s.kernel)),
  ).map((s) => s.name);
}

export type SysctlNamespace = "ipc" | "net" | "uts" | "user";

const EXACT_NS: Readonly<Record<string, SysctlNamespace>> = {
  "kernel.domainname": "uts",
  "kernel.sem": "ipc",
  "kernel.shmall": "ipc",
  "kernel.shmmax": "ipc",
  "kernel.shmmni": "ipc",
  "kernel.shm_rmid_forced": "ipc",
  "kernel.msgmax": "ipc",
  "kernel.msgmnb": "ipc",
  "kernel.msgmni": "ipc",
  "kernel.shm": "ipc",
  "kernel.msg": "ipc",
};
const PREFIX_NS: readonly [string, SysctlNamespace][] = [
  ["net", "net"],
  ["fs.mqueue", "ipc"],
  ["user", "user"],
];

/**
 * The kernel namespace a sysctl belongs to, or undefined for a node-level (unnamespaced) sysctl,
 * which no pod may set. A prefix matches only when a `.` follows it.
 */
export function sysctlNamespace(name: string): SysctlNamespace | undefined {
  const n = normalizeSysctlName(name);
  const exact = EXACT_NS[n];
  if (exact) return exact;
  for (const [prefix, ns] of PREFIX_NS) if (n.startsWith(`${prefix}.`)) return ns;
  return undefined;
}

/**
 * sysctl.d(5) notation as the kubelet normalises it: when the first separator is `/`, every `.`
 * and `/` are swapped (`net/ipv4/conf/eno2.100/rp_filter` → `net.ipv4.conf.eno2/100.rp_filter`).
 */
export function normalizeSysctlName(name: string): string {
  const firstSep = name.search(/[./]/);
  if (firstSep < 0 || name[firstSep] === ".") return name;
  return name.replace(/[./]/g, (c) => (c === "." ? "/" : "."));
}

/** A pattern as `--allowed-unsafe-sysctls` takes it: an exact name, or a prefix ending in `*`. */
export function sysctlPatternMatches(pattern: string, name: string): boolean {
  const n = normalizeSysctlName(name);
  if (pattern.endsWith("*")) return n.startsWith(pattern.slice(0, -1));
  return n === normalizeSysctlName(pattern);
}

/** Why a kubelet would refuse to start with this pattern, or undefined when it is acceptable. */
export function sysctlPatternError(pattern: string): string | undefined {
  const seg = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?";
  const re = new RegExp(`^(${seg}[./])*((${seg})|(${seg})?\\*)$`);
  if (pattern.length > 253 || !re.test(pattern)) {
    return `sysctl ${JSON.stringify(pattern)} must have at most 253 characters and match regex ${re.source}`;
  }
  if (pattern.endsWith("*")) {
    const known = sysctlNamespace(pattern.slice(0, -1)) !== undefined;
    return known
      ? undefined
      : `the sysctls ${JSON.stringify(pattern)} are not known to be namespaced`;
  }
  return sysctlNamespace(pattern) === undefined
    ? `the sysctl ${JSON.stringify(pattern)} are not known to be namespaced`
    : undefined;
}

export interface PodSysctl {
  readonly name: string;
  readonly value: string;
}

/** The kubelet's verdict on one pod's sysctls. */
export type KubeletSysctlVerdict =
  | { readonly kind: "ok" }
  | { readonly kind: "forbidden"; readonly sysctl: string; readonly message: string };

/**
 * Kubelet allowlist admission (allowlist.go validateSysctl): the first sysctl, in spec order,
 * that is neither safe nor allowed, or a namespaced one the pod shares with the host.
 * `kubernetesMinor` decides the safe set and the namespace word (`net` before 1.29, `Net` after).
 */
export function kubeletAdmitSysctls(
  sysctls: readonly PodSysctl[],
  opts: {
    readonly allowedUnsafe: readonly string[];
    readonly kubernetesMinor: number;
    readonly hostNetwork?: boolean;
    readonly hostIPC?: boolean;
    readonly kernelVersion?: string;
  },
): KubeletSysctlVerdict {
  const patterns = [
    ...kubeletSafeSysctls(opts.kubernetesMinor, opts.kernelVersion),
    ...opts.allowedUnsafe,
  ];
  for (const s of sysctls) {
    const name = normalizeSysctlName(s.name);
    const allowed = patterns.some((p) => sysctlPatternMatches(p, name));
    if (!allowed) {
      return {
        kind: "forbidden",
        sysctl: name,
        message: `forbidden sysctl: ${JSON.stringify(name)} not allowlisted`,
      };
    }
    const ns = sysctlNamespace(name);
    // component-helpers' Namespace values: "net"/"ipc" before 1.29, "Net"/"IPC" after
    const word = (n: "net" | "ipc") =>
      opts.kubernetesMinor >= 29 ? ({ net: "Net", ipc: "IPC" } as const)[n] : n;
    if ((ns === "net" && opts.hostNetwork) || (ns === "ipc" && opts.hostIPC)) {
      const hostNs = ns === "net" ? "net" : "ipc";
      return {
        kind: "forbidden",
        sysctl: name,
        message: `forbidden sysctl: ${JSON.stringify(name)} not allowed with host ${word(hostNs)} enabled`,
      };
    }
  }
  return { kind: "ok" };
}
