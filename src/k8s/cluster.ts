/**
 * @module k8s/cluster — the one door to a live cluster: the `ClusterSource` interface the collector
 * uses, the `ClusterError` every API failure becomes, and `openCluster`, the adapter over
 * `@kubernetes/client-node` (loaded lazily, so nothing else pays its ~400 ms import).
 *
 * client-node supplies what is hard to get right: kubeconfig loading and merging, contexts, TLS
 * material, exec auth plugins, in-cluster config, and pod exec over the WebSocket channel
 * protocol. Plain reads go through node:http(s) with the options client-node computes, because
 * its typed API clients decode objects into models that drop unknown fields and turn timestamps
 * into Dates; a snapshot must hold the objects exactly as the API server sent them (as kubectl
 * prints them).
 */
import type { IncomingMessage } from "node:http";
import { createRequire } from "node:module";
import { PassThrough } from "node:stream";
import type { ClientOptions, WebSocket as WsSocket } from "ws";
import { boundedSink, EXEC_OUTPUT_LIMIT_BYTES, type OutputTruncation } from "./output-limit.ts";

/** A resource type as the API server names it. */
export interface ApiResource {
  readonly group: string;
  readonly version: string;
  /** Plural, lower case: `pods`, `daemonsets`. */
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

export const RESOURCES = {
  nodes: { group: "", version: "v1", resource: "nodes", kind: "Node", namespaced: false },
  namespaces: {
    group: "",
    version: "v1",
    resource: "namespaces",
    kind: "Namespace",
    namespaced: false,
  },
  pods: { group: "", version: "v1", resource: "pods", kind: "Pod", namespaced: true },
  services: { group: "", version: "v1", resource: "services", kind: "Service", namespaced: true },
  configmaps: {
    group: "",
    version: "v1",
    resource: "configmaps",
    kind: "ConfigMap",
    namespaced: true,
  },
  daemonsets: {
    group: "apps",
    version: "v1",
    resource: "daemonsets",
    kind: "DaemonSet",
    namespaced: true,
  },
  networkpolicies: {
    group: "networking.k8s.io",
    version: "v1",
    resource: "networkpolicies",
    kind: "NetworkPolicy",
    namespaced: true,
  },
  egressnatpolicies: {
    group: "networking.gke.io",
    version: "v1",
    resource: "egressnatpolicies",
    kind: "EgressNATPolicy",
    namespaced: false,
  },
} as const satisfies Record<string, ApiResource>;

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  resourceVersion?: string;
  [key: string]: unknown;
}

/** An object as the API server sends it; only the envelope is typed. */
export interface ApiObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  [key: string]: unknown;
}

export interface KubeList {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string; [key: string]: unknown };
  items: ApiObject[];
}

export interface ListOptions {
  readonly namespace?: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  readonly limit?: number;
  readonly continue?: string;
  readonly signal?: AbortSignal;
}

export interface PodExecOptions {
  readonly container?: string;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /** Bytes kept per stream (default EXEC_OUTPUT_LIMIT_BYTES); past it the exec is ended. */
  readonly maxOutputBytes?: number;
}

export interface PodExecResult {
  /** Exit code from the status channel; undefined when the command did not run or ended unseen. */
  readonly code: number | undefined;
  readonly stdout: Buffer;
  readonly stderr: string;
  /** The status channel's message when the command failed to start or exited non-zero. */
  readonly message?: string;
  readonly timedOut: boolean;
  /** Set when a stream passed the output limit: reading stopped and the exec was ended. */
  readonly truncated?: OutputTruncation;
}

/** What the collector needs from a cluster; tests substitute their own. */
export interface ClusterSource {
  /** The kubeconfig context in use (for messages; never a credential). */
  readonly contextName: string;
  readonly server: string;
  /** The context's namespace (kubectl's default for names without one), else "default". */
  readonly namespace: string;
  list(res: ApiResource, opts?: ListOptions): Promise<KubeList>;
  get(
    res: ApiResource,
    name: string,
    opts?: { namespace?: string; signal?: AbortSignal },
  ): Promise<ApiObject>;
  create(
    res: ApiResource,
    body: ApiObject,
    opts?: { namespace?: string; signal?: AbortSignal },
  ): Promise<ApiObject>;
  delete(
    res: ApiResource,
    name: string,
    opts?: { namespace?: string; signal?: AbortSignal },
  ): Promise<void>;
  logs(
    namespace: string,
    pod: string,
    opts?: { container?: string; tailLines?: number; signal?: AbortSignal },
  ): Promise<string>;
  exec(
    namespace: string,
    pod: string,
    argv: readonly string[],
    opts: PodExecOptions,
  ): Promise<PodExecResult>;
  /** Discovery: does the server serve this resource (e.g. a CRD)? */
  serves(res: ApiResource, opts?: { signal?: AbortSignal }): Promise<boolean>;
  /** What the user should know about the connection (TLS verification off, plaintext). */
  readonly warnings?: readonly string[];
}

/**
 * The bounds of the client: whatever a server sends, a request ends within `requestTimeoutMs`,
 * an answer is read up to `maxResponseBytes` (streamed, counted as it arrives), a list follows at
 * most `maxPages` continue tokens, and no request starts once `budgetMs` has passed since the
 * cluster was opened.
 */
export const CLIENT_LIMITS = {
  requestTimeoutMs: 60_000,
  maxResponseBytes: 256 * 1024 * 1024,
  maxPages: 2_000,
  budgetMs: 30 * 60_000,
} as const;

/** Shows control characters (ESC, BEL, CR, C1, …) as `\xNN` escapes: server text is input. */
export function escapeControl(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => {
    const n = c.charCodeAt(0);
    return n > 0xff
      ? `\\u${n.toString(16).padStart(4, "0")}`
      : `\\x${n.toString(16).padStart(2, "0")}`;
  });
}

export const CLUSTER_ERROR_REASONS = [
  "Forbidden",
  "NotFound",
  "Unauthorized",
  "Unreachable",
  "ContextNotFound",
  "Timeout",
  "Aborted",
  "Other",
] as const;
export type ClusterErrorReason = (typeof CLUSTER_ERROR_REASONS)[number];

/** What was being asked when an API call failed. */
export interface ApiRequest {
  readonly verb: "get" | "list" | "create" | "delete" | "exec" | "logs" | "discover" | "connect";
  /** Resource with subresource: `pods`, `pods/exec`, `daemonsets`. */
  readonly resource: string;
  readonly group?: string;
  readonly namespace?: string;
  readonly name?: string;
}

/** An API call that failed. `reason` is stable; `apiMessage` is the server's own text. */
export class ClusterError extends Error {
  override readonly name = "ClusterError";
  readonly code = "ERR_CLUSTER";
  readonly reason: ClusterErrorReason;
  readonly status: number | undefined;
  readonly request: ApiRequest;
  readonly apiMessage: string | undefined;
  constructor(
    reason: ClusterErrorReason,
    request: ApiRequest,
    detail: { status?: number; apiMessage?: string; cause?: unknown } = {},
  ) {
    super(
      `${request.verb} ${request.resource}${request.name ? ` ${JSON.stringify(request.name)}` : ""}: ${reason}${detail.apiMessage ? `: ${detail.apiMessage}` : ""}`,
      detail.cause === undefined ? undefined : { cause: detail.cause },
    );
    this.reason = reason;
    this.status = detail.status;
    this.request = request;
    // one line, whatever the server or an auth plugin printed, its control characters shown
    this.apiMessage =
      detail.apiMessage === undefined
        ? undefined
        : escapeControl(detail.apiMessage.replace(/[ \t\r\n]+/g, " ").trim()).slice(0, 2000);
  }
}

/** The URL path of a resource collection or object. */
export function resourcePath(res: ApiResource, namespace?: string, name?: string): string {
  const base = res.group === "" ? `/api/${res.version}` : `/apis/${res.group}/${res.version}`;
  const ns = res.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  const tail = name === undefined ? "" : `/${encodeURIComponent(name)}`;
  return `${base}${ns}/${res.resource}${tail}`;
}

function reasonForStatus(status: number, declared: unknown): ClusterErrorReason {
  if (
    typeof declared === "string" &&
    (CLUSTER_ERROR_REASONS as readonly string[]).includes(declared)
  )
    return declared as ClusterErrorReason;
  if (status === 401) return "Unauthorized";
  if (status === 403) return "Forbidden";
  if (status === 404) return "NotFound";
  if (status === 504 || status === 408) return "Timeout";
  return "Other";
}

/** Turns an API error response (a Status object, or anything else) into a ClusterError. */
export function errorFromResponse(status: number, body: string, request: ApiRequest): ClusterError {
  let reason: unknown;
  let message: string | undefined;
  try {
    const parsed = JSON.parse(body) as { kind?: unknown; reason?: unknown; message?: unknown };
    if (parsed && typeof parsed === "object") {
      reason = parsed.reason;
      if (typeof parsed.message === "string") message = parsed.message;
    }
  } catch {
    message = body.trim().slice(0, 200) || undefined;
  }
  return new ClusterError(reasonForStatus(status, reason), request, {
    status,
    ...(message === undefined ? {} : { apiMessage: message }),
  });
}

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "CERT_HAS_EXPIRED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

function wrapNetworkError(raw: unknown, request: ApiRequest, signal?: AbortSignal): ClusterError {
  if (raw instanceof ClusterError) return raw;
  // the exec WebSocket reports failures as an ErrorEvent that wraps the Error
  const inner = (raw as { error?: unknown } | undefined)?.error;
  const e = inner instanceof Error ? inner : raw;
  if (signal?.aborted) return new ClusterError("Aborted", request, { cause: e });
  const code = (e as { code?: unknown })?.code;
  const msg = e instanceof Error ? e.message : String(e);
  if (typeof code === "string" && (NETWORK_CODES.has(code) || code.startsWith("ERR_TLS")))
    return new ClusterError("Unreachable", request, { apiMessage: `${code}: ${msg}`, cause: e });
  const m = /Unexpected server response: (\d+)/.exec(msg);
  // the API server's Status when it refused the exec upgrade (see refusalKeepingSocket)
  const body = (e as { responseBody?: unknown })?.responseBody;
  if (m && typeof body === "string" && body !== "")
    return errorFromResponse(Number(m[1]), body, request);
  if (m)
    return new ClusterError(reasonForStatus(Number(m[1]), undefined), request, {
      status: Number(m[1]),
      cause: e,
    });
  return new ClusterError("Other", request, { apiMessage: msg, cause: e });
}

export interface OpenClusterOptions {
  /** kubectl's --kubeconfig: this file only, KUBECONFIG ignored. */
  readonly kubeconfig?: string;
  /** kubectl's --context. */
  readonly context?: string;
  /** Where KUBECONFIG and HOME are read (kubectl's rules: KUBECONFIG is a path list, merged). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Per-request deadline (ms) for plain API calls: the whole answer, not just the first byte. */
  readonly requestTimeoutMs?: number;
  /** Largest answer read (bytes); a longer one is cut off and the call fails. */
  readonly maxResponseBytes?: number;
  /** Time (ms) after which no further API call is started. */
  readonly budgetMs?: number;
  /**
   * Sends the context's credentials (token, password, client certificate, exec plugin output)
   * to a plain http:// server; without it such a context is refused (`--allow-plaintext-credentials`).
   */
  readonly allowPlaintextCredentials?: boolean;
}

const USER_AGENT = "podpath/0.1.0";

/** The part of the exec WebSocket used here. */
interface Socket {
  readonly readyState: number;
  readonly CLOSED: number;
  on(event: "close", listener: () => void): void;
  close(): void;
  terminate(): void;
}

type K8s = typeof import("@kubernetes/client-node");
type KubeConfig = import("@kubernetes/client-node").KubeConfig;
type WebSocketHandlerClass =
  typeof import("@kubernetes/client-node/dist/web-socket-handler.js").WebSocketHandler;

/** An API call as sent: the status and the body's text. */
type Request = (
  method: string,
  path: string,
  req: ApiRequest,
  body?: unknown,
  signal?: AbortSignal,
) => Promise<{ status: number; text: string }>;

/**
 * Opens the cluster the kubeconfig names, as kubectl would: `--kubeconfig` wins over
 * `KUBECONFIG` (a path list whose files merge, first wins), then `~/.kube/config`, then the
 * in-cluster service account. Throws ClusterError("ContextNotFound") for an unknown context.
 */
export async function openCluster(opts: OpenClusterOptions): Promise<ClusterSource> {
  const k8s = await import("@kubernetes/client-node");
  const { WebSocketHandler } = await import("@kubernetes/client-node/dist/web-socket-handler.js");
  const kc = new k8s.KubeConfig();
  const connect: ApiRequest = { verb: "connect", resource: "kubeconfig" };
  await loadKubeconfig(k8s, kc, opts, connect);
  const server = selectCluster(kc, opts.context, connect, opts.allowPlaintextCredentials === true);
  const warnings = connectionWarnings(kc, server);
  const request = await httpRequester(kc, server, {
    timeoutMs: opts.requestTimeoutMs ?? CLIENT_LIMITS.requestTimeoutMs,
    maxBytes: opts.maxResponseBytes ?? CLIENT_LIMITS.maxResponseBytes,
    budgetEndsAt: Date.now() + (opts.budgetMs ?? CLIENT_LIMITS.budgetMs),
    budgetMs: opts.budgetMs ?? CLIENT_LIMITS.budgetMs,
  });
  const source = clusterSource(kc, server, request, (namespace, pod, argv, o) =>
    execInPod(k8s, WebSocketHandler, kc, namespace, pod, argv, o),
  );
  return { ...source, warnings };
}

/**
 * Loads the kubeconfig into `kc`: `--kubeconfig`, else the KUBECONFIG files merged (kubectl's
 * rules), else the default places. Any failure is ClusterError("ContextNotFound") saying why.
 */
async function loadKubeconfig(
  k8s: K8s,
  kc: KubeConfig,
  opts: OpenClusterOptions,
  connect: ApiRequest,
): Promise<void> {
  const { delimiter } = await import("node:path");
  try {
    const list = opts.env["KUBECONFIG"]?.split(delimiter).filter((f) => f !== "") ?? [];
    if (opts.kubeconfig !== undefined) {
      kc.loadFromFile(opts.kubeconfig);
    } else if (list.length > 0) {
      await mergeKubeconfigs(k8s, kc, list);
    } else {
      kc.loadFromDefault();
      // client-node's last resort when nothing is configured; kubectl would fail the same way
      const c = kc.getCurrentCluster();
      if (c?.name === "cluster" && c.server === "http://localhost:8080") {
        throw Object.assign(
          new Error(
            "no kubeconfig found: KUBECONFIG is unset, ~/.kube/config does not exist and this is not a pod with a service account",
          ),
          { code: "NO_CONFIG" },
        );
      }
    }
  } catch (e) {
    const file = opts.kubeconfig ?? opts.env["KUBECONFIG"] ?? "~/.kube/config";
    const code = (e as { code?: string })?.code;
    const why =
      code === "NO_CONFIG"
        ? (e as Error).message
        : `kubeconfig ${file} ${code === "ENOENT" ? "does not exist" : `cannot be read (${e instanceof Error ? e.message.split("\n")[0] : String(e)})`}`;
    throw new ClusterError("ContextNotFound", connect, { apiMessage: why, cause: e });
  }
}

/**
 * kubectl's merge of the KUBECONFIG files: files that do not exist are skipped; for every name
 * (cluster, user, context) and for current-context the first file that sets it wins.
 */
async function mergeKubeconfigs(k8s: K8s, kc: KubeConfig, list: readonly string[]) {
  const { existsSync } = await import("node:fs");
  const files = list.filter((f) => existsSync(f));
  if (files.length === 0) {
    throw Object.assign(new Error("none of the KUBECONFIG files exist"), { code: "ENOENT" });
  }
  kc.loadFromFile(files[0]!);
  for (const f of files.slice(1)) {
    const more = new k8s.KubeConfig();
    more.loadFromFile(f);
    const has = (xs: readonly { name: string }[], name: string) => xs.some((x) => x.name === name);
    for (const c of more.getClusters()) if (!has(kc.getClusters(), c.name)) kc.addCluster(c);
    for (const u of more.getUsers()) if (!has(kc.getUsers(), u.name)) kc.addUser(u);
    for (const c of more.getContexts()) if (!has(kc.getContexts(), c.name)) kc.addContext(c);
    if (!kc.getCurrentContext() && more.getCurrentContext()) {
      kc.setCurrentContext(more.getCurrentContext());
    }
  }
}

/** The kinds of credential the current user of `kc` carries (none: an anonymous context). */
export function credentialKinds(kc: KubeConfig): string[] {
  const u = kc.getCurrentUser();
  if (!u) return [];
  const kinds: string[] = [];
  const raw = u as { tokenFile?: unknown };
  if (u.token || raw.tokenFile) kinds.push("a bearer token");
  if (u.username || u.password) kinds.push("a password");
  if (u.certData || u.certFile || u.keyData || u.keyFile) kinds.push("a client certificate");
  if (u.exec) kinds.push("an exec credential plugin's token");
  if (u.authProvider) kinds.push("an auth provider's token");
  return kinds;
}

/** What the user should know about how the connection is secured. */
function connectionWarnings(kc: KubeConfig, server: string): string[] {
  const ctx = kc.getCurrentContext();
  if (server.startsWith("http://")) {
    const kinds = credentialKinds(kc);
    return kinds.length === 0
      ? []
      : [
          `context "${ctx}": ${kinds.join(" and ")} ${kinds.length > 1 ? "are" : "is"} sent unencrypted to ${server} (--allow-plaintext-credentials)`,
        ];
  }
  if (kc.getCurrentCluster()?.skipTLSVerify) {
    return [
      `context "${ctx}" sets insecure-skip-tls-verify: the API server's certificate is not checked, so anyone on the path can pose as ${server}`,
    ];
  }
  return [];
}

/**
 * Sets the context asked for (when one is) and checks its cluster: the server's URL without a
 * trailing slash. A missing context or cluster is refused, and so is a plain http:// server when
 * the context carries credentials, unless `allowPlaintext`.
 */
function selectCluster(
  kc: KubeConfig,
  context: string | undefined,
  connect: ApiRequest,
  allowPlaintext: boolean,
): string {
  if (context !== undefined) {
    if (!kc.getContextObject(context)) {
      throw new ClusterError("ContextNotFound", connect, {
        apiMessage: `context "${context}" is not in the kubeconfig (contexts: ${
          kc
            .getContexts()
            .map((c) => c.name)
            .join(", ") || "none"
        })`,
      });
    }
    kc.setCurrentContext(context);
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) {
    throw new ClusterError("ContextNotFound", connect, {
      apiMessage: `the kubeconfig has no current context with a cluster (current-context: "${kc.getCurrentContext() || "none"}")`,
    });
  }
  const server = cluster.server.replace(/\/+$/, "");
  if (server.startsWith("http://")) {
    const kinds = credentialKinds(kc);
    if (kinds.length > 0 && !allowPlaintext) {
      throw new ClusterError("ContextNotFound", connect, {
        apiMessage: `the cluster of context "${kc.getCurrentContext()}" is a plain http:// server (${server}) and the context carries ${kinds.join(" and ")}, which podpath does not send unencrypted (insecure-skip-tls-verify does not change that); use https, or pass --allow-plaintext-credentials for a server you reach only over a trusted path`,
      });
    }
    // TLS has no part in plain http; client-node refuses http unless this is set
    if (!cluster.skipTLSVerify) {
      const i = kc.clusters.indexOf(cluster);
      if (i >= 0) kc.clusters[i] = { ...cluster, skipTLSVerify: true };
    }
  }
  return server;
}

/** The bounds one requester keeps (CLIENT_LIMITS, or the caller's). */
interface RequestBounds {
  readonly timeoutMs: number;
  readonly maxBytes: number;
  readonly budgetEndsAt: number;
  readonly budgetMs: number;
}

const mib = (n: number) => `${Math.round((n / 1024 / 1024) * 10) / 10} MiB`;

/**
 * Sends API requests to `server` with the kubeconfig's credentials and TLS settings. Every request
 * ends: at its deadline (the whole answer, however slowly it trickles), at the size limit (counted
 * as the answer streams in), or at once when the run's time budget is spent.
 */
async function httpRequester(
  kc: KubeConfig,
  server: string,
  bounds: RequestBounds,
): Promise<Request> {
  const http = await import("node:http");
  const https = await import("node:https");
  return async function request(
    method: string,
    path: string,
    req: ApiRequest,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<{ status: number; text: string }> {
    if (signal?.aborted) throw new ClusterError("Aborted", req);
    const left = bounds.budgetEndsAt - Date.now();
    if (left <= 0) {
      throw new ClusterError("Timeout", req, {
        apiMessage: `the time budget of ${Math.round(bounds.budgetMs / 1000)} s for API calls is spent; nothing more is asked`,
      });
    }
    const timeoutMs = Math.min(bounds.timeoutMs, left);
    const o: import("node:https").RequestOptions = {};
    try {
      await kc.applyToHTTPSOptions(o);
    } catch (e) {
      // exec auth plugins fail here (plugin missing, plugin exit code, bad output)
      throw new ClusterError("Unauthorized", req, {
        apiMessage: `${e instanceof Error ? e.message : String(e)}`,
        cause: e,
      });
    }
    const url = new URL(server + path);
    const lib = url.protocol === "http:" ? http : https;
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return await new Promise((resolve, reject) => {
      let settled = false;
      const finish = (f: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        f();
      };
      const fail = (e: ClusterError) =>
        finish(() => {
          r.destroy();
          reject(e);
        });
      const timer = setTimeout(
        () =>
          fail(
            new ClusterError("Timeout", req, {
              apiMessage: `no complete answer in ${timeoutMs} ms`,
            }),
          ),
        timeoutMs,
      );
      const r = lib.request(
        url,
        {
          ...o,
          method,
          headers: {
            ...(o.headers as Record<string, string> | undefined),
            Accept: "application/json, */*",
            "User-Agent": USER_AGENT,
            ...(payload ? { "Content-Type": "application/json" } : {}),
          },
          timeout: timeoutMs,
          ...(signal ? { signal } : {}),
        },
        (res: IncomingMessage) => {
          const chunks: Buffer[] = [];
          let size = 0;
          const declared = Number(res.headers["content-length"]);
          if (Number.isFinite(declared) && declared > bounds.maxBytes) {
            fail(tooLarge(req, res.statusCode, bounds.maxBytes, `${mib(declared)} announced`));
            return;
          }
          res.on("data", (c: Buffer) => {
            size += c.length;
            if (size > bounds.maxBytes) {
              fail(tooLarge(req, res.statusCode, bounds.maxBytes, `cut off at ${mib(size)}`));
              return;
            }
            chunks.push(c);
          });
          res.on("error", (e) => fail(wrapNetworkError(e, req, signal)));
          res.on("end", () =>
            finish(() =>
              resolve({
                status: res.statusCode ?? 0,
                text: Buffer.concat(chunks).toString("utf8"),
              }),
            ),
          );
        },
      );
      r.on("timeout", () =>
        fail(new ClusterError("Timeout", req, { apiMessage: `no answer in ${timeoutMs} ms` })),
      );
      r.on("error", (e) => fail(wrapNetworkError(e, req, signal)));
      r.end(payload);
    });
  };
}

function tooLarge(
  req: ApiRequest,
  status: number | undefined,
  max: number,
  detail: string,
): ClusterError {
  return new ClusterError("Other", req, {
    ...(status === undefined ? {} : { status }),
    apiMessage: `the answer is larger than the limit of ${mib(max)} (${detail}); podpath stops reading there`,
  });
}

/** An API call whose answer must be a 2xx with a JSON body: the body, parsed. */
function apiCaller(request: Request) {
  return async function call<T>(
    method: string,
    path: string,
    req: ApiRequest,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<T> {
    const res = await request(method, path, req, body, signal);
    if (res.status < 200 || res.status >= 300) throw errorFromResponse(res.status, res.text, req);
    try {
      return JSON.parse(res.text) as T;
    } catch (e) {
      throw new ClusterError("Other", req, {
        status: res.status,
        apiMessage: "the server's answer is not JSON",
        cause: e,
      });
    }
  };
}

/** The request as errors name it: verb, resource, namespace, name. */
const reqOf = (
  verb: ApiRequest["verb"],
  res: ApiResource,
  namespace?: string,
  name?: string,
): ApiRequest => ({
  verb,
  resource: res.resource,
  group: res.group,
  ...(res.namespaced && namespace !== undefined ? { namespace } : {}),
  ...(name === undefined ? {} : { name }),
});

/** The ClusterSource over one server: API calls through `request`, exec through `exec`. */
function clusterSource(
  kc: KubeConfig,
  server: string,
  request: Request,
  exec: ClusterSource["exec"],
): ClusterSource {
  const call = apiCaller(request);

  return {
    contextName: kc.getCurrentContext(),
    server,
    namespace: kc.getContextObject(kc.getCurrentContext())?.namespace || "default",
    async list(res, o = {}) {
      const q = new URLSearchParams();
      if (o.labelSelector) q.set("labelSelector", o.labelSelector);
      if (o.fieldSelector) q.set("fieldSelector", o.fieldSelector);
      if (o.limit !== undefined) q.set("limit", String(o.limit));
      if (o.continue) q.set("continue", o.continue);
      const qs = q.size > 0 ? `?${q}` : "";
      return await call<KubeList>(
        "GET",
        resourcePath(res, o.namespace) + qs,
        reqOf("list", res, o.namespace),
        undefined,
        o.signal,
      );
    },
    async get(res, name, o = {}) {
      return await call<ApiObject>(
        "GET",
        resourcePath(res, o.namespace, name),
        reqOf("get", res, o.namespace, name),
        undefined,
        o.signal,
      );
    },
    async create(res, body, o = {}) {
      return await call<ApiObject>(
        "POST",
        resourcePath(res, o.namespace),
        reqOf("create", res, o.namespace, body.metadata?.name),
        body,
        o.signal,
      );
    },
    async delete(res, name, o = {}) {
      const r = reqOf("delete", res, o.namespace, name);
      const out = await request(
        "DELETE",
        `${resourcePath(res, o.namespace, name)}?propagationPolicy=Background`,
        r,
        undefined,
        o.signal,
      );
      if (out.status === 404) return;
      if (out.status < 200 || out.status >= 300) throw errorFromResponse(out.status, out.text, r);
    },
    async logs(namespace, pod, o = {}) {
      const q = new URLSearchParams();
      if (o.container) q.set("container", o.container);
      if (o.tailLines !== undefined) q.set("tailLines", String(o.tailLines));
      const r: ApiRequest = { verb: "logs", resource: "pods/log", namespace, name: pod };
      const path = `${resourcePath(RESOURCES.pods, namespace, pod)}/log${q.size > 0 ? `?${q}` : ""}`;
      const out = await request("GET", path, r, undefined, o.signal);
      if (out.status < 200 || out.status >= 300) throw errorFromResponse(out.status, out.text, r);
      return out.text;
    },
    async serves(res, o = {}) {
      const r: ApiRequest = { verb: "discover", resource: res.resource, group: res.group };
      const base = res.group === "" ? `/api/${res.version}` : `/apis/${res.group}/${res.version}`;
      const out = await request("GET", base, r, undefined, o.signal);
      if (out.status === 404) return false;
      if (out.status < 200 || out.status >= 300) throw errorFromResponse(out.status, out.text, r);
      try {
        const list = JSON.parse(out.text) as { resources?: { name?: string }[] };
        return (list.resources ?? []).some((x) => x.name === res.resource);
      } catch {
        return false;
      }
    },
    exec,
  };
}

/** Waits for the exec socket to close (an abort closes it), or for the deadline to reject. */
async function untilClosed(
  sock: Socket,
  deadline: Promise<never>,
  signal: AbortSignal | undefined,
): Promise<void> {
  const onAbort = () => sock.close();
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    await Promise.race([
      deadline,
      new Promise<void>((resolve) => {
        if (sock.readyState === sock.CLOSED) resolve();
        sock.on("close", () => resolve());
      }),
    ]);
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

/** Runs `argv` in a pod's container over the exec WebSocket, as `kubectl exec` does. */
async function execInPod(
  k8s: K8s,
  WebSocketHandler: WebSocketHandlerClass,
  kc: KubeConfig,
  namespace: string,
  pod: string,
  argv: readonly string[],
  o: PodExecOptions,
): Promise<PodExecResult> {
  const r: ApiRequest = { verb: "exec", resource: "pods/exec", namespace, name: pod };
  if (o.signal?.aborted) throw new ClusterError("Aborted", r);
  // each stream is kept up to the limit; past it the socket is ended (k8s/output-limit)
  const limitBytes = o.maxOutputBytes ?? EXEC_OUTPUT_LIMIT_BYTES;
  let ws: Socket | undefined;
  let truncated: OutputTruncation | undefined;
  const overflow = (stream: OutputTruncation["stream"]) => () => {
    truncated ??= { stream, limitBytes };
    ws?.terminate();
  };
  const outSink = boundedSink(limitBytes, overflow("stdout"));
  const errSink = boundedSink(limitBytes, overflow("stderr"));
  const stdout = outSink.stream;
  const stderr = errSink.stream;
  // Give the handler our own streams: on a v5 close frame it ends the streams it was given,
  // and its default streams are the process's own stdout and stderr.
  const handler = new WebSocketHandler(kc, refusalKeepingSocket, {
    stdin: new PassThrough(),
    stdout,
    stderr,
  });
  let status: { status?: string; message?: string; reason?: string; details?: unknown } | undefined;
  let timedOut = false;
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new ClusterError("Timeout", r, { apiMessage: `no answer in ${o.timeoutMs} ms` }));
    }, o.timeoutMs);
  });
  try {
    const opening = new k8s.Exec(kc, handler).exec(
      namespace,
      pod,
      o.container ?? "",
      [...argv],
      stdout,
      stderr,
      null,
      false,
      (s) => {
        status = s as typeof status;
      },
    );
    ws = (await Promise.race([opening, deadline])) as unknown as Socket;
    if (truncated) ws.terminate();
    await untilClosed(ws, deadline, o.signal);
  } catch (e) {
    if (timedOut) {
      ws?.terminate();
      return {
        code: undefined,
        stdout: outSink.bytes(),
        stderr: errSink.bytes().toString("utf8"),
        message: `timed out after ${Date.now() - started} ms`,
        timedOut: true,
        ...(truncated ? { truncated } : {}),
      };
    }
    throw wrapNetworkError(e, r, o.signal);
  } finally {
    clearTimeout(timer);
  }
  if (o.signal?.aborted) throw new ClusterError("Aborted", r);
  return {
    code: truncated ? undefined : exitCodeOf(status),
    stdout: outSink.bytes(),
    stderr: errSink.bytes().toString("utf8"),
    ...(truncated ? { truncated } : {}),
    ...(status?.status === "Success" || status?.message === undefined
      ? {}
      : { message: status.message }),
    timedOut: false,
  };
}

type WsConstructor = new (uri: string, protocols: string[], opts: ClientOptions) => WsSocket;
let wsConstructor: WsConstructor | undefined;

/** ws, resolved from @kubernetes/client-node, whose own dependency it is (loaded on first exec). */
function ws(): WsConstructor {
  wsConstructor ??= (
    createRequire(import.meta.resolve("@kubernetes/client-node"))("ws") as {
      WebSocket: WsConstructor;
    }
  ).WebSocket;
  return wsConstructor;
}

/**
 * The exec WebSocket, as the client library would open it, except that an HTTP answer instead of
 * the upgrade (the API server refusing the exec: 403, or 500 "error dialing backend …" when it
 * cannot reach the kubelet) is read to its end, and the error carries the body (`responseBody`),
 * so the server's reason is not lost.
 */
function refusalKeepingSocket(uri: string, protocols: string[], opts: ClientOptions): WsSocket {
  const socket = new (ws())(uri, protocols, opts);
  socket.on("unexpected-response", (req, res) => {
    let body = "";
    res.setEncoding("utf8");
    res.on("data", (d: string) => {
      body += d.slice(0, 4096 - body.length);
    });
    let failed = false;
    const fail = () => {
      if (failed) return;
      failed = true;
      const e = Object.assign(new Error(`Unexpected server response: ${res.statusCode}`), {
        responseBody: body,
      });
      socket.emit("error", e);
      req.destroy();
    };
    res.once("end", fail);
    res.once("error", fail);
  });
  return socket;
}

/**
 * The exit code carried by the exec status channel: `Success` is 0; `NonZeroExitCode` carries it
 * in details.causes[reason=ExitCode].message; anything else (the command did not start) is
 * undefined.
 */
export function exitCodeOf(status: unknown): number | undefined {
  if (!status || typeof status !== "object") return undefined;
  const s = status as {
    status?: unknown;
    reason?: unknown;
    details?: { causes?: { reason?: unknown; message?: unknown }[] };
  };
  if (s.status === "Success") return 0;
  if (s.reason === "NonZeroExitCode") {
    const cause = s.details?.causes?.find((c) => c.reason === "ExitCode");
    const n = Number(cause?.message);
    return Number.isInteger(n) ? n : undefined;
  }
  return undefined;
}
