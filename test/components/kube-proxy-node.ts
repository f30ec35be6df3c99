/**
 * @module test/components/kube-proxy-node — the node the kube-proxy component tests run the real
 * kube-proxy on: a lab namespace with its own `eth0` (whose address kube-proxy reads), and
 * kube-proxy started in it with flags that keep it off the machine-wide conntrack settings.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import type { Lab, Namespace } from "../../src/lab/netns.ts";
import { componentPath } from "./component-guard.ts";

/** Links `ns`'s `eth0` to a new namespace "net" (nothing is sent over it), `ip`/24 on it, up. */
export async function addNodeUplink(lab: Lab, ns: Namespace, ip: string): Promise<void> {
  await lab.link(ns, "eth0", await lab.addNamespace("net"), "eth0");
  for (const argv of [
    ["ip", "addr", "add", `${ip}/24`, "dev", "eth0"],
    ["ip", "link", "set", "eth0", "up"],
  ]) {
    const r = await ns.exec(argv);
    assert.equal(r.code, 0, r.stderr);
  }
}

export interface KubeProxyOptions {
  readonly kubeconfig: string;
  readonly mode: "iptables" | "nftables";
  readonly hostname: string;
  /** The node's address (--bind-address), as addNodeUplink gave it. */
  readonly nodeIp: string;
  readonly clusterCidr: string;
}

/** Starts kube-proxy in `ns`; `onLog` gets the last 30,000 characters of its log as they grow. */
export function spawnKubeProxy(
  ns: Namespace,
  o: KubeProxyOptions,
  onLog: (tail: string) => void,
): ChildProcess {
  const proxy = ns.spawn([
    componentPath("kube-proxy"),
    `--kubeconfig=${o.kubeconfig}`,
    `--proxy-mode=${o.mode}`,
    `--hostname-override=${o.hostname}`,
    `--bind-address=${o.nodeIp}`,
    `--cluster-cidr=${o.clusterCidr}`,
    // conntrack limits are the whole machine's: leave them alone
    "--conntrack-max-per-core=0",
    "--conntrack-min=0",
    "--conntrack-tcp-timeout-established=0",
    "--conntrack-tcp-timeout-close-wait=0",
    "--v=2",
  ]);
  let log = "";
  proxy.stderr?.on("data", (d: Buffer) => {
    log = (log + d.toString()).slice(-30_000);
    onLog(log);
  });
  return proxy;
}
