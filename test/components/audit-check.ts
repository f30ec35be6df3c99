/**
 * @module test/components/audit-check — reads the API server's audit log (one JSON event a line)
 * for one user's requests and names each that is not a plain read: a verb other than get, list
 * or watch, any request about Secrets, and exec, attach, port-forward or proxy (which run
 * something, whatever their HTTP verb). Pure; the tests feed it `Cluster.auditEvents()`.
 */

/** One request of the user, as the audit log records it. */
export interface AuditRequest {
  readonly auditID: string;
  readonly verb: string;
  readonly uri: string;
  readonly resource: string;
  readonly subresource: string;
  readonly code: number | undefined;
}

/** A request that is not a plain read, and why. */
export interface AuditViolation extends AuditRequest {
  readonly why: string;
}

const READ_VERBS: ReadonlySet<string> = new Set(["get", "list", "watch"]);
const RUNS_SOMETHING: ReadonlySet<string> = new Set(["exec", "attach", "portforward", "proxy"]);

/** The user's requests, one per audit id (a request can log several stages). */
export function requestsOf(
  events: readonly Record<string, unknown>[],
  user: string,
): AuditRequest[] {
  const seen = new Map<string, AuditRequest>();
  for (const e of events) {
    if ((e["user"] as { username?: unknown } | undefined)?.username !== user) continue;
    const id = String(e["auditID"]);
    const ref = (e["objectRef"] ?? {}) as { resource?: unknown; subresource?: unknown };
    const code = (e["responseStatus"] as { code?: unknown } | undefined)?.code;
    const prev = seen.get(id);
    seen.set(id, {
      auditID: id,
      verb: String(e["verb"]),
      uri: String(e["requestURI"]),
      resource: typeof ref.resource === "string" ? ref.resource : "",
      subresource: typeof ref.subresource === "string" ? ref.subresource : "",
      code: typeof code === "number" ? code : prev?.code,
    });
  }
  return [...seen.values()];
}

/** Every request of `user` that is not a plain read, with the reason. Empty: only reads. */
export function nonReadRequests(
  events: readonly Record<string, unknown>[],
  user: string,
): AuditViolation[] {
  const out: AuditViolation[] = [];
  for (const r of requestsOf(events, user)) {
    const why = !READ_VERBS.has(r.verb)
      ? `verb ${r.verb}`
      : r.resource === "secrets"
        ? "reads Secrets"
        : RUNS_SOMETHING.has(r.subresource)
          ? `${r.resource}/${r.subresource} runs something`
          : undefined;
    if (why !== undefined) out.push({ ...r, why });
  }
  return out;
}
