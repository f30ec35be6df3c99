/**
 * @module live/collect-owners — the objects the other owners of a pod's source address read,
 * fetched with reads only: Calico IPPools (projectcalico.org/v3 when the Calico API server serves
 * it, else the crd.projectcalico.org/v1 CRD), CiliumNodes, and the ConfigMaps of Cilium
 * (`cilium-config`), AKS's ip-masq-agent-v2 (`azure-ip-masq-agent-config` and its
 * `-reconciled` copy) and Flannel (`kube-flannel-cfg`). A resource the server does not serve
 * (absent CRD) or a ConfigMap that does not exist is "not installed": no file, not a failure.
 */
import { type ApiObject, type ApiResource, ClusterError, RESOURCES } from "../k8s/cluster.ts";
import { listAll, type RunContext, type Sig, type Step } from "./collect-objects.ts";
import { renderKubectlList } from "./collect-render.ts";

export const OWNER_RESOURCES = {
  /** Calico's API server (aggregated API): the API calicoctl and the docs use. */
  ippoolsV3: {
    group: "projectcalico.org",
    version: "v3",
    resource: "ippools",
    kind: "IPPool",
    namespaced: false,
  },
  /** The CRD Calico stores pools in (Kubernetes datastore). */
  ippoolsCrd: {
    group: "crd.projectcalico.org",
    version: "v1",
    resource: "ippools",
    kind: "IPPool",
    namespaced: false,
  },
  ciliumnodes: {
    group: "cilium.io",
    version: "v2",
    resource: "ciliumnodes",
    kind: "CiliumNode",
    namespaced: false,
  },
} as const satisfies Record<string, ApiResource>;

/** ConfigMaps read by name: the file, its name and the namespaces it may live in, in order. */
export const OWNER_CONFIGMAPS: readonly {
  readonly name: string;
  readonly namespaces: readonly string[];
  readonly file: string;
}[] = [
  {
    name: "cilium-config",
    namespaces: ["kube-system"],
    file: "cluster/configmap-cilium-config.yaml",
  },
  {
    name: "azure-ip-masq-agent-config",
    namespaces: ["kube-system"],
    file: "cluster/configmap-azure-ip-masq-agent-config.yaml",
  },
  {
    name: "azure-ip-masq-agent-config-reconciled",
    namespaces: ["kube-system"],
    file: "cluster/configmap-azure-ip-masq-agent-config-reconciled.yaml",
  },
  {
    name: "kube-flannel-cfg",
    namespaces: ["kube-flannel", "kube-system"],
    file: "cluster/configmap-kube-flannel-cfg.yaml",
  },
];

const notFound = (e: unknown) => e instanceof ClusterError && e.reason === "NotFound";

/** Lists a resource when served; undefined when not installed (no CRD, or gone meanwhile). */
async function listIfServed(
  run: RunContext,
  res: ApiResource,
  sig: Sig,
): Promise<ApiObject[] | undefined> {
  if (!(await run.source.serves(res, sig))) return undefined;
  try {
    return await listAll(run.source, res, sig);
  } catch (e) {
    if (notFound(e)) return undefined;
    throw e;
  }
}

/** Collects the owners' objects; `nodes` (the selected nodes) limits the CiliumNodes written. */
export async function collectOwnerObjects(
  run: RunContext,
  step: Step,
  sig: Sig,
  nodes: readonly string[],
): Promise<void> {
  await step("cluster/ippools", "list Calico IPPools", async () => {
    // v3 and the v1 CRD hold the same pools: one of them, or every pool would be read twice
    let res: ApiResource = OWNER_RESOURCES.ippoolsV3;
    let items = await listIfServed(run, res, sig);
    if (items === undefined) {
      res = OWNER_RESOURCES.ippoolsCrd;
      items = await listIfServed(run, res, sig);
    }
    if (items !== undefined) await run.write("cluster/ippools.yaml", renderKubectlList(res, items));
  });
  await step("cluster/ciliumnodes", "list CiliumNodes", async () => {
    const res = OWNER_RESOURCES.ciliumnodes;
    const items = await listIfServed(run, res, sig);
    if (items === undefined) return;
    const wanted = new Set(nodes);
    const kept =
      run.options.nodes === undefined
        ? items
        : items.filter((n) => wanted.has(n.metadata?.name ?? ""));
    await run.write("cluster/ciliumnodes.yaml", renderKubectlList(res, kept));
  });
  for (const cm of OWNER_CONFIGMAPS) {
    const found: ApiObject[] = [];
    for (const namespace of cm.namespaces) {
      await step("cluster/configmaps", `get ConfigMap ${namespace}/${cm.name}`, async () => {
        try {
          found.push(await run.source.get(RESOURCES.configmaps, cm.name, { namespace, ...sig }));
        } catch (e) {
          // absent: that owner is not installed (or not configured); a fact, not a failure
          if (!notFound(e)) throw e;
        }
      });
    }
    if (found.length > 0) await run.write(cm.file, renderKubectlList(RESOURCES.configmaps, found));
  }
}
