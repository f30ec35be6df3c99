/**
 * @module live/collect-objects — the Kubernetes objects a diagnosis reads, fetched with reads only
 * and written as `kubectl get -o yaml` prints them: Nodes, Namespaces, the ip-masq-agent
 * ConfigMap, the DaemonSets that masquerade (kube-system, kube-flannel) and their pods, the pods
 * asked about, Services, NetworkPolicies, (where the CRD exists) EgressNATPolicies, and the objects
 * of the other owners of a pod's source address (collect-owners.ts). Secrets are never read.
 */
import {
  type ApiObject,
  type ApiResource,
  CLIENT_LIMITS,
  ClusterError,
  type ClusterSource,
  RESOURCES,
} from "../k8s/cluster.ts";
import { collectOwnerObjects } from "./collect-owners.ts";
import { renderKubectlList, renderKubectlObject } from "./collect-render.ts";
import type { CollectOptions, PodTarget } from "./collect-types.ts";

/** What the object phase needs from the run: where to write, where to report. */
export interface RunContext {
  readonly source: ClusterSource;
  readonly options: CollectOptions;
  readonly signal: AbortSignal | undefined;
  write(rel: string, data: string | Uint8Array): Promise<void>;
  fail(subject: string, what: string, e: unknown): void;
  /** Records something that is normally absent (a tool not installed): not a failure. */
  note(subject: string, what: string, why: string): void;
}

const PAGE = 500;

/**
 * Lists every page (kubectl's default chunk size is 500), following at most `maxPages` continue
 * tokens: a server that keeps answering with a new token (or the same one) is stopped, not followed.
 */
export async function listAll(
  src: ClusterSource,
  res: ApiResource,
  opts: {
    namespace?: string;
    labelSelector?: string;
    signal?: AbortSignal | undefined;
    maxPages?: number;
  },
): Promise<ApiObject[]> {
  const items: ApiObject[] = [];
  const maxPages = opts.maxPages ?? CLIENT_LIMITS.maxPages;
  let previous: string | undefined;
  const request = {
    verb: "list" as const,
    resource: res.resource,
    group: res.group,
    ...(opts.namespace === undefined ? {} : { namespace: opts.namespace }),
  };
  let cont: string | undefined;
  let pages = 0;
  do {
    if (cont !== undefined) {
      if (cont === previous) {
        throw new ClusterError("Other", request, {
          apiMessage: `the server sent the same continue token twice (after ${pages} pages); podpath stops listing`,
        });
      }
      if (pages >= maxPages) {
        throw new ClusterError("Other", request, {
          apiMessage: `the list goes on past ${maxPages} pages of ${PAGE} (continue tokens without end); podpath stops listing`,
        });
      }
      previous = cont;
    }
    pages++;
    const page = await src.list(res, {
      ...(opts.namespace === undefined ? {} : { namespace: opts.namespace }),
      ...(opts.labelSelector === undefined ? {} : { labelSelector: opts.labelSelector }),
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
      limit: PAGE,
      ...(cont === undefined ? {} : { continue: cont }),
    });
    if (!Array.isArray(page?.items)) {
      throw new ClusterError("Other", request, {
        apiMessage: "the answer is not a list (no items array)",
      });
    }
    for (const item of page.items) {
      if (typeof item === "object" && item !== null && !Array.isArray(item)) items.push(item);
    }
    const next = page.metadata?.continue;
    cont = typeof next === "string" && next !== "" ? next : undefined;
  } while (cont !== undefined);
  return items;
}

/** Whether `--nodes` is a label selector rather than a list of names. */
export function isLabelSelector(nodes: string): boolean {
  return /[=!]|\s(in|notin)\s*\(/.test(nodes);
}

/** DaemonSets that write masquerade rules on the node (ip-masq-agent, anetd/cilium, kube-proxy, CNI agents). */
const MASQUERADING =
  /ip-masq-agent|anetd|cilium|kube-proxy|calico-node|antrea-agent|kube-router|weave-net|flannel|netd|masq|aws-node|amazon-k8s-cni/i;

export function isMasqueradingDaemonSet(ds: ApiObject): boolean {
  const tpl = (ds["spec"] as { template?: { spec?: { containers?: unknown[] } } } | undefined)
    ?.template;
  const text = JSON.stringify([ds.metadata?.name, ds.metadata?.labels, tpl?.spec?.containers]);
  return MASQUERADING.test(text);
}

function selectorOf(ds: ApiObject): string | undefined {
  const ml = (ds["spec"] as { selector?: { matchLabels?: Record<string, string> } } | undefined)
    ?.selector?.matchLabels;
  if (typeof ml !== "object" || ml === null) return undefined;
  // the answer is input: only string labels make a selector
  const terms = Object.entries(ml).filter((e): e is [string, string] => typeof e[1] === "string");
  if (terms.length === 0) return undefined;
  return terms.map(([k, v]) => `${k}=${v}`).join(",");
}

const podKey = (p: ApiObject) => `${p.metadata?.namespace}/${p.metadata?.name}`;

/** Runs one collection step: a failure is recorded and the next step runs, unless it ends the run. */
export type Step = (subject: string, what: string, f: () => Promise<void>) => Promise<void>;

/** The signal, as the options of a list or get call. */
export type Sig = { signal?: AbortSignal };

/**
 * Collects and writes the objects; returns the selected nodes (names) and the target pods as the
 * API returned them. Failures of one kind are recorded and the others still collected.
 */
export async function collectObjects(
  run: RunContext,
): Promise<{ nodes: string[]; pods: ApiObject[]; agentPods: ApiObject[] }> {
  const { signal } = run;
  const sig: Sig = signal === undefined ? {} : { signal };
  const out = { nodes: [] as string[], pods: [] as ApiObject[], agentPods: [] as ApiObject[] };
  async function step(subject: string, what: string, f: () => Promise<void>): Promise<void> {
    try {
      await f();
    } catch (e) {
      if (e instanceof ClusterError && e.reason === "Aborted") throw e;
      if (signal?.aborted) throw e;
      run.fail(subject, what, e);
      if (e instanceof ClusterError && (e.reason === "Unauthorized" || e.reason === "Unreachable"))
        throw e;
    }
  }

  await step("cluster/nodes", "list nodes", async () => {
    await collectNodes(run, sig, out);
  });
  await step("cluster/namespaces", "list namespaces", async () => {
    const items = await listAll(run.source, RESOURCES.namespaces, sig);
    await run.write("cluster/namespaces.yaml", renderKubectlList(RESOURCES.namespaces, items));
  });
  await step("cluster/configmaps", "get ConfigMap kube-system/ip-masq-agent", () =>
    collectAgentConfigMap(run, sig),
  );
  const pods = await collectPods(run, step, sig);
  out.pods = pods.targets;
  out.agentPods = pods.agents;
  await collectScoped(run, step, sig);
  await step("cluster/egressnatpolicies", "list EgressNATPolicies", async () => {
    const src = run.source;
    if (!(await src.serves(RESOURCES.egressnatpolicies, sig))) return;
    const items = await listAll(src, RESOURCES.egressnatpolicies, sig);
    await run.write(
      "cluster/egressnatpolicies.yaml",
      renderKubectlList(RESOURCES.egressnatpolicies, items),
    );
  });
  await collectOwnerObjects(run, step, sig, out.nodes);
  return out;
}

/** The nodes `--nodes` selects (by label selector or by names): their names in `out`, then written. */
async function collectNodes(run: RunContext, sig: Sig, out: { nodes: string[] }): Promise<void> {
  const o = run.options;
  const selector = o.nodes !== undefined && isLabelSelector(o.nodes) ? o.nodes : undefined;
  let nodes = await listAll(run.source, RESOURCES.nodes, {
    ...(selector === undefined ? {} : { labelSelector: selector }),
    ...sig,
  });
  if (o.nodes !== undefined && selector === undefined) {
    const wanted = o.nodes
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
    const have = new Set(nodes.map((n) => n.metadata?.name));
    for (const w of wanted) {
      if (!have.has(w)) run.fail(`node/${w}`, "find the node", "no node with this name");
    }
    nodes = nodes.filter((n) => wanted.includes(n.metadata?.name ?? ""));
  }
  out.nodes = nodes
    .map((n) => n.metadata?.name)
    .filter((n): n is string => typeof n === "string" && n !== "");
  await run.write("cluster/nodes.yaml", renderKubectlList(RESOURCES.nodes, nodes));
}

/** ConfigMap kube-system/ip-masq-agent, written when it exists. */
async function collectAgentConfigMap(run: RunContext, sig: Sig): Promise<void> {
  try {
    const cm = await run.source.get(RESOURCES.configmaps, "ip-masq-agent", {
      namespace: "kube-system",
      ...sig,
    });
    await run.write(
      "cluster/configmap-ip-masq-agent.yaml",
      renderKubectlObject(RESOURCES.configmaps, cm),
    );
  } catch (e) {
    // absent is a fact, not a failure: the agent then runs with its defaults
    if (!(e instanceof ClusterError && e.reason === "NotFound")) throw e;
  }
}

/**
 * Namespaces whose DaemonSets are read: kube-system, kube-flannel where Flannel >= v0.20 installs
 * itself (older Flannel lives in kube-system), and calico-system where the Tigera operator runs
 * calico-node (manifest installs put it in kube-system).
 */
export const DAEMONSET_NAMESPACES = ["kube-system", "kube-flannel", "calico-system"] as const;

/**
 * The masquerading DaemonSets (written) and their pods, kube-proxy's pods and the target pods,
 * written together; the target pods as the API returned them, and the DaemonSets' pods.
 */
async function collectPods(
  run: RunContext,
  step: Step,
  sig: Sig,
): Promise<{ targets: ApiObject[]; agents: ApiObject[] }> {
  const src = run.source;
  const targets: ApiObject[] = [];
  const agents: ApiObject[] = [];
  const pods = new Map<string, ApiObject>();
  const kept: ApiObject[] = [];
  let systemListed = false;
  for (const ns of DAEMONSET_NAMESPACES) {
    await step("cluster/daemonsets", `list DaemonSets in ${ns}`, async () => {
      const all = await listAll(src, RESOURCES.daemonsets, { namespace: ns, ...sig });
      kept.push(...all.filter(isMasqueradingDaemonSet));
      if (ns === "kube-system") systemListed = true;
    });
  }
  // without kube-system's list the file would claim DaemonSets absent that were not read
  if (systemListed)
    await run.write("cluster/daemonsets.yaml", renderKubectlList(RESOURCES.daemonsets, kept));
  for (const ds of kept) {
    const selector = selectorOf(ds);
    const ns = ds.metadata?.namespace ?? "kube-system";
    if (selector === undefined) continue;
    await step("cluster/pods", `list pods of DaemonSet ${ns}/${ds.metadata?.name}`, async () => {
      for (const p of await listAll(src, RESOURCES.pods, {
        namespace: ns,
        labelSelector: selector,
        ...sig,
      })) {
        pods.set(podKey(p), p);
        agents.push(p);
      }
    });
  }
  // kube-proxy often runs as static pods (GKE), not as a DaemonSet
  await step("cluster/pods", "list kube-proxy pods in kube-system", async () => {
    for (const p of await listAll(src, RESOURCES.pods, {
      namespace: "kube-system",
      labelSelector: "component=kube-proxy",
      ...sig,
    }))
      pods.set(podKey(p), p);
  });
  for (const t of run.options.pods ?? []) {
    await step(`pod/${t.namespace}/${t.name}`, "get the pod", async () => {
      const p = await src.get(RESOURCES.pods, t.name, { namespace: t.namespace, ...sig });
      pods.set(podKey(p), p);
      targets.push(p);
    });
  }
  await run.write("cluster/pods.yaml", renderKubectlList(RESOURCES.pods, [...pods.values()]));
  return { targets, agents };
}

/** Services and NetworkPolicies: of `--namespace` and the target pods' namespaces, or all. */
async function collectScoped(run: RunContext, step: Step, sig: Sig): Promise<void> {
  const o = run.options;
  const scoped = o.namespace === undefined ? {} : { namespace: o.namespace };
  const targetNamespaces = new Set((o.pods ?? []).map((t: PodTarget) => t.namespace));
  for (const [res, file] of [
    [RESOURCES.services, "cluster/services.yaml"],
    [RESOURCES.networkpolicies, "cluster/networkpolicies.yaml"],
  ] as const) {
    await step(`cluster/${res.resource}`, `list ${res.resource}`, async () => {
      const items = await listAll(run.source, res, { ...scoped, ...sig });
      if (o.namespace !== undefined) {
        for (const ns of targetNamespaces) {
          if (ns !== o.namespace)
            items.push(...(await listAll(run.source, res, { namespace: ns, ...sig })));
        }
      }
      await run.write(file, renderKubectlList(res, items));
    });
  }
}
