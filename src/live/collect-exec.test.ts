import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import {
  type ExecAnswer,
  kubeconfigFor,
  type Obj,
  startFakeApi,
} from "../../test/k8s-api/server.ts";
import {
  emulateScript,
  NODES,
  smallCluster,
  smallClusterExec,
} from "../../test/k8s-api/small-cluster.ts";
import { openCluster } from "../k8s/cluster.ts";
import { collectSnapshot } from "./collect.ts";
import { memoryWriter } from "./collect-writer.ts";

const scratch = mkdtempSync(join(tmpdir(), "podpath-exec-limit-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
const VPN = { namespace: "vpn", name: "openvpn-6f7d8c9b5-x2x7p" };
const LIMIT = 64 * 1024;
/** Far past the limit: 3 MiB of rules, sent in the kubelet's 32 KiB frames. */
const HUGE = Buffer.from("-A KUBE-SVC-X -j KUBE-SEP-X\n".repeat(110_000));

/** The small cluster, except that `iptables-save` prints HUGE (in pods and collectors alike). */
function hugeIptables(pod: Obj, argv: readonly string[]): ExecAnswer {
  const framed = emulateScript(argv, (a) => hugeIptables(pod, a));
  if (framed) return framed;
  if (argv.join(" ") === "iptables-save") return { stdout: HUGE };
  return smallClusterExec(pod, argv);
}

async function collectWith(
  exec: (pod: Obj, argv: readonly string[]) => ExecAnswer,
  options: Parameters<typeof collectSnapshot>[2],
) {
  const api = await startFakeApi(smallCluster(), { gkeCrds: true, exec, podStartMs: 5 });
  try {
    const kc = join(scratch, `kc-${Math.random().toString(36).slice(2)}`);
    writeFileSync(kc, kubeconfigFor(api.url, { token: "t" }));
    const source = await openCluster({ kubeconfig: kc, env: {}, allowPlaintextCredentials: true });
    const w = memoryWriter();
    const report = await collectSnapshot(source, w, options);
    return { report, files: w.files, source };
  } finally {
    await api.close();
  }
}

describe("exec output past the limit", () => {
  it("a pod's command: reported with the command and the limit, no file written, the others kept", async () => {
    const { report, files } = await collectWith(hugeIptables, {
      pods: [VPN],
      execOutputLimitBytes: LIMIT,
    });
    const dir = `pods/${VPN.namespace}/${VPN.name}`;
    assert.equal(files.has(`${dir}/iptables-save.txt`), false, "a cut dump is never written");
    assert.ok(files.has(`${dir}/sysctl.txt`));
    const cut = report.failures.filter((f) => f.what === "iptables-save");
    assert.equal(cut.length, 1, JSON.stringify(report.failures));
    assert.equal(cut[0]!.subject, `pod/${VPN.namespace}/${VPN.name}`);
    assert.match(cut[0]!.why, /printed more than 64 KiB on stdout \(podpath's limit per stream\)/);
  });

  it("the node script: the section it cut and the ones after it are reported, those before kept", async () => {
    const { report, files } = await collectWith(hugeIptables, {
      nodeState: true,
      nodes: NODES[0]!,
      pollMs: 5,
      execOutputLimitBytes: LIMIT,
    });
    const node = `node/${NODES[0]}`;
    const failures = report.failures.filter((f) => f.subject === node);
    const ipt = failures.find((f) => f.what === "iptables-save");
    assert.ok(ipt, JSON.stringify(report.failures));
    assert.match(ipt.why, /more than 64 KiB on stdout/);
    assert.equal(files.has(`nodes/${NODES[0]}/iptables-save.txt`), false);
    for (const f of failures.filter((x) => x.what !== "iptables-save"))
      assert.match(f.why, /^not reached: the node script's output passed the limit/);
    assert.deepEqual(report.collectorsCreated.length, report.collectorsRemoved.length);
  });

  it("under the default limit (64 MiB) the same output is collected whole", async () => {
    const { report, files } = await collectWith(hugeIptables, { pods: [VPN] });
    assert.deepEqual(report.failures, []);
    const dir = `pods/${VPN.namespace}/${VPN.name}`;
    assert.equal(files.get(`${dir}/iptables-save.txt`)?.length, HUGE.length);
  });

  it("the cluster's exec keeps the first bytes up to the limit and says which stream passed it", async () => {
    const api = await startFakeApi(smallCluster(), {
      exec: () => ({ stdout: "ok\n", stderr: "e".repeat(200_000) }),
    });
    try {
      const kc = join(scratch, "kc-direct");
      writeFileSync(kc, kubeconfigFor(api.url, { token: "t" }));
      const src = await openCluster({ kubeconfig: kc, env: {}, allowPlaintextCredentials: true });
      const r = await src.exec(VPN.namespace, VPN.name, ["cat", "/x"], {
        timeoutMs: 60_000,
        maxOutputBytes: 1000,
      });
      assert.deepEqual(r.truncated, { stream: "stderr", limitBytes: 1000 });
      assert.equal(r.stderr, "e".repeat(1000));
      assert.equal(r.code, undefined);
    } finally {
      await api.close();
    }
  });
});
