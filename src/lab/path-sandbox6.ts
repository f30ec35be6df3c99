/**
 * @module lab/path-sandbox6 — asks the kernel where an IPv6 packet ends on a node: the sandbox of
 * lab/path-sandbox carried over to IPv6 (lab/path-sandbox-net in IPv6, with lab/path-gen6's
 * addresses: a `pod` namespace behind pod0, the `node` with the rules, `ip -6 rule` entries and
 * routes under test, two far hosts behind eth0 and eth1). For each flow: delivered (a counting
 * rule in ip6tables' security table, after filter INPUT), forwarded out of which interface with
 * which source and destination, rejected with which ICMPv6 destination-unreachable code or a TCP
 * reset, or silent (lab/path-verdict). A run is complete when sentinel packets sent after the
 * flows are seen at every capture point (lab/path-traffic). Kernel-only rules are marked and left
 * out of the snapshot (lab/path-observers). An explicit I/O module.
 */
import type { Lab } from "./netns.ts";
import { mustExec as must } from "./netns.ts";
import type { PathCase, PathFlow } from "./path-gen.ts";
import { ipRuleWithoutObservers, readDeliveries, withoutObservers } from "./path-observers.ts";
import { createSandboxNet, loadCase, sandboxIpBatch } from "./path-sandbox-net.ts";
import { clearCaptures, sendFlows, settle } from "./path-traffic.ts";
import { type KernelPathVerdict, pathVerdictOf } from "./path-verdict.ts";

export { PATH_NET6 } from "./path-gen6.ts";

/** The node's IPv6 state as a snapshot holds it, beside its (untouched) IPv4 state. */
export interface NodeFiles6 {
  readonly ip6tablesSave: string;
  readonly ip6Rule: string;
  readonly ip6Route: string;
  readonly ipAddr: string;
  readonly iptablesSave: string;
  readonly ipRule: string;
  readonly ipRoute: string;
}

export interface PathSandbox6 {
  readonly lab: Lab;
  /** Loads an IPv6 case (lab/path-gen6): ip6tables rules with the observers, rules, routes. */
  load(c: PathCase, flows: readonly PathFlow[]): Promise<string | undefined>;
  nodeFiles(): Promise<NodeFiles6>;
  observe(flows: readonly PathFlow[]): Promise<KernelPathVerdict[]>;
  destroy(): Promise<void>;
}

export async function createPathSandbox6(): Promise<PathSandbox6> {
  const sb = await createSandboxNet(6);
  const { lab, node, caps } = sb;
  let undo: string[] = [];
  return {
    lab,
    async load(c, flows) {
      await sandboxIpBatch(6, node, undo);
      undo = [];
      return loadCase(sb, c, flows, undo);
    },
    async nodeFiles() {
      const [save6, rule6, route6, addr, save, rule, route] = await Promise.all([
        must(node, ["ip6tables-save"]),
        must(node, ["ip", "-6", "rule"]),
        must(node, ["ip", "-6", "route", "show", "table", "all"]),
        must(node, ["ip", "addr"]),
        must(node, ["iptables-save"]),
        must(node, ["ip", "rule"]),
        must(node, ["ip", "route", "show", "table", "all"]),
      ]);
      return {
        ip6tablesSave: withoutObservers(save6),
        ip6Rule: ipRuleWithoutObservers(rule6),
        ip6Route: route6,
        ipAddr: addr,
        iptablesSave: save,
        ipRule: rule,
        ipRoute: route,
      };
    },
    async observe(flows) {
      await node.exec(["conntrack", "-F", "-f", "ipv6"]);
      clearCaptures(sb);
      await sendFlows(sb, flows);
      await settle(sb);
      const hits = await readDeliveries(node, 6);
      return flows.map((f, i) => pathVerdictOf(f, (hits[i] ?? 0) > 0, caps, 6));
    },
    destroy: () => lab.destroy(),
  };
}
