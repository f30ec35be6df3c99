/**
 * @module agents/aws-vpc-cni/daemonset — the AWS VPC CNI's intent from the `kube-system/aws-node`
 * DaemonSet as kubectl prints it: the `aws-node` container's env (each value with the file line it
 * is written on), read into the settings the plugin runs with (see env.ts).
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { SourceRef } from "../../model/types.ts";
import {
  boolEnv,
  cidrListEnv,
  connmarkEnv,
  DEFAULT_VETH_PREFIX,
  ENV_CONNMARK,
  ENV_EXCLUDE_SNAT_CIDRS,
  ENV_EXTERNAL_SNAT,
  ENV_NODE_PORT_SUPPORT,
  ENV_RANDOMIZE_SNAT,
  ENV_VETH_PREFIX,
  type EnvNote,
  type SnatType,
  snatTypeEnv,
} from "./env.ts";

/** One env entry of the container as written. */
export interface EnvEntry {
  readonly name: string;
  /** Undefined for `valueFrom` (the value is not in the object) or a missing value. */
  readonly value?: string;
  readonly valueFrom: boolean;
  readonly source: SourceRef;
}

/** What the plugin on every node of this DaemonSet runs with. */
export interface AwsNodeSettings {
  readonly externalSnat: boolean;
  readonly excludeSnatCidrs: readonly string[];
  readonly snatType: SnatType;
  readonly nodePortSupport: boolean;
  readonly connmark: number;
  readonly vethPrefix: string;
}

export interface AwsNodeIntent {
  readonly daemonSet: KubeObject;
  readonly container: string;
  /** Where the container's `env` list is (or the container, when it has none). */
  readonly envSource: SourceRef;
  readonly env: ReadonlyMap<string, EnvEntry>;
  readonly settings: AwsNodeSettings;
  /** Values the plugin refuses (it logs them and uses its default). */
  readonly notes: readonly EnvNote[];
  /** Settings whose value comes from `valueFrom` and is therefore not known here. */
  readonly unknown: readonly string[];
}

/** The AWS VPC CNI DaemonSet: kube-system, named aws-node or labelled k8s-app=aws-node. */
export function findAwsNodeDaemonSet(objects: readonly KubeObject[]): KubeObject | undefined {
  const ds = objects.filter((o) => o.kind === "DaemonSet" && o.namespace === "kube-system");
  return (
    ds.find((o) => o.name === "aws-node") ?? ds.find((o) => o.labels["k8s-app"] === "aws-node")
  );
}

interface ContainerLike {
  readonly name?: unknown;
  readonly image?: unknown;
  readonly env?: unknown;
}

/** Reads the aws-node DaemonSet's intent; undefined when the snapshot has no such DaemonSet. */
export function readAwsNodeIntent(objects: readonly KubeObject[]): AwsNodeIntent | undefined {
  const ds = findAwsNodeDaemonSet(objects);
  if (!ds) return undefined;
  const spec = (ds.raw["spec"] as { template?: { spec?: { containers?: unknown } } } | undefined)
    ?.template?.spec;
  const containers = Array.isArray(spec?.containers) ? (spec.containers as ContainerLike[]) : [];
  let index = containers.findIndex((c) => c.name === "aws-node");
  if (index < 0) {
    index = containers.findIndex(
      (c) => typeof c.image === "string" && /amazon-k8s-cni:/.test(c.image),
    );
  }
  const c = index >= 0 ? containers[index] : undefined;
  const base = ["spec", "template", "spec", "containers", index];
  const env = new Map<string, EnvEntry>();
  const list = Array.isArray(c?.env) ? (c.env as unknown[]) : [];
  list.forEach((e, j) => {
    if (typeof e !== "object" || e === null) return;
    const o = e as Record<string, unknown>;
    if (typeof o["name"] !== "string") return;
    const valueFrom = o["valueFrom"] !== undefined;
    const value = typeof o["value"] === "string" ? o["value"] : undefined;
    const source =
      ds.locate([...base, "env", j, valueFrom ? "valueFrom" : "value"]) ??
      ds.locate([...base, "env", j]) ??
      ds.source;
    // Kubernetes keeps the last of duplicate names
    env.set(o["name"], {
      name: o["name"],
      ...(value !== undefined ? { value } : {}),
      valueFrom,
      source,
    });
  });
  const val = (n: string) => env.get(n)?.value;
  const notes: EnvNote[] = [];
  const keep = <T>(r: { value: T; note?: EnvNote }): T => {
    if (r.note) notes.push(r.note);
    return r.value;
  };
  const exclude = cidrListEnv(ENV_EXCLUDE_SNAT_CIDRS, val(ENV_EXCLUDE_SNAT_CIDRS));
  notes.push(...exclude.notes);
  const settings: AwsNodeSettings = {
    externalSnat: keep(boolEnv(ENV_EXTERNAL_SNAT, val(ENV_EXTERNAL_SNAT), false)),
    excludeSnatCidrs: exclude.cidrs,
    snatType: keep(snatTypeEnv(val(ENV_RANDOMIZE_SNAT))),
    nodePortSupport: keep(boolEnv(ENV_NODE_PORT_SUPPORT, val(ENV_NODE_PORT_SUPPORT), true)),
    connmark: keep(connmarkEnv(val(ENV_CONNMARK))),
    vethPrefix: val(ENV_VETH_PREFIX) || DEFAULT_VETH_PREFIX,
  };
  const known = [
    ENV_EXTERNAL_SNAT,
    ENV_EXCLUDE_SNAT_CIDRS,
    ENV_RANDOMIZE_SNAT,
    ENV_NODE_PORT_SUPPORT,
    ENV_CONNMARK,
    ENV_VETH_PREFIX,
  ];
  return {
    daemonSet: ds,
    container: typeof c?.name === "string" ? c.name : "aws-node",
    envSource: ds.locate([...base, "env"]) ?? ds.locate(base) ?? ds.source,
    env,
    settings,
    notes,
    unknown: known.filter((n) => env.get(n)?.valueFrom === true),
  };
}
