/**
 * @module lab/scenarios/filter — a filter REJECT before the CNI's accept rules: CentOS's default
 * `-A FORWARD -j REJECT --reject-with icmp-host-prohibited` sits above Flannel's FLANNEL-FWD jump,
 * so a pod's connection to another host is refused ("No route to host"); `--fixed` leaves the
 * distribution's FORWARD rule out and the same connection goes through.
 */
import { z } from "zod";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import {
  buildServiceLab,
  type ProbeTarget,
  probeServiceLab,
  SVC_LISTEN_PORT,
  SVC_PEER_IP,
  stopServiceLab,
} from "./service-lab.ts";
import { serviceRestoreText } from "./service-rules.ts";
import { boolText, isTrue } from "./snat-replica.ts";

export const FilterOptions = z.object({ fixed: boolText.optional() }).strict();
export type FilterOptions = z.output<typeof FilterOptions>;

/** What the scenario probes from the client pod: the peer host, forwarded by the node. */
export const FILTER_TARGETS: readonly ProbeTarget[] = [
  { ip: SVC_PEER_IP, port: SVC_LISTEN_PORT, label: "peer host (forwarded)" },
];

/** The node's rules: kube-proxy's, CentOS's INPUT and (unless fixed) FORWARD REJECT, Flannel's. */
export const filterRules = (fixed: boolean): string =>
  serviceRestoreText({ centosInput: true, centosForward: !fixed, flannel: true });

async function run(ctx: ScenarioContext, opts: FilterOptions): Promise<ScenarioOutcome> {
  const fixed = isTrue(opts.fixed);
  ctx.log(`building filter replica ${ctx.lab.id}${fixed ? " (fixed)" : ""}`);
  const l = await buildServiceLab(ctx.lab, filterRules(fixed));
  try {
    const { files, summary } = await probeServiceLab(l, FILTER_TARGETS, ctx.outDir);
    return { files, summary };
  } finally {
    if (ctx.outDir !== undefined) await stopServiceLab(l);
  }
}

export const scenario: Scenario<FilterOptions> = {
  name: "filter",
  description:
    "a distribution's FORWARD REJECT (CentOS icmp-host-prohibited) before Flannel's accept rules; --fixed removes it",
  options: FilterOptions,
  run,
};
