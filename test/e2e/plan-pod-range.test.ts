/**
 * End to end: `plan masquerade --strategy narrow` on a GKE-shaped dump (the embedded example's
 * node, whose Node shows only 10.4.0.0/24, with kube-proxy's rules for --cluster-cidr=10.4.0.0/14
 * in its nat table and a pod on another node at 10.4.1.7) keeps the whole cluster range exempt,
 * cited to the iptables-save line it was read from; without the rules, it keeps the other node's
 * pod and warns. Needs `npm run build` first (npm test does it).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const EXAMPLE = join(ROOT, "examples/snat-exception-list");

function podpath(...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const tmp = mkdtempSync(join(tmpdir(), "pp-e2e-pod-range-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** kube-proxy's nat rules with --cluster-cidr=10.4.0.0/14 (pkg/proxy/iptables/proxier.go forms). */
const KUBE_PROXY_NAT = [
  ":KUBE-MARK-MASQ - [0:0]",
  ":KUBE-POSTROUTING - [0:0]",
  ":KUBE-SERVICES - [0:0]",
  ":KUBE-SVC-NPX46M4PTMTKRN6Y - [0:0]",
  '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
  "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000",
  "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
  "-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000",
  '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
  '-A KUBE-SERVICES -d 34.118.224.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-SVC-NPX46M4PTMTKRN6Y',
  '-A KUBE-SVC-NPX46M4PTMTKRN6Y ! -s 10.4.0.0/14 -d 34.118.224.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-MARK-MASQ',
];

const OTHER_POD = `---
apiVersion: v1
kind: Pod
metadata: {name: reports-0, namespace: default}
spec:
  nodeName: gke-lab-default-1
  containers: [{name: app, image: app}]
status:
  phase: Running
  podIP: 10.4.1.7
  podIPs:
    - ip: 10.4.1.7
`;

/** The example with a pod on another node, and kube-proxy's rules when `rules` is true. */
function gkeDump(name: string, rules: boolean): { dir: string; save: string } {
  const dir = join(tmp, name);
  cpSync(EXAMPLE, dir, { recursive: true });
  writeFileSync(join(dir, "cluster/other-pod.yaml"), OTHER_POD);
  const save = join(dir, "nodes/gke-lab-default-0/iptables-save.txt");
  if (rules) {
    const lines = readFileSync(save, "utf8").split("\n");
    const at = lines.indexOf(":IP-MASQ-AGENT - [0:0]") + 1;
    lines.splice(at, 0, ...KUBE_PROXY_NAT);
    writeFileSync(save, lines.join("\n"));
  }
  return { dir, save };
}

interface Plan {
  podRanges: string[];
  narrow: { newList: { cidr: string; why: string }[] };
  diagnostics: { code: string; message: string }[];
}

describe("plan masquerade: the pod range from kube-proxy's rules and the pods", () => {
  it("keeps 10.4.0.0/14 (kube-proxy's ! -s rule), cited to its iptables-save line", () => {
    const { dir, save } = gkeDump("rules", true);
    const r = podpath("plan", "masquerade", dir, "--strategy", "narrow", "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout) as Plan;
    assert.ok(plan.podRanges.includes("10.4.0.0/14"), plan.podRanges.join(", "));
    const kept = plan.narrow.newList.find((n) => n.cidr === "10.4.0.0/14");
    assert.ok(kept, plan.narrow.newList.map((n) => n.cidr).join(", "));
    const m = /nodes\/gke-lab-default-0\/iptables-save\.txt:(\d+)/.exec(kept.why);
    assert.ok(m, kept.why);
    const line = readFileSync(save, "utf8").split("\n")[Number(m[1]) - 1] ?? "";
    assert.match(line, /^-A KUBE-SVC-\S+ ! -s 10\.4\.0\.0\/14 .*-j KUBE-MARK-MASQ$/);
    assert.ok(!plan.diagnostics.some((d) => d.code === "PLAN_POD_RANGE_FROM_NODES"));
  });

  it("without the rules: the other node's pod stays exempt, and the plan warns and cites it", () => {
    const { dir } = gkeDump("no-rules", false);
    const r = podpath("plan", "masquerade", dir, "--strategy", "narrow", "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout) as Plan;
    assert.ok(plan.podRanges.includes("10.4.1.7/32"), plan.podRanges.join(", "));
    const bigger = plan.diagnostics.find((d) => d.code === "PLAN_POD_RANGE_BIGGER");
    assert.match(
      bigger?.message ?? "",
      /default\/reports-0 10\.4\.1\.7 at cluster\/other-pod\.yaml:\d+/,
    );
    assert.ok(plan.diagnostics.some((d) => d.code === "PLAN_POD_RANGE_FROM_NODES"));
  });
});
