/**
 * @module agents/pod-security/policy-level — Pod Security levels and policy versions, and the
 * namespace labels that choose them, exactly as Pod Security Admission parses them
 * (k8s.io/pod-security-admission api/helpers.go: ParseLevel, ParseVersion, PolicyToEvaluate).
 */

export const LEVELS = ["privileged", "baseline", "restricted"] as const;
export type Level = (typeof LEVELS)[number];

/** A policy version: `latest`, or `v1.<minor>`. */
export type PolicyVersion =
  | { readonly latest: true }
  | { readonly latest: false; readonly minor: number };

/**
 * The newest policy version the checks here know (the newest `MinimumVersion` of any check in
 * the upstream registry at the reference snapshot). `latest` and newer versions evaluate as this.
 */
export const MAX_POLICY_MINOR = 37;

export const LATEST: PolicyVersion = { latest: true };

export interface LevelVersion {
  readonly level: Level;
  readonly version: PolicyVersion;
}

export interface NamespacePolicy {
  readonly enforce: LevelVersion;
  readonly audit: LevelVersion;
  readonly warn: LevelVersion;
}

export const LABELS = {
  enforce: "pod-security.kubernetes.io/enforce",
  enforceVersion: "pod-security.kubernetes.io/enforce-version",
  audit: "pod-security.kubernetes.io/audit",
  auditVersion: "pod-security.kubernetes.io/audit-version",
  warn: "pod-security.kubernetes.io/warn",
  warnVersion: "pod-security.kubernetes.io/warn-version",
} as const;

/** Parses a level; unknown text yields an error and (as upstream) `restricted`. */
export function parseLevel(text: string): { level: Level; error?: string } {
  if ((LEVELS as readonly string[]).includes(text)) return { level: text as Level };
  return { level: "restricted", error: `must be one of ${LEVELS.join(", ")}` };
}

/** Parses `latest` or `v1.N`; anything else yields an error and (as upstream) `latest`. */
export function parseVersion(text: string): { version: PolicyVersion; error?: string } {
  if (text === "latest") return { version: LATEST };
  const m = /^v1\.([0-9]|[1-9][0-9]*)$/.exec(text);
  if (!m) return { version: LATEST, error: `must be "latest" or "v1.x"` };
  return { version: { latest: false, minor: Number(m[1]) } };
}

export function formatVersion(v: PolicyVersion): string {
  return v.latest ? "latest" : `v1.${v.minor}`;
}

/** `baseline:latest`, `restricted:v1.29`: the form PSA prints in its messages. */
export function formatLevelVersion(lv: LevelVersion): string {
  return `${lv.level}:${formatVersion(lv.version)}`;
}

/**
 * The minor version the checks use: `latest` and newer versions are clamped to the newest the
 * evaluator knows, or to the cluster's own minor (`maxMinor`), as an API server of that version does.
 */
export function effectiveMinor(v: PolicyVersion, maxMinor: number = MAX_POLICY_MINOR): number {
  const max = Math.min(maxMinor, MAX_POLICY_MINOR);
  return v.latest ? max : Math.min(v.minor, max);
}

const RANK: Record<Level, number> = { privileged: 0, baseline: 1, restricted: 2 };

/** PSA's cluster default when a namespace has no labels: everything `privileged:latest`. */
export const DEFAULT_POLICY: NamespacePolicy = {
  enforce: { level: "privileged", version: LATEST },
  audit: { level: "privileged", version: LATEST },
  warn: { level: "privileged", version: LATEST },
};

/**
 * The policy a namespace's labels select, with label errors. As upstream: a bad enforce level
 * means `restricted`; bad audit and warn levels fail open to `privileged`; warn follows enforce
 * when enforce is set to something stricter and warn is not set.
 */
export function policyFromLabels(
  labels: Readonly<Record<string, string>> | undefined,
  defaults: NamespacePolicy = DEFAULT_POLICY,
): { policy: NamespacePolicy; errors: string[] } {
  const errors: string[] = [];
  let enforce = defaults.enforce;
  let audit = defaults.audit;
  let warn = defaults.warn;
  if (!labels) return { policy: defaults, errors };
  let hasEnforceLevel = false;
  const note = (label: string, value: string, error: string | undefined) => {
    if (error) errors.push(`${label}: Invalid value: ${JSON.stringify(value)}: ${error}`);
  };
  const get = (k: string) => labels[k];
  const el = get(LABELS.enforce);
  if (el !== undefined) {
    const r = parseLevel(el);
    enforce = { ...enforce, level: r.level };
    hasEnforceLevel = r.error === undefined;
    note(LABELS.enforce, el, r.error);
  }
  const ev = get(LABELS.enforceVersion);
  if (ev !== undefined) {
    const r = parseVersion(ev);
    enforce = { ...enforce, version: r.version };
    note(LABELS.enforceVersion, ev, r.error);
  }
  const al = get(LABELS.audit);
  if (al !== undefined) {
    const r = parseLevel(al);
    audit = { ...audit, level: r.error ? "privileged" : r.level };
    note(LABELS.audit, al, r.error);
  }
  const av = get(LABELS.auditVersion);
  if (av !== undefined) {
    const r = parseVersion(av);
    audit = { ...audit, version: r.version };
    note(LABELS.auditVersion, av, r.error);
  }
  const wl = get(LABELS.warn);
  if (wl !== undefined) {
    const r = parseLevel(wl);
    warn = { ...warn, level: r.error ? "privileged" : r.level };
    note(LABELS.warn, wl, r.error);
  }
  const wv = get(LABELS.warnVersion);
  if (wv !== undefined) {
    const r = parseVersion(wv);
    warn = { ...warn, version: r.version };
    note(LABELS.warnVersion, wv, r.error);
  }
  if (wl === undefined && hasEnforceLevel && RANK[enforce.level] > RANK[warn.level]) {
    warn = { level: enforce.level, version: wv === undefined ? enforce.version : warn.version };
  }
  return { policy: { enforce, audit, warn }, errors };
}
