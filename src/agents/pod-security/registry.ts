/**
 * @module agents/pod-security/registry — which check versions apply at a level and policy
 * version, in the order upstream reports them (policy/registry.go `populate`): Baseline check ids
 * sorted, then Restricted ids sorted; Restricted includes Baseline except the checks it overrides.
 * A port of the Go module's semantics (there is no JavaScript implementation of Pod Security
 * Admission), checked against every upstream fixture in evaluate.test.ts.
 */
import type { CheckFn } from "./check-result.ts";
import * as b from "./checks-baseline.ts";
import * as r from "./checks-restricted.ts";
import type { Level } from "./policy-level.ts";

interface VersionedCheck {
  readonly minMinor: number;
  readonly fn: CheckFn;
  readonly overrides?: readonly string[];
}

export interface CheckDefinition {
  readonly id: string;
  readonly level: "baseline" | "restricted";
  readonly versions: readonly VersionedCheck[];
}

const sysctlVersions = [0, 27, 29, 32, 37].map((minMinor) => ({
  minMinor,
  fn: b.sysctlsFor(minMinor),
}));

export const CHECKS: readonly CheckDefinition[] = [
  { id: "appArmorProfile", level: "baseline", versions: [{ minMinor: 0, fn: b.appArmorProfile }] },
  {
    id: "capabilities_baseline",
    level: "baseline",
    versions: [{ minMinor: 0, fn: b.capabilitiesBaseline }],
  },
  { id: "hostNamespaces", level: "baseline", versions: [{ minMinor: 0, fn: b.hostNamespaces }] },
  { id: "hostPathVolumes", level: "baseline", versions: [{ minMinor: 0, fn: b.hostPathVolumes }] },
  { id: "hostPorts", level: "baseline", versions: [{ minMinor: 0, fn: b.hostPorts }] },
  {
    id: "hostProbesAndHostLifecycle",
    level: "baseline",
    versions: [{ minMinor: 34, fn: b.hostProbesAndHostLifecycle }],
  },
  { id: "privileged", level: "baseline", versions: [{ minMinor: 0, fn: b.privileged }] },
  {
    id: "procMount",
    level: "baseline",
    versions: [
      { minMinor: 0, fn: b.procMount },
      { minMinor: 35, fn: b.procMount135Baseline },
    ],
  },
  {
    id: "seLinuxOptions",
    level: "baseline",
    versions: [
      { minMinor: 0, fn: b.seLinuxOptions10 },
      { minMinor: 31, fn: b.seLinuxOptions131 },
    ],
  },
  {
    id: "seccompProfile_baseline",
    level: "baseline",
    versions: [
      { minMinor: 0, fn: b.seccompProfileBaseline10 },
      { minMinor: 19, fn: b.seccompProfileBaseline119 },
    ],
  },
  { id: "sysctls", level: "baseline", versions: sysctlVersions },
  {
    id: "windowsHostProcess",
    level: "baseline",
    versions: [{ minMinor: 0, fn: b.windowsHostProcess }],
  },
  {
    id: "allowPrivilegeEscalation",
    level: "restricted",
    versions: [
      { minMinor: 8, fn: r.allowPrivilegeEscalation18 },
      { minMinor: 25, fn: r.allowPrivilegeEscalation125 },
    ],
  },
  {
    id: "capabilities_restricted",
    level: "restricted",
    versions: [
      { minMinor: 22, fn: r.capabilitiesRestricted122, overrides: ["capabilities_baseline"] },
      { minMinor: 25, fn: r.capabilitiesRestricted125, overrides: ["capabilities_baseline"] },
    ],
  },
  {
    id: "procMount_restricted",
    level: "restricted",
    versions: [{ minMinor: 35, fn: b.procMount, overrides: ["procMount"] }],
  },
  {
    id: "restrictedVolumes",
    level: "restricted",
    versions: [{ minMinor: 0, fn: r.restrictedVolumes, overrides: ["hostPathVolumes"] }],
  },
  {
    id: "runAsNonRoot",
    level: "restricted",
    versions: [
      { minMinor: 0, fn: r.runAsNonRoot10 },
      { minMinor: 35, fn: r.runAsNonRoot135 },
    ],
  },
  {
    id: "runAsUser",
    level: "restricted",
    versions: [
      { minMinor: 23, fn: r.runAsUser123 },
      { minMinor: 35, fn: r.runAsUser135 },
    ],
  },
  {
    id: "seccompProfile_restricted",
    level: "restricted",
    versions: [
      { minMinor: 19, fn: r.seccompProfileRestricted119, overrides: ["seccompProfile_baseline"] },
      { minMinor: 25, fn: r.seccompProfileRestricted125, overrides: ["seccompProfile_baseline"] },
    ],
  },
];

const byteOrder = (a: string, b2: string) => (a < b2 ? -1 : a > b2 ? 1 : 0);
const ORDER = [
  ...CHECKS.filter((c) => c.level === "baseline")
    .map((c) => c.id)
    .sort(byteOrder),
  ...CHECKS.filter((c) => c.level === "restricted")
    .map((c) => c.id)
    .sort(byteOrder),
];

export interface ActiveCheck {
  readonly id: string;
  readonly fn: CheckFn;
}

function activeVersion(check: CheckDefinition, minor: number): VersionedCheck | undefined {
  let found: VersionedCheck | undefined;
  for (const v of check.versions) if (v.minMinor <= minor) found = v;
  return found;
}

/** The checks that run for `level` at policy minor version `minor`, in reporting order. */
export function checksFor(level: Level, minor: number): ActiveCheck[] {
  if (level === "privileged") return [];
  const active = new Map<string, VersionedCheck>();
  for (const c of CHECKS) {
    if (c.level === "restricted" && level !== "restricted") continue;
    const v = activeVersion(c, minor);
    if (v) active.set(c.id, v);
  }
  if (level === "restricted") {
    for (const v of active.values()) for (const id of v.overrides ?? []) active.delete(id);
  }
  return ORDER.filter((id) => active.has(id)).map((id) => ({ id, fn: active.get(id)!.fn }));
}
