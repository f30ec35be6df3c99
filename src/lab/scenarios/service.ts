/**
 * @module lab/scenarios/service — Services on a kube-proxy (iptables mode) node: a ClusterIP
 * DNATed to a pod (connects), the `default/kubernetes` ClusterIP DNATed to the node itself whose
 * INPUT ends in CentOS's `REJECT --reject-with icmp-host-prohibited` (refused: "No route to host"),
 * and a Service without endpoints (kube-proxy's filter REJECT: "Connection refused"). The rules
 * are kube-proxy's shape (service-rules.ts); the probe records the ICMP error the kernel sent.
 */
import { z } from "zod";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import {
  buildServiceLab,
  type ProbeTarget,
  probeServiceLab,
  stopServiceLab,
} from "./service-lab.ts";
import { SERVICES, serviceRestoreText } from "./service-rules.ts";

export const ServiceOptions = z.object({}).strict();
export type ServiceOptions = z.output<typeof ServiceOptions>;

/** What the scenario probes from the client pod, in order. */
export const SERVICE_TARGETS: readonly ProbeTarget[] = [
  { ip: SERVICES.web.ip, port: SERVICES.web.port, label: "web ClusterIP (endpoint pod)" },
  {
    ip: SERVICES.apiserver.ip,
    port: SERVICES.apiserver.port,
    label: "kubernetes ClusterIP (the node itself)",
  },
  { ip: SERVICES.orders.ip, port: SERVICES.orders.port, label: "orders ClusterIP (no endpoints)" },
];

/** The node's rules: kube-proxy's, CentOS's INPUT, Flannel's FORWARD accepts. */
export const serviceRules = (): string =>
  serviceRestoreText({ centosInput: true, centosForward: false, flannel: true });

async function run(ctx: ScenarioContext, _opts: ServiceOptions): Promise<ScenarioOutcome> {
  ctx.log(`building service replica ${ctx.lab.id}`);
  const l = await buildServiceLab(ctx.lab, serviceRules());
  try {
    const { files, summary } = await probeServiceLab(l, SERVICE_TARGETS, ctx.outDir);
    return { files, summary };
  } finally {
    if (ctx.outDir !== undefined) await stopServiceLab(l);
  }
}

export const scenario: Scenario<ServiceOptions> = {
  name: "service",
  description:
    "kube-proxy Services: a ClusterIP to a pod, one to the node itself behind CentOS's INPUT REJECT, one without endpoints",
  options: ServiceOptions,
  run,
};
