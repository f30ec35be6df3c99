/**
 * @module test/k8s-api/server — a local HTTP server that answers as the Kubernetes API server does
 * for what podpath uses: discovery, list (label/field selectors, limit/continue paging) and get with
 * the real JSON shapes, create/delete of pods and DaemonSets (with a tiny DaemonSet controller
 * and kubelet that start pods), pod logs, pod exec over WebSocket with the channel protocol, bearer
 * authentication and RBAC-style refusals as Status objects. Every request is recorded.
 *
 * Shapes follow the API reference and the apiserver's own texts (see README.md beside this file).
 */
import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import type { TLSSocket } from "node:tls";
import { WebSocketServer } from "ws";

export interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

interface ResourceDef {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced: boolean;
  verbs: string[];
}

const DEFS: ResourceDef[] = [
  {
    group: "",
    version: "v1",
    resource: "nodes",
    kind: "Node",
    namespaced: false,
    verbs: ["get", "list", "watch"],
  },
  {
    group: "",
    version: "v1",
    resource: "namespaces",
    kind: "Namespace",
    namespaced: false,
    verbs: ["get", "list", "watch"],
  },
  {
    group: "",
    version: "v1",
    resource: "pods",
    kind: "Pod",
    namespaced: true,
    verbs: ["create", "delete", "get", "list", "watch"],
  },
  {
    group: "",
    version: "v1",
    resource: "services",
    kind: "Service",
    namespaced: true,
    verbs: ["get", "list", "watch"],
  },
  {
    group: "",
    version: "v1",
    resource: "configmaps",
    kind: "ConfigMap",
    namespaced: true,
    verbs: ["get", "list", "watch"],
  },
  {
    group: "",
    version: "v1",
    resource: "secrets",
    kind: "Secret",
    namespaced: true,
    verbs: ["get", "list", "watch"],
  },
  {
    group: "apps",
    version: "v1",
    resource: "daemonsets",
    kind: "DaemonSet",
    namespaced: true,
    verbs: ["create", "delete", "get", "list", "watch"],
  },
  {
    group: "networking.k8s.io",
    version: "v1",
    resource: "networkpolicies",
    kind: "NetworkPolicy",
    namespaced: true,
    verbs: ["get", "list", "watch"],
  },
  {
    group: "networking.gke.io",
    version: "v1",
    resource: "egressnatpolicies",
    kind: "EgressNATPolicy",
    namespaced: false,
    verbs: ["get", "list", "watch"],
  },
  // Calico: the IPPool CRD (Kubernetes datastore) and the Calico API server's aggregated v3 API
  {
    group: "crd.projectcalico.org",
    version: "v1",
    resource: "ippools",
    kind: "IPPool",
    namespaced: false,
    verbs: ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
  },
  {
    group: "projectcalico.org",
    version: "v3",
    resource: "ippools",
    kind: "IPPool",
    namespaced: false,
    verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
  },
  {
    group: "cilium.io",
    version: "v2",
    resource: "ciliumnodes",
    kind: "CiliumNode",
    namespaced: false,
    verbs: ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
  },
];

/** API groups that exist only when their CRD (or aggregated API server) is installed. */
export type OptionalApi = "gke" | "calico-crd" | "calico-v3" | "cilium";
const OPTIONAL_GROUPS: Record<string, OptionalApi> = {
  "networking.gke.io": "gke",
  "crd.projectcalico.org": "calico-crd",
  "projectcalico.org": "calico-v3",
  "cilium.io": "cilium",
};

/** One request as the server saw it, with the Kubernetes verb it means. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly verb: string;
  readonly resource: string;
  /** API group of the resource ("" for the core group). */
  readonly group: string;
  readonly namespace?: string;
  readonly name?: string;
  /** exec only: the command. */
  readonly command?: readonly string[];
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly status: number;
  /** HTTPS only: the CN of the verified client certificate the caller presented. */
  readonly clientCert?: string;
}

export interface ExecAnswer {
  readonly stdout?: string | Buffer;
  readonly stderr?: string;
  readonly code?: number;
  /** The binary does not exist in the image (containerd's failure text). */
  readonly notFound?: boolean;
  readonly delayMs?: number;
}

export interface FakeApiOptions {
  /** Required bearer token; absent means any caller is accepted. */
  readonly token?: string;
  /** The user named in refusals. */
  readonly user?: string;
  /** Refused (verb, resource[, namespace]); resource may carry a subresource (`pods/exec`). */
  readonly forbid?: readonly { verb: string; resource: string; namespace?: string }[];
  /** Whether the networking.gke.io group (EgressNATPolicy CRD) is served. */
  readonly gkeCrds?: boolean;
  /** Other optional API groups served (Calico's CRD or v3 API server, Cilium's CRDs). */
  readonly apis?: readonly OptionalApi[];
  /** Answers an exec in a pod; `pod` is the stored pod object. */
  readonly exec?: (pod: Obj, argv: readonly string[]) => ExecAnswer;
  /** Milliseconds before a created pod is Running. */
  readonly podStartMs?: number;
  /** Nodes whose created pods never start (their status tells why). */
  readonly brokenNodes?: ReadonlySet<string>;
  /** Nodes whose created pods start and crash, with the log their container printed. */
  readonly crashNodes?: ReadonlyMap<string, string>;
  /** Serve HTTPS with this key and certificate (client certificates are asked for, not required). */
  readonly tls?: { readonly key: string; readonly cert: string; readonly ca?: string };
  /** Called for every recorded request (e.g. to abort mid-run). */
  readonly onRequest?: (r: RecordedRequest) => void;
}

export interface FakeApi {
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** Current objects per resource (plural; `ippools.<group>` for the kind served twice). */
  readonly store: Map<string, Obj[]>;
  /** Exec WebSockets open now, and the most open at once. */
  readonly stats: { openExecs: number; peakExecs: number };
  close(): Promise<void>;
}

/** A stable uid for a fixture object, so recorded kubectl output stays comparable. */
function stableUid(kind: string, ns: string | undefined, name: string): string {
  const h = createHash("sha1")
    .update(`${kind}/${ns ?? ""}/${name}`)
    .digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

function status(code: number, reason: string, message: string, details?: object) {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

function forbiddenMessage(
  user: string,
  verb: string,
  def: { group: string; resource: string },
  resource: string,
  ns?: string,
  name?: string,
): string {
  const subject = name === undefined ? def.resource : `${def.resource} "${name}"`;
  const scope = ns === undefined ? "at the cluster scope" : `in the namespace "${ns}"`;
  return `${subject} is forbidden: User "${user}" cannot ${verb} resource "${resource}" in API group "${def.group}" ${scope}`;
}

/** `/api/<v>` or `/apis/<group>/<version>`: discovery (system:discovery lets everyone read it). */
function isDiscoveryPath(pathname: string): boolean {
  const seg = pathname.split("/").filter((x) => x !== "");
  return (seg[0] === "api" && seg.length === 2) || (seg[0] === "apis" && seg.length === 3);
}

/** A subset of label selector syntax: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`. */
export function matchesLabels(
  labels: Record<string, string> | undefined,
  selector: string,
): boolean {
  const l = labels ?? {};
  const terms = selector.match(/[^,(]+(\([^)]*\))?/g) ?? [];
  return terms.every((raw) => {
    const t = raw.trim();
    if (t === "") return true;
    let m = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(t);
    if (m) {
      const vals = m[3]!.split(",").map((s) => s.trim());
      const has = l[m[1]!] !== undefined && vals.includes(l[m[1]!]!);
      return m[2] === "in" ? has : !has;
    }
    m = /^([^!=]+)!=(.*)$/.exec(t);
    if (m) return l[m[1]!.trim()] !== m[2]!.trim();
    m = /^([^!=]+)==?(.*)$/.exec(t);
    if (m) return l[m[1]!.trim()] === m[2]!.trim();
    if (t.startsWith("!")) return l[t.slice(1)] === undefined;
    return l[t] !== undefined;
  });
}

function fieldOf(o: Obj, path: string): unknown {
  let cur: unknown = o;
  for (const p of path.split(".")) cur = (cur as Record<string, unknown> | undefined)?.[p];
  return cur;
}

function matchesFields(o: Obj, selector: string): boolean {
  return selector.split(",").every((t) => {
    const m = /^([^!=]+)(!=|==|=)(.*)$/.exec(t.trim());
    if (!m) return true;
    const v = String(fieldOf(o, m[1]!) ?? "");
    return m[2] === "!=" ? v !== m[3] : v === m[3];
  });
}

/** Starts the server on 127.0.0.1 and a free port, with the given objects. */
export async function startFakeApi(initial: Obj[], opts: FakeApiOptions = {}): Promise<FakeApi> {
  const store = new Map<string, Obj[]>();
  let rv = 1000;
  const nextRv = () => String(++rv);
  const gvOf = (d: ResourceDef) => (d.group === "" ? d.version : `${d.group}/${d.version}`);
  const defOf = (o: Obj) =>
    DEFS.find((d) => d.kind === o.kind && (o.apiVersion === undefined || gvOf(d) === o.apiVersion));
  // objects of a kind served by two APIs (IPPool) are stored per API group
  const keyOf = (d: ResourceDef) =>
    DEFS.filter((x) => x.resource === d.resource).length > 1
      ? `${d.resource}.${d.group}`
      : d.resource;
  for (const o of initial) {
    const d = defOf(o);
    if (!d) throw new Error(`fake api: unknown kind ${o.kind}`);
    const copy = structuredClone(o);
    delete copy.apiVersion;
    delete copy.kind;
    copy.metadata.resourceVersion ??= nextRv();
    copy.metadata["uid"] ??= stableUid(d.kind, copy.metadata.namespace, copy.metadata.name);
    store.set(keyOf(d), [...(store.get(keyOf(d)) ?? []), copy]);
  }
  const requests: RecordedRequest[] = [];
  const stats = { openExecs: 0, peakExecs: 0 };
  const user = opts.user ?? "podpath-test@example.iam.gserviceaccount.com";
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, f: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      f();
    }, ms);
    timers.add(t);
  };
  const served = (d: ResourceDef) => {
    const optional = OPTIONAL_GROUPS[d.group];
    if (optional === undefined) return true;
    if (optional === "gke" && opts.gkeCrds === true) return true;
    return (opts.apis ?? []).includes(optional);
  };
  const list = (resource: string) => store.get(resource) ?? [];
  const peerCn = (req: IncomingMessage): string | undefined => {
    const sock = req.socket as TLSSocket;
    if (typeof sock.getPeerCertificate !== "function" || !sock.authorized) return undefined;
    const cn = sock.getPeerCertificate()?.subject?.CN;
    return typeof cn === "string" ? cn : undefined;
  };
  const record = (r: RecordedRequest) => {
    requests.push(r);
    opts.onRequest?.(r);
  };

  function isForbidden(verb: string, resource: string, ns?: string): boolean {
    return (opts.forbid ?? []).some(
      (f) =>
        f.verb === verb &&
        f.resource === resource &&
        (f.namespace === undefined || f.namespace === ns),
    );
  }

  function startPod(pod: Obj): void {
    const node = (pod["spec"] as { nodeName?: string }).nodeName ?? "";
    const containers =
      (pod["spec"] as { containers?: { name: string; image?: string }[] }).containers ?? [];
    const crashLog = opts.crashNodes?.get(node);
    if (crashLog !== undefined) {
      later(opts.podStartMs ?? 5, () => {
        pod.metadata.annotations = { ...pod.metadata.annotations, "test/log": crashLog };
        pod["status"] = {
          phase: "Running",
          containerStatuses: containers.map((c) => ({
            name: c.name,
            image: c.image,
            ready: false,
            restartCount: 3,
            state: {
              waiting: {
                reason: "CrashLoopBackOff",
                message: `back-off 40s restarting failed container=${c.name} pod=${pod.metadata.name}`,
              },
            },
          })),
        };
      });
      return;
    }
    if (opts.brokenNodes?.has(node)) {
      later(opts.podStartMs ?? 5, () => {
        pod["status"] = {
          phase: "Pending",
          conditions: [{ type: "PodScheduled", status: "True" }],
          containerStatuses: containers.map((c) => ({
            name: c.name,
            image: c.image,
            ready: false,
            restartCount: 0,
            state: {
              waiting: {
                reason: "ImagePullBackOff",
                message: `Back-off pulling image "${c.image}"`,
              },
            },
          })),
        };
      });
      return;
    }
    later(opts.podStartMs ?? 5, () => {
      pod["status"] = {
        phase: "Running",
        hostIP: "10.128.0.2",
        podIP: "10.128.0.2",
        startTime: new Date().toISOString(),
        conditions: [
          { type: "Initialized", status: "True" },
          { type: "Ready", status: "True" },
          { type: "ContainersReady", status: "True" },
          { type: "PodScheduled", status: "True" },
        ],
        containerStatuses: containers.map((c) => ({
          name: c.name,
          image: c.image,
          ready: true,
          started: true,
          restartCount: 0,
          state: { running: { startedAt: new Date().toISOString() } },
        })),
      };
    });
  }

  /** The DaemonSet controller: one pod per eligible node, pinned by matchFields affinity. */
  function runDaemonSet(ds: Obj): void {
    const spec = ds["spec"] as {
      template: { metadata?: { labels?: Record<string, string> }; spec: Record<string, unknown> };
    };
    const aff = spec.template.spec["affinity"] as
      | {
          nodeAffinity?: {
            requiredDuringSchedulingIgnoredDuringExecution?: {
              nodeSelectorTerms?: {
                matchFields?: { key: string; operator: string; values: string[] }[];
              }[];
            };
          };
        }
      | undefined;
    const names =
      aff?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms
        ?.flatMap((t) => t.matchFields ?? [])
        .filter((f) => f.key === "metadata.name" && f.operator === "In")
        .flatMap((f) => f.values);
    const allowed = names ? new Set(names) : undefined;
    const nodes = list("nodes").filter((n) => !allowed || allowed.has(n.metadata.name));
    const pods = store.get("pods") ?? [];
    store.set("pods", pods);
    for (const n of nodes) {
      const pod: Obj = {
        metadata: {
          name: `${ds.metadata.name}-${randomUUID().slice(0, 5)}`,
          namespace: ds.metadata.namespace!,
          labels: { ...(spec.template.metadata?.labels ?? {}) },
          uid: randomUUID(),
          resourceVersion: nextRv(),
          creationTimestamp: new Date().toISOString(),
          ownerReferences: [
            {
              apiVersion: "apps/v1",
              kind: "DaemonSet",
              name: ds.metadata.name,
              uid: ds.metadata["uid"],
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: { ...structuredClone(spec.template.spec), nodeName: n.metadata.name },
        status: { phase: "Pending" },
      };
      pods.push(pod);
      startPod(pod);
    }
    ds["status"] = {
      currentNumberScheduled: nodes.length,
      desiredNumberScheduled: nodes.length,
      numberMisscheduled: 0,
      numberReady: 0,
    };
  }

  function send(res: ServerResponse, code: number, body: unknown): void {
    const text = typeof body === "string" ? body : JSON.stringify(body);
    res.writeHead(code, {
      "Content-Type": typeof body === "string" ? "text/plain" : "application/json",
      "Content-Length": Buffer.byteLength(text),
    });
    res.end(text);
  }

  interface Route {
    def?: ResourceDef;
    discovery?: unknown;
    ns?: string;
    name?: string;
    sub?: string;
  }

  function route(pathname: string): Route | undefined {
    const seg = pathname
      .split("/")
      .filter((s) => s !== "")
      .map(decodeURIComponent);
    if (seg.length === 1 && seg[0] === "version") {
      return {
        discovery: {
          major: "1",
          minor: "29",
          gitVersion: "v1.29.6-gke.1038001",
          platform: "linux/amd64",
        },
      };
    }
    if (seg.length === 1 && seg[0] === "apis") {
      const gvs = [
        ...new Set(
          DEFS.filter((d) => d.group !== "" && served(d)).map((d) => `${d.group}/${d.version}`),
        ),
      ];
      return {
        discovery: {
          kind: "APIGroupList",
          apiVersion: "v1",
          groups: gvs.map((gv) => {
            const [name, version] = gv.split("/") as [string, string];
            const v = { groupVersion: gv, version };
            return { name, versions: [v], preferredVersion: v };
          }),
        },
      };
    }
    if (seg.length === 1 && seg[0] === "api")
      return {
        discovery: {
          kind: "APIVersions",
          versions: ["v1"],
          serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "10.0.0.2:443" }],
        },
      };
    let group: string;
    let version: string;
    let rest: string[];
    if (seg[0] === "api" && seg.length >= 2) {
      group = "";
      version = seg[1]!;
      rest = seg.slice(2);
    } else if (seg[0] === "apis" && seg.length >= 3) {
      group = seg[1]!;
      version = seg[2]!;
      rest = seg.slice(3);
    } else return undefined;
    const defs = DEFS.filter((d) => d.group === group && d.version === version && served(d));
    if (defs.length === 0) return undefined;
    if (rest.length === 0) {
      return {
        discovery: {
          kind: "APIResourceList",
          apiVersion: "v1",
          groupVersion: group === "" ? version : `${group}/${version}`,
          resources: defs.map((d) => ({
            name: d.resource,
            singularName: d.kind.toLowerCase(),
            namespaced: d.namespaced,
            kind: d.kind,
            verbs: d.verbs,
          })),
        },
      };
    }
    let ns: string | undefined;
    if (rest[0] === "namespaces" && rest.length >= 3) {
      ns = rest[1];
      rest = rest.slice(2);
    }
    const def = defs.find((d) => d.resource === rest[0]);
    if (!def) return undefined;
    return {
      def,
      ...(ns === undefined ? {} : { ns }),
      ...(rest[1] === undefined ? {} : { name: rest[1] }),
      ...(rest[2] === undefined ? {} : { sub: rest[2] }),
    };
  }

  const authorized = (req: IncomingMessage) =>
    opts.token === undefined || req.headers.authorization === `Bearer ${opts.token}`;

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString("utf8");
    });
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://x");
      const r = route(url.pathname);
      const method = req.method ?? "GET";
      let verb =
        method === "POST"
          ? "create"
          : method === "DELETE"
            ? "delete"
            : r?.name === undefined
              ? "list"
              : "get";
      if (url.searchParams.get("watch") === "true") verb = "watch";
      const resource = r?.def ? (r.sub ? `${r.def.resource}/${r.sub}` : r.def.resource) : "";
      const answer = (code: number, b: unknown) => {
        record({
          method,
          path: url.pathname + url.search,
          // a discovery path of a group not served (absent CRD) is still discovery: 404
          verb: r?.discovery || isDiscoveryPath(url.pathname) ? "discover" : verb,
          resource,
          group: r?.def?.group ?? "",
          ...(r?.ns === undefined ? {} : { namespace: r.ns }),
          ...(r?.name === undefined ? {} : { name: r.name }),
          headers: req.headers,
          status: code,
          ...(peerCn(req) === undefined ? {} : { clientCert: peerCn(req)! }),
        });
        send(res, code, b);
      };
      if (!authorized(req)) return answer(401, status(401, "Unauthorized", "Unauthorized"));
      if (r?.discovery) return answer(200, r.discovery);
      if (!r?.def)
        return answer(
          404,
          status(404, "NotFound", "the server could not find the requested resource", {}),
        );
      const def = r.def;
      if (isForbidden(verb, resource, r.ns)) {
        return answer(
          403,
          status(403, "Forbidden", forbiddenMessage(user, verb, def, resource, r.ns, r.name), {
            ...(r.name === undefined ? {} : { name: r.name }),
            ...(def.group === "" ? {} : { group: def.group }),
            kind: def.resource,
          }),
        );
      }
      const items = list(keyOf(def));
      const notFound = () =>
        answer(
          404,
          status(
            404,
            "NotFound",
            `${def.resource}${def.group ? `.${def.group}` : ""} "${r.name}" not found`,
            {
              name: r.name,
              ...(def.group === "" ? {} : { group: def.group }),
              kind: def.resource,
            },
          ),
        );
      const inNs = (o: Obj) =>
        !def.namespaced || r.ns === undefined || o.metadata.namespace === r.ns;
      if (method === "GET" && r.sub === "log") {
        const pod = items.find((o) => inNs(o) && o.metadata.name === r.name);
        if (!pod) return notFound();
        return answer(200, (pod.metadata.annotations?.["test/log"] ?? "") as string);
      }
      if (method === "GET" && r.name === undefined) {
        const ls = url.searchParams.get("labelSelector");
        const fs = url.searchParams.get("fieldSelector");
        const all = items.filter(
          (o) =>
            inNs(o) &&
            (!ls || matchesLabels(o.metadata.labels, ls)) &&
            (!fs || matchesFields(o, fs)),
        );
        const limit = Number(url.searchParams.get("limit") ?? "0");
        const from = Number(
          Buffer.from(url.searchParams.get("continue") ?? "", "base64url").toString() || "0",
        );
        const page = limit > 0 ? all.slice(from, from + limit) : all;
        const more = limit > 0 && from + limit < all.length;
        return answer(200, {
          kind: `${def.kind}List`,
          apiVersion: def.group === "" ? def.version : `${def.group}/${def.version}`,
          metadata: {
            resourceVersion: String(rv),
            ...(more
              ? {
                  continue: Buffer.from(String(from + limit)).toString("base64url"),
                  remainingItemCount: all.length - from - limit,
                }
              : {}),
          },
          items: page,
        });
      }
      if (method === "GET") {
        const o = items.find((x) => inNs(x) && x.metadata.name === r.name);
        if (!o) return notFound();
        return answer(200, {
          kind: def.kind,
          apiVersion: def.group === "" ? def.version : `${def.group}/${def.version}`,
          ...o,
        });
      }
      if (method === "POST") {
        const o = JSON.parse(body) as Obj;
        if (items.some((x) => inNs(x) && x.metadata.name === o.metadata.name)) {
          return answer(
            409,
            status(409, "AlreadyExists", `${def.resource} "${o.metadata.name}" already exists`, {
              name: o.metadata.name,
              kind: def.resource,
            }),
          );
        }
        delete o.apiVersion;
        delete o.kind;
        o.metadata = {
          ...o.metadata,
          ...(def.namespaced ? { namespace: r.ns ?? "default" } : {}),
          uid: randomUUID(),
          resourceVersion: nextRv(),
          creationTimestamp: new Date().toISOString(),
        };
        store.set(keyOf(def), [...items, o]);
        if (def.resource === "pods") {
          o["status"] = { phase: "Pending" };
          startPod(o);
        }
        if (def.resource === "daemonsets") runDaemonSet(o);
        return answer(201, {
          kind: def.kind,
          apiVersion: def.group === "" ? def.version : `${def.group}/${def.version}`,
          ...o,
        });
      }
      if (method === "DELETE") {
        const o = items.find((x) => inNs(x) && x.metadata.name === r.name);
        if (!o) return notFound();
        store.set(
          keyOf(def),
          items.filter((x) => x !== o),
        );
        if (def.resource === "daemonsets") {
          // garbage collector (background propagation): the DaemonSet's pods go too
          store.set(
            "pods",
            list("pods").filter(
              (p) =>
                !((p.metadata["ownerReferences"] as { uid?: unknown }[] | undefined) ?? []).some(
                  (ref) => ref.uid === o.metadata["uid"],
                ),
            ),
          );
        }
        return answer(200, {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Success",
          details: { name: r.name, kind: def.resource, uid: o.metadata["uid"] },
        });
      }
      return answer(
        405,
        status(
          405,
          "MethodNotAllowed",
          "the server does not allow this method on the requested resource",
        ),
      );
    });
  };
  const server = opts.tls
    ? createTlsServer({ ...opts.tls, requestCert: true, rejectUnauthorized: false }, handle)
    : createServer(handle);

  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => {
      for (const p of ["v5.channel.k8s.io", "v4.channel.k8s.io"]) if (protocols.has(p)) return p;
      return false;
    },
  });

  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? "/", "http://x");
    const r = route(url.pathname);
    const command = url.searchParams.getAll("command");
    const rec = (code: number) =>
      record({
        method: req.method ?? "GET",
        path: url.pathname + url.search,
        verb: "create",
        resource: "pods/exec",
        group: "",
        ...(r?.ns === undefined ? {} : { namespace: r.ns }),
        ...(r?.name === undefined ? {} : { name: r.name }),
        command,
        headers: req.headers,
        status: code,
        ...(peerCn(req) === undefined ? {} : { clientCert: peerCn(req)! }),
      });
    const refuse = (code: number, b: unknown) => {
      rec(code);
      const text = JSON.stringify(b);
      socket.end(
        `HTTP/1.1 ${code} ${code === 403 ? "Forbidden" : code === 401 ? "Unauthorized" : "Not Found"}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
      );
    };
    if (!authorized(req)) return refuse(401, status(401, "Unauthorized", "Unauthorized"));
    if (r?.def?.resource !== "pods" || r.sub !== "exec" || r.name === undefined) {
      return refuse(
        404,
        status(404, "NotFound", "the server could not find the requested resource"),
      );
    }
    if (isForbidden("create", "pods/exec", r.ns)) {
      return refuse(
        403,
        status(
          403,
          "Forbidden",
          forbiddenMessage(user, "create", r.def, "pods/exec", r.ns, r.name),
          { name: r.name, kind: "pods" },
        ),
      );
    }
    const pod = list("pods").find(
      (p) => p.metadata.namespace === r.ns && p.metadata.name === r.name,
    );
    if (!pod)
      return refuse(
        404,
        status(404, "NotFound", `pods "${r.name}" not found`, { name: r.name, kind: "pods" }),
      );
    wss.handleUpgrade(req, socket, head, (ws) => {
      rec(101);
      stats.openExecs++;
      stats.peakExecs = Math.max(stats.peakExecs, stats.openExecs);
      ws.on("close", () => {
        stats.openExecs--;
      });
      const a = opts.exec?.(pod, command) ?? { notFound: true };
      const finish = () => {
        if (ws.readyState !== ws.OPEN) return;
        const frame = (ch: number, data: string | Buffer) => {
          const b = typeof data === "string" ? Buffer.from(data) : data;
          // the kubelet streams output in chunks; keep frames modest as it does
          for (let i = 0; i < b.length; i += 32 * 1024)
            ws.send(Buffer.concat([Buffer.from([ch]), b.subarray(i, i + 32 * 1024)]));
        };
        let st: unknown;
        if (a.notFound) {
          st = {
            metadata: {},
            status: "Failure",
            message: `failed to exec in container: failed to start exec "${randomUUID().replaceAll("-", "")}": OCI runtime exec failed: exec failed: unable to start container process: exec: "${command[0]}": executable file not found in $PATH: unknown`,
            reason: "InternalError",
            details: {
              causes: [{ message: `exec: "${command[0]}": executable file not found in $PATH` }],
            },
            code: 500,
          };
        } else {
          if (a.stdout !== undefined && a.stdout.length > 0) frame(1, a.stdout);
          if (a.stderr) frame(2, a.stderr);
          st =
            (a.code ?? 0) === 0
              ? { metadata: {}, status: "Success" }
              : {
                  metadata: {},
                  status: "Failure",
                  message: `command terminated with non-zero exit code: error executing command [${command.join(" ")}], exit code ${a.code}`,
                  reason: "NonZeroExitCode",
                  details: { causes: [{ reason: "ExitCode", message: String(a.code) }] },
                };
        }
        frame(3, JSON.stringify(st));
        ws.close(1000);
      };
      if (a.delayMs) later(a.delayMs, finish);
      else finish();
    });
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${opts.tls ? "https" : "http"}://127.0.0.1:${port}`,
    requests,
    store,
    stats,
    async close() {
      for (const t of timers) clearTimeout(t);
      for (const c of wss.clients) c.terminate();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A kubeconfig (YAML) pointing at the fake server, with a bearer token or an exec plugin. */
export function kubeconfigFor(
  url: string,
  user: {
    caData?: string;
    token?: string;
    exec?: { command: string; args?: string[] };
    certData?: string;
    keyData?: string;
  },
  context = "test-ctx",
): string {
  const lines = [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: test-cluster",
    "  cluster:",
    `    server: ${url}`,
    user.caData
      ? `    certificate-authority-data: ${user.caData}`
      : "    insecure-skip-tls-verify: true",
    "contexts:",
    `- name: ${context}`,
    "  context:",
    "    cluster: test-cluster",
    "    user: test-user",
    "    namespace: default",
    `current-context: ${context}`,
    "users:",
    "- name: test-user",
    "  user:",
  ];
  if (user.token) lines.push(`    token: ${user.token}`);
  if (user.certData) lines.push(`    client-certificate-data: ${user.certData}`);
  if (user.keyData) lines.push(`    client-key-data: ${user.keyData}`);
  if (user.exec) {
    lines.push(
      "    exec:",
      "      apiVersion: client.authentication.k8s.io/v1",
      `      command: ${user.exec.command}`,
      "      interactiveMode: Never",
      "      provideClusterInfo: false",
    );
    if (user.exec.args)
      lines.push(`      args: [${user.exec.args.map((a) => JSON.stringify(a)).join(", ")}]`);
  }
  return `${lines.join("\n")}\n`;
}
