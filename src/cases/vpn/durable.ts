/**
 * @module cases/vpn/durable — what in a workload manifest sets `net.ipv4.ip_forward` when the pod
 * is created: an init container that writes it (`sysctl -w`, `echo 1 > /proc/sys/…`), a pod-level
 * `securityContext.sysctls` entry, or a tunnel kind's own switch (the OpenVPN chart's value). A value set by
 * hand inside a running container is not among them: it is gone after the next restart.
 */

import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { SourceRef } from "../../model/types.ts";

export interface ForwardingSetter {
  readonly kind: "init-container" | "pod-sysctls" | "chart-value";
  readonly value: string;
  readonly source: SourceRef;
}

export const IP_FORWARD = "net.ipv4.ip_forward";

/** The pod-spec path of a workload (`spec` for a Pod, `spec.template.spec` for controllers). */
export function podSpecPath(kind: string): (string | number)[] {
  if (kind === "Pod") return ["spec"];
  if (kind === "CronJob") return ["spec", "jobTemplate", "spec", "template", "spec"];
  return ["spec", "template", "spec"];
}

function at(obj: unknown, path: readonly (string | number)[]): unknown {
  let c: unknown = obj;
  for (const p of path) {
    if (typeof c !== "object" || c === null) return undefined;
    c = (c as Record<string | number, unknown>)[p];
  }
  return c;
}

// net.ipv4.conf.all.forwarding is the same kernel setting as net.ipv4.ip_forward (devinet's
// "all" forwarding entry writes both), as WireGuard images' init containers often set it
const WRITES_FORWARD =
  /(?:sysctl\s+(?:-\w+\s+)*-w\s+(?:[\w.]+=\S+\s+)*net[./]ipv4[./](?:ip_forward|conf[./]all[./]forwarding)\s*=\s*1|echo\s+(?:-n\s+)?["']?1["']?\s*>\s*["']?\/proc\/sys\/net\/ipv4\/(?:ip_forward|conf\/all\/forwarding))/;

const FORWARD_NAMES = new Set([IP_FORWARD, "net.ipv4.conf.all.forwarding"]);

/**
 * Everything in the manifest that sets ip_forward to 1 at pod creation, then `extra`: the tunnel
 * kind's own switches (`KindView.extraSetters`, e.g. the OpenVPN chart's value).
 */
export function forwardingSetters(
  workload: KubeObject | undefined,
  extra: readonly ForwardingSetter[] = [],
): ForwardingSetter[] {
  const out: ForwardingSetter[] = [];
  if (workload) {
    const spec = podSpecPath(workload.kind);
    const inits = at(workload.raw, [...spec, "initContainers"]);
    if (Array.isArray(inits)) {
      inits.forEach((c, i) => {
        const argv = [
          ...(Array.isArray(at(c, ["command"])) ? (at(c, ["command"]) as unknown[]) : []),
          ...(Array.isArray(at(c, ["args"])) ? (at(c, ["args"]) as unknown[]) : []),
        ].map(String);
        const line = argv.join(" ");
        if (WRITES_FORWARD.test(line)) {
          out.push({
            kind: "init-container",
            value: `${String(at(c, ["name"]) ?? `#${i}`)}: ${line}`,
            source: workload.locate([...spec, "initContainers", i]) ?? workload.source,
          });
        }
      });
    }
    const sysctls = at(workload.raw, [...spec, "securityContext", "sysctls"]);
    if (Array.isArray(sysctls)) {
      sysctls.forEach((s, i) => {
        const name = String(at(s, ["name"]) ?? "").replaceAll("/", ".");
        if (FORWARD_NAMES.has(name) && String(at(s, ["value"])) === "1") {
          out.push({
            kind: "pod-sysctls",
            value: `${name}=1`,
            source: workload.locate([...spec, "securityContext", "sysctls", i]) ?? workload.source,
          });
        }
      });
    }
  }
  out.push(...extra);
  return out;
}
