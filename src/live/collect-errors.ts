/**
 * @module live/collect-errors — one clear sentence for each way an API call fails, naming the
 * missing permission or the context, as the user must act on it. Pure.
 */
import type { ApiRequest, ClusterError } from "../k8s/cluster.ts";

export interface ErrorContext {
  readonly contextName?: string;
  readonly server?: string;
}

const RBAC_FILE = "deploy/rbac/podpath-reader.yaml";

/** The RBAC verb a request needs: exec and logs are `create`/`get` on a subresource. */
function rbacVerb(r: ApiRequest): string {
  if (r.verb === "exec") return "create";
  if (r.verb === "logs" || r.verb === "discover" || r.verb === "connect") return "get";
  return r.verb;
}

function scope(r: ApiRequest): string {
  return r.namespace === undefined ? "cluster-wide" : `in namespace "${r.namespace}"`;
}

function what(r: ApiRequest): string {
  return `${r.resource}${r.name === undefined ? "" : ` "${r.name}"`}`;
}

/** Renders a ClusterError as a single sentence (no trailing newline). */
export function explainClusterError(e: ClusterError, ctx: ErrorContext = {}): string {
  const c = ctx.contextName ? `context "${ctx.contextName}"` : "the current context";
  const r = e.request;
  const group = r.group ? ` in API group "${r.group}"` : "";
  switch (e.reason) {
    case "Forbidden": {
      const file =
        r.verb === "create" || r.verb === "delete" || r.resource === "pods/exec"
          ? "deploy/rbac/podpath-node-state.yaml or deploy/rbac/podpath-reader.yaml"
          : RBAC_FILE;
      return `Forbidden: the identity of ${c} may not ${rbacVerb(r)} ${what(r)} ${scope(r)}; it needs "${rbacVerb(r)}" on "${r.resource}"${group} (see ${file})${e.apiMessage ? ` [server: ${e.apiMessage}]` : ""}.`;
    }
    case "Unauthorized":
      if (e.status === undefined) {
        return `Unauthorized: getting credentials for ${c} failed (${e.apiMessage ?? "no detail"}); log in again or check the kubeconfig's exec plugin (for GKE: gke-gcloud-auth-plugin, gcloud auth login).`;
      }
      return `Unauthorized: the API server ${ctx.server ?? ""} rejected the credentials of ${c}${e.apiMessage ? ` (${e.apiMessage})` : ""}; log in again or refresh them (for GKE: gcloud container clusters get-credentials).`.replace(
        "  ",
        " ",
      );
    case "NotFound":
      return `Not found: ${what(r)} ${scope(r)} does not exist in the cluster of ${c}.`;
    case "Unreachable":
      return `Unreachable: the API server ${ctx.server ?? ""} of ${c} cannot be reached (${e.apiMessage ?? "no answer"}); check the network, VPN or proxy, and that this is the right context.`.replace(
        "  ",
        " ",
      );
    case "ContextNotFound":
      return `Kubeconfig: ${e.apiMessage ?? "the context was not found"}; pick one with --context or --kubeconfig (as kubectl does).`;
    case "Timeout":
      return `Timeout: the API server of ${c} did not answer ${r.verb} ${what(r)} in time${e.apiMessage ? ` (${e.apiMessage})` : ""}.`;
    case "Aborted":
      return "Interrupted before the collection finished.";
    case "Other":
      return `The API server of ${c} failed to ${r.verb} ${what(r)} ${scope(r)}${e.status ? ` (HTTP ${e.status})` : ""}${e.apiMessage ? `: ${e.apiMessage}` : ""}.`;
  }
}
