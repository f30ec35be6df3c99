/**
 * @module test/k8s-api/owner-clusters — fake clusters made from the masquerade case's snapshots of
 * other owners (src/cases/masquerade/fixtures/): their objects are what the fake API server holds,
 * and their node and pod files are what the read commands print there (the Calico files were made
 * by the real tools on the lab replica; the Cilium ones are real-shaped, see the fixture's README).
 * A command whose file the snapshot lacks is not installed in that image or on that node.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import type { ExecAnswer, Obj } from "./server.ts";
import { emulateScript } from "./small-cluster.ts";

const FIXTURES = join(import.meta.dirname, "../../src/cases/masquerade/fixtures");
export const CALICO_SNAPSHOT = join(FIXTURES, "calico/before");
export const CILIUM_SNAPSHOT = join(FIXTURES, "cilium/bpf-ip-masq-agent");

/** The file each read command's output is kept in (as the snapshot layout names them). */
const FILE_OF: Record<string, string> = {
  "iptables-save": "iptables-save.txt",
  "ip6tables-save": "ip6tables-save.txt",
  "ip route": "ip-route.txt",
  "ip route show table all": "ip-route.txt",
  "ip rule": "ip-rule.txt",
  "ip -6 route show table all": "ip6-route.txt",
  "ip -6 rule": "ip6-rule.txt",
  "ip addr": "ip-addr.txt",
  "conntrack -L": "conntrack.txt",
  "ipset save": "ipset.txt",
  "nft list ruleset": "nft-ruleset.txt",
  "cilium-dbg status --verbose": "cilium-status.txt",
  "cilium-dbg bpf ipmasq list": "cilium-bpf-ipmasq.txt",
};

/**
 * What a command the snapshot has no file for prints: the fixtures were made before podpath read
 * `ip rule` and the IPv6 routes, so on a node `ip rule` prints the kernel's three default rules
 * (the replicas route by their main table) and `ip -6` answers as a kernel without IPv6; any
 * other command is not installed.
 */
function missing(onNode: boolean, cmd: string): ExecAnswer {
  if (onNode && cmd === "ip rule")
    return {
      stdout:
        "0:\tfrom all lookup local\n32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n",
    };
  if (onNode && cmd.startsWith("ip -6 "))
    return {
      stderr: "RTNETLINK answers: Address family not supported by protocol\nDump terminated\n",
      code: 2,
    };
  return { notFound: true };
}

/** Every object of the snapshot's cluster/*.yaml (Lists or single objects). */
export function snapshotObjects(root: string): Obj[] {
  const dir = join(root, "cluster");
  const out: Obj[] = [];
  for (const f of readdirSync(dir).sort()) {
    if (!/\.ya?ml$/.test(f)) continue;
    const doc = parse(readFileSync(join(dir, f), "utf8")) as Obj & { items?: Obj[] };
    out.push(...(doc.kind === "List" ? (doc.items ?? []) : [doc]));
  }
  return out;
}

export interface FixtureExecOptions {
  /** The Cilium image predates cilium-dbg (before 1.15): only `cilium` exists. */
  readonly legacyCilium?: boolean;
}

/** Answers the read commands from the snapshot's files: nodes/<node>/ for collectors and agents. */
export function fixtureExec(root: string, o: FixtureExecOptions = {}) {
  const answer = (pod: Obj, argv: readonly string[]): ExecAnswer => {
    const framed = emulateScript(argv, (a) => answer(pod, a));
    if (framed) return framed;
    let cmd = argv.join(" ");
    const isAgent = pod.metadata.labels?.["k8s-app"] === "cilium";
    if (isAgent) {
      if (o.legacyCilium && argv[0] === "cilium-dbg") return { notFound: true };
      if (o.legacyCilium && argv[0] === "cilium") cmd = `cilium-dbg ${argv.slice(1).join(" ")}`;
      if (!o.legacyCilium && argv[0] === "cilium") return { notFound: true };
    }
    const onNode = pod.metadata.labels?.["app.kubernetes.io/managed-by"] === "podpath" || isAgent;
    const node = String((pod["spec"] as { nodeName?: string }).nodeName ?? "");
    const dir = onNode
      ? join(root, "nodes", node)
      : join(root, "pods", pod.metadata.namespace ?? "", pod.metadata.name);
    const file = argv[0] === "sysctl" ? "sysctl.txt" : FILE_OF[cmd];
    if (file === undefined || !existsSync(join(dir, file))) return missing(onNode, cmd);
    return { stdout: readFileSync(join(dir, file)) };
  };
  return answer;
}
