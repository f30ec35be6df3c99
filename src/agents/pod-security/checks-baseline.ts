/**
 * @module agents/pod-security/checks-baseline — the Baseline Pod Security checks, one function
 * per upstream check version (k8s.io/pod-security-admission policy/check_*.go at the reference
 * snapshot). Reasons and details are worded exactly as upstream, since users match on them.
 */
import {
  ALLOWED,
  type CheckResult,
  containersPhrase,
  forbidden,
  inUserNamespace,
  joinQuote,
  pluralize,
  sortedSet,
} from "./check-result.ts";
import { asArray, asObject, asString, type PodSpecView } from "./pod-spec.ts";

/** capabilities_baseline 1.0: the default capability set (case-sensitive, no `CAP_` prefix). */
export const BASELINE_CAPABILITIES: ReadonlySet<string> = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
]);

/** Sysctls Baseline allows, by the policy version that added them (policy/check_sysctls.go). */
export const PSA_SAFE_SYSCTLS: readonly { readonly name: string; readonly since: number }[] = [
  { name: "kernel.shm_rmid_forced", since: 0 },
  { name: "net.ipv4.ip_local_port_range", since: 0 },
  { name: "net.ipv4.tcp_syncookies", since: 0 },
  { name: "net.ipv4.ping_group_range", since: 0 },
  { name: "net.ipv4.ip_unprivileged_port_start", since: 0 },
  { name: "net.ipv4.ip_local_reserved_ports", since: 27 },
  { name: "net.ipv4.tcp_keepalive_time", since: 29 },
  { name: "net.ipv4.tcp_fin_timeout", since: 29 },
  { name: "net.ipv4.tcp_keepalive_intvl", since: 29 },
  { name: "net.ipv4.tcp_keepalive_probes", since: 29 },
  { name: "net.ipv4.tcp_rmem", since: 32 },
  { name: "net.ipv4.tcp_wmem", since: 32 },
  { name: "net.ipv4.tcp_slow_start_after_idle", since: 37 },
  { name: "net.ipv4.tcp_notsent_lowat", since: 37 },
];

/** The Baseline sysctl allow-set of a policy minor version. */
export function psaAllowedSysctls(minor: number): ReadonlySet<string> {
  return new Set(PSA_SAFE_SYSCTLS.filter((s) => s.since <= minor).map((s) => s.name));
}

const sc = (o: unknown) => asObject(o);

export function privileged(pod: PodSpecView): CheckResult {
  const bad = pod.containers.filter((c) => c.securityContext?.["privileged"] === true);
  if (bad.length === 0) return ALLOWED;
  return forbidden(
    "privileged",
    `${containersPhrase(bad.map((c) => c.name))} must not set securityContext.privileged=true`,
  );
}

export function capabilitiesBaseline(pod: PodSpecView): CheckResult {
  const bad: string[] = [];
  const caps: string[] = [];
  for (const c of pod.containers) {
    const capabilities = sc(c.securityContext?.["capabilities"]);
    if (!capabilities) continue;
    let valid = true;
    for (const cap of asArray(capabilities["add"])) {
      const name = String(cap);
      if (!BASELINE_CAPABILITIES.has(name)) {
        valid = false;
        caps.push(name);
      }
    }
    if (!valid) bad.push(c.name);
  }
  if (bad.length === 0) return ALLOWED;
  return forbidden(
    "non-default capabilities",
    `${containersPhrase(bad)} must not include ${joinQuote(sortedSet(caps))} in securityContext.capabilities.add`,
  );
}

export function hostNamespaces(pod: PodSpecView): CheckResult {
  const set: string[] = [];
  if (pod.spec["hostNetwork"] === true) set.push("hostNetwork=true");
  if (pod.spec["hostPID"] === true) set.push("hostPID=true");
  if (pod.spec["hostIPC"] === true) set.push("hostIPC=true");
  return set.length === 0 ? ALLOWED : forbidden("host namespaces", set.join(", "));
}

export function hostPathVolumes(pod: PodSpecView): CheckResult {
  const bad = asArray(pod.spec["volumes"])
    .map((v) => sc(v))
    .filter((v) => v?.["hostPath"] !== undefined && v?.["hostPath"] !== null)
    .map((v) => asString(v?.["name"]) ?? "");
  if (bad.length === 0) return ALLOWED;
  return forbidden(
    "hostPath volumes",
    `${pluralize("volume", "volumes", bad.length)} ${joinQuote(bad)}`,
  );
}

export function hostPorts(pod: PodSpecView): CheckResult {
  const bad: string[] = [];
  const ports: string[] = [];
  for (const c of pod.containers) {
    let valid = true;
    for (const p of asArray(c.raw["ports"])) {
      const hp = sc(p)?.["hostPort"];
      if (typeof hp === "number" && hp !== 0) {
        valid = false;
        ports.push(String(hp));
      }
    }
    if (!valid) bad.push(c.name);
  }
  if (bad.length === 0) return ALLOWED;
  const list = sortedSet(ports);
  return forbidden(
    "hostPort",
    `${containersPhrase(bad)} ${pluralize("uses", "use", bad.length)} ${pluralize("hostPort", "hostPorts", list.length)} ${list.join(", ")}`,
  );
}

function probeHosts(probe: unknown): string[] {
  const p = sc(probe);
  if (!p) return [];
  const hosts: string[] = [];
  for (const key of ["httpGet", "tcpSocket"]) {
    const host = asString(sc(p[key])?.["host"]);
    if (host) hosts.push(host);
  }
  return hosts;
}

/** hostProbesAndHostLifecycle, from v1.34. */
export function hostProbesAndHostLifecycle(pod: PodSpecView): CheckResult {
  const bad = new Set<string>();
  const hosts = new Set<string>();
  for (const c of pod.containers) {
    const lifecycle = sc(c.raw["lifecycle"]);
    const found = [
      ...probeHosts(c.raw["livenessProbe"]),
      ...probeHosts(c.raw["readinessProbe"]),
      ...probeHosts(c.raw["startupProbe"]),
      ...probeHosts(lifecycle?.["postStart"]),
      ...probeHosts(lifecycle?.["preStop"]),
    ];
    if (found.length > 0) {
      bad.add(c.name);
      for (const h of found) hosts.add(h);
    }
  }
  if (bad.size === 0) return ALLOWED;
  const names = sortedSet(bad);
  const list = sortedSet(hosts);
  return forbidden(
    "probe or lifecycle host",
    `${containersPhrase(names)} ${pluralize("uses", "use", names.length)} ${pluralize("probe or lifecycle host", "probe or lifecycle hosts", list.length)} ${joinQuote(list)}`,
  );
}

function appArmorTypeAllowed(t: unknown): boolean {
  return t === "RuntimeDefault" || t === "Localhost";
}

const APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/";

export function appArmorProfile(pod: PodSpecView): CheckResult {
  const setters: string[] = [];
  const values = new Set<string>();
  const podProfile = sc(pod.securityContext?.["appArmorProfile"]);
  if (podProfile && !appArmorTypeAllowed(podProfile["type"])) {
    setters.push("pod");
    values.add(String(podProfile["type"] ?? ""));
  }
  const badContainers: string[] = [];
  for (const c of pod.containers) {
    const profile = sc(c.securityContext?.["appArmorProfile"]);
    if (profile && !appArmorTypeAllowed(profile["type"])) {
      badContainers.push(c.name);
      values.add(String(profile["type"] ?? ""));
    }
  }
  if (badContainers.length > 0) setters.push(containersPhrase(badContainers));
  const annotations = sc(pod.metadata["annotations"]) ?? {};
  const badAnnotations: string[] = [];
  for (const [k, v] of Object.entries(annotations)) {
    const value = String(v);
    const ok = value === "" || value === "runtime/default" || value.startsWith("localhost/");
    if (k.startsWith(APPARMOR_ANNOTATION_PREFIX) && !ok) {
      badAnnotations.push(`${k}=${JSON.stringify(value)}`);
    }
  }
  const valueList = sortedSet(values);
  if (badAnnotations.length > 0) {
    valueList.push(...sortedSet(badAnnotations));
    setters.push(pluralize("annotation", "annotations", badAnnotations.length));
  }
  if (setters.length === 0) return ALLOWED;
  return forbidden(
    pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", valueList.length),
    `${setters.join(" and ")} must not set AppArmor profile type to ${joinQuote(valueList)}`,
  );
}

export function procMount(pod: PodSpecView): CheckResult {
  const bad: string[] = [];
  const types: string[] = [];
  for (const c of pod.containers) {
    const pm = c.securityContext?.["procMount"];
    if (pm === undefined || pm === null) continue;
    if (pm !== "Default") {
      bad.push(c.name);
      types.push(String(pm));
    }
  }
  if (bad.length === 0) return ALLOWED;
  return forbidden(
    "procMount",
    `${containersPhrase(bad)} must not set securityContext.procMount to ${joinQuote(sortedSet(types))}`,
  );
}

export function procMount135Baseline(pod: PodSpecView): CheckResult {
  return inUserNamespace(pod) ? ALLOWED : procMount(pod);
}

const SELINUX_TYPES_1_0 = new Set(["", "container_t", "container_init_t", "container_kvm_t"]);
const SELINUX_TYPES_1_31 = new Set([...SELINUX_TYPES_1_0, "container_engine_t"]);

function seLinuxOptionsWith(pod: PodSpecView, allowed: ReadonlySet<string>): CheckResult {
  const setters: string[] = [];
  const badTypes = new Set<string>();
  let setUser = false;
  let setRole = false;
  const valid = (opts: Readonly<Record<string, unknown>>) => {
    let ok = true;
    const type = asString(opts["type"]) ?? "";
    if (!allowed.has(type)) {
      ok = false;
      badTypes.add(type);
    }
    if ((asString(opts["user"]) ?? "").length > 0) {
      ok = false;
      setUser = true;
    }
    if ((asString(opts["role"]) ?? "").length > 0) {
      ok = false;
      setRole = true;
    }
    return ok;
  };
  const podOpts = sc(pod.securityContext?.["seLinuxOptions"]);
  if (podOpts && !valid(podOpts)) setters.push("pod");
  const bad: string[] = [];
  for (const c of pod.containers) {
    const opts = sc(c.securityContext?.["seLinuxOptions"]);
    if (opts && !valid(opts)) bad.push(c.name);
  }
  if (bad.length > 0) setters.push(containersPhrase(bad));
  if (setters.length === 0) return ALLOWED;
  const data: string[] = [];
  if (badTypes.size > 0) {
    const types = sortedSet(badTypes);
    data.push(`${pluralize("type", "types", types.length)} ${joinQuote(types)}`);
  }
  if (setUser) data.push("user may not be set");
  if (setRole) data.push("role may not be set");
  return forbidden(
    "seLinuxOptions",
    `${setters.join(" and ")} set forbidden securityContext.seLinuxOptions: ${data.join("; ")}`,
  );
}

export const seLinuxOptions10 = (pod: PodSpecView) => seLinuxOptionsWith(pod, SELINUX_TYPES_1_0);
export const seLinuxOptions131 = (pod: PodSpecView) => seLinuxOptionsWith(pod, SELINUX_TYPES_1_31);

const SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/";

/** seccompProfile_baseline 1.0–1.18: the alpha annotations. */
export function seccompProfileBaseline10(pod: PodSpecView): CheckResult {
  const annotations = sc(pod.metadata["annotations"]) ?? {};
  const validValue = (v: string) =>
    v === "runtime/default" || v === "docker/default" || v.startsWith("localhost/");
  const bad: string[] = [];
  const podValue = annotations[SECCOMP_POD_ANNOTATION];
  if (podValue !== undefined && !validValue(String(podValue))) {
    bad.push(`${SECCOMP_POD_ANNOTATION}=${JSON.stringify(String(podValue))}`);
  }
  for (const c of pod.containers) {
    const key = SECCOMP_CONTAINER_PREFIX + c.name;
    const v = annotations[key];
    if (v !== undefined && !validValue(String(v))) bad.push(`${key}=${JSON.stringify(String(v))}`);
  }
  if (bad.length === 0) return ALLOWED;
  const list = sortedSet(bad);
  return forbidden(
    "seccompProfile",
    `forbidden ${pluralize("annotation", "annotations", list.length)} ${list.join(", ")}`,
  );
}

export function validSeccompType(t: unknown): boolean {
  return t === "RuntimeDefault" || t === "Localhost";
}

/** seccompProfile_baseline 1.19+: explicit bad types only. */
export function seccompProfileBaseline119(pod: PodSpecView): CheckResult {
  const setters: string[] = [];
  const values = new Set<string>();
  const podProfile = sc(pod.securityContext?.["seccompProfile"]);
  if (podProfile && !validSeccompType(podProfile["type"])) {
    setters.push("pod");
    values.add(String(podProfile["type"] ?? ""));
  }
  const bad: string[] = [];
  for (const c of pod.containers) {
    const profile = sc(c.securityContext?.["seccompProfile"]);
    if (profile && !validSeccompType(profile["type"])) {
      bad.push(c.name);
      values.add(String(profile["type"] ?? ""));
    }
  }
  if (bad.length > 0) setters.push(containersPhrase(bad));
  if (setters.length === 0) return ALLOWED;
  return forbidden(
    "seccompProfile",
    `${setters.join(" and ")} must not set securityContext.seccompProfile.type to ${joinQuote(sortedSet(values))}`,
  );
}

/** Sysctls are compared by their raw name: PSA does not normalise `/` to `.`. */
export function sysctlsFor(minor: number) {
  const allowed = psaAllowedSysctls(minor);
  return (pod: PodSpecView): CheckResult => {
    const bad = asArray(pod.securityContext?.["sysctls"])
      .map((s) => asString(sc(s)?.["name"]) ?? "")
      .filter((name) => !allowed.has(name));
    return bad.length === 0 ? ALLOWED : forbidden("forbidden sysctls", bad.join(", "));
  };
}

export function windowsHostProcess(pod: PodSpecView): CheckResult {
  const bad = pod.containers
    .filter((c) => sc(c.securityContext?.["windowsOptions"])?.["hostProcess"] === true)
    .map((c) => c.name);
  const setters: string[] = [];
  if (sc(pod.securityContext?.["windowsOptions"])?.["hostProcess"] === true) setters.push("pod");
  if (bad.length > 0) setters.push(containersPhrase(bad));
  if (setters.length === 0) return ALLOWED;
  return forbidden(
    "hostProcess",
    `${setters.join(" and ")} must not set securityContext.windowsOptions.hostProcess=true`,
  );
}
