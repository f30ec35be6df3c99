/**
 * @module agents/flannel/daemonset — flanneld's flags from the kube-flannel DaemonSet (flannel
 * main.go: `--ip-masq` "setup IP masquerade rule for traffic destined outside of overlay network",
 * default false; `--ip-masq-fully-random-disable`, default false), each with its line. Go's flag
 * package: a bool flag is `--ip-masq`, `--ip-masq=true|false` (strconv.ParseBool spellings).
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { SourceRef } from "../../model/types.ts";

export const FLAG_IP_MASQ = "--ip-masq";
export const FLAG_RANDOM_FULLY_DISABLE = "--ip-masq-fully-random-disable";

export interface FlannelFlags {
  readonly daemonSet: KubeObject;
  readonly container: string;
  /** Index of the container in spec.template.spec.containers. */
  readonly containerIndex: number;
  readonly args: readonly string[];
  readonly ipMasq: boolean;
  readonly ipMasqSource?: SourceRef;
  readonly randomFullyDisable: boolean;
  /** Where the args list is (or the container). */
  readonly argsSource: SourceRef;
}

const TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);

/** The flanneld DaemonSet: kube-flannel-ds (any namespace) or a container running flanneld. */
export function findFlannelDaemonSet(objects: readonly KubeObject[]): KubeObject | undefined {
  const ds = objects.filter((o) => o.kind === "DaemonSet");
  return (
    ds.find((o) => o.name === "kube-flannel-ds") ??
    ds.find((o) => /flanneld|flannel-io\/flannel|flannel:v/.test(JSON.stringify(o.raw["spec"])))
  );
}

interface ContainerLike {
  readonly name?: unknown;
  readonly image?: unknown;
  readonly command?: unknown;
  readonly args?: unknown;
}

/** flanneld's flags; undefined without its DaemonSet. */
export function readFlannelFlags(objects: readonly KubeObject[]): FlannelFlags | undefined {
  const ds = findFlannelDaemonSet(objects);
  if (!ds) return undefined;
  const spec = (ds.raw["spec"] as { template?: { spec?: { containers?: unknown } } } | undefined)
    ?.template?.spec;
  const containers = Array.isArray(spec?.containers) ? (spec.containers as ContainerLike[]) : [];
  let index = containers.findIndex((c) => c.name === "kube-flannel");
  if (index < 0)
    index = containers.findIndex((c) => /flanneld/.test(JSON.stringify([c.command, c.args])));
  const c = index >= 0 ? containers[index] : undefined;
  const base = ["spec", "template", "spec", "containers", index];
  const argv = [
    ...(Array.isArray(c?.command) ? c.command : []),
    ...(Array.isArray(c?.args) ? c.args : []),
  ].filter((a): a is string => typeof a === "string");
  const nCommand = Array.isArray(c?.command) ? c.command.length : 0;
  const locate = (i: number) =>
    i < nCommand ? ds.locate([...base, "command", i]) : ds.locate([...base, "args", i - nCommand]);
  const flag = (name: string): { value: boolean; at?: number } => {
    let value = false;
    let at: number | undefined;
    argv.forEach((a, i) => {
      const long = a.replace(/^-{1,2}/, "--");
      if (long === name) {
        value = true;
        at = i;
      } else if (long.startsWith(`${name}=`)) {
        value = TRUE.has(long.slice(name.length + 1));
        at = i;
      }
    });
    return at === undefined ? { value } : { value, at };
  };
  const masq = flag(FLAG_IP_MASQ);
  const rand = flag(FLAG_RANDOM_FULLY_DISABLE);
  const masqSource = masq.at !== undefined ? locate(masq.at) : undefined;
  return {
    daemonSet: ds,
    container: typeof c?.name === "string" ? c.name : "kube-flannel",
    containerIndex: index,
    args: argv,
    ipMasq: masq.value,
    ...(masqSource ? { ipMasqSource: masqSource } : {}),
    randomFullyDisable: rand.value,
    argsSource: ds.locate([...base, "args"]) ?? ds.locate(base) ?? ds.source,
  };
}
