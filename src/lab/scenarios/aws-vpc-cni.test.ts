/**
 * The aws-vpc-cni replica: its options and objects (pure), and on the real kernel that the node's
 * rules are the ones the plugin writes (iptables-save of the namespace, line for line, in the
 * plugin's order), the pod's packets reach on-prem with the pod address and get no reply, and
 * `diagnose` on the snapshot gives the plugin's finding with its rule cited.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parse } from "yaml";
import { readAwsNodeIntent } from "../../agents/aws-vpc-cni/daemonset.ts";
import { savedOrder } from "../../agents/aws-vpc-cni/rules.ts";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { kernelSkip } from "../kernel-guard.ts";
import { createLab } from "../netns.ts";
import {
  AWS_NODE_NAME,
  AwsVpcCniOptions,
  awsClusterObjects,
  planAwsReplica,
  remoteSites,
  scenario,
} from "./aws-vpc-cni.ts";

describe("aws-vpc-cni replica plan", () => {
  it("defaults: the on-prem prefix excluded from SNAT, only the primary VPC CIDR routed back", () => {
    const plan = planAwsReplica(AwsVpcCniOptions.parse({}));
    assert.deepEqual(plan.settings.excludeSnatCidrs, ["10.20.0.0/16"]);
    assert.deepEqual(plan.routesBack, ["192.168.0.0/16"]);
    assert.ok(plan.rules.some((r) => r.kind === "exclusion-return"));
    assert.equal(AwsVpcCniOptions.safeParse({ bogus: "1" }).success, false);
  });
  it("the DaemonSet it writes reads back as the settings it installed", () => {
    const plan = planAwsReplica(
      AwsVpcCniOptions.parse({ "exclude-snat-cidrs": "10.20.0.0/16, 10.30.0.0/16" }),
    );
    const objs = awsClusterObjects(plan);
    const intent = readAwsNodeIntent(readKubeObjects(objs.awsNode, "cluster/aws-node.yaml").value);
    assert.deepEqual(intent?.settings, plan.settings);
    const node = parse(objs.nodes) as { items: { spec: Record<string, unknown> }[] };
    assert.equal(node.items[0]?.spec["podCIDR"], undefined, "EKS nodes carry no podCIDR");
    assert.equal(remoteSites(plan).length, 2);
  });
});

const skip = kernelSkip();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("lab aws-vpc-cni on the real kernel", { skip, concurrency: false }, () => {
  it("installs the plugin's rules as it writes them; diagnose names the plugin and its rule", async () => {
    const opts = AwsVpcCniOptions.parse({});
    const plan = planAwsReplica(opts);
    const lab = await createLab({ prefix: "ppe" });
    const dir = mkdtempSync(join(tmpdir(), "podpath-aws-test-"));
    dirs.push(dir);
    let summary: readonly string[];
    try {
      summary = (await scenario.run({ lab, outDir: dir, log: () => {} }, opts)).summary;
    } finally {
      await lab.destroy();
    }
    assert.match(
      summary.join("\n"),
      /node ping 10\.20\.30\.40 answers, pod ping silent, pod tcp\/5432 on-prem silent, pod tcp\/5432 VPC host answers/,
    );
    const dumpRel = `nodes/${AWS_NODE_NAME}/iptables-save.txt`;
    const saved = readFileSync(join(dir, dumpRel), "utf8").split("\n");
    for (const [key, lines] of savedOrder(plan.rules)) {
      const chain = key.split("/")[1]!;
      const table = key.split("/")[0]!;
      const start = saved.indexOf(`*${table}`);
      const end = saved.indexOf("COMMIT", start);
      const inKernel = saved
        .slice(start, end)
        .filter((l) => l.startsWith(`-A ${chain} `) && /AWS/.test(l));
      assert.deepEqual(inKernel, lines, key);
    }
    const a = await diagnose(loadSnapshot(openSnapshot(dir)), {});
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.equal(f.evidence[0]?.file, dumpRel);
    assert.match(
      f.evidence[0]?.text ?? "",
      /^-A AWS-SNAT-CHAIN-0 -d 10\.20\.0\.0\/16 .*"AWS SNAT CHAIN EXCLUSION" -j RETURN$/,
    );
    assert.doesNotMatch(JSON.stringify(a.findings), /ip-masq-agent|GKE/);
    assert.ok(a.findings.some((x) => x.id === "masq/wire-pod-source" && x.severity === "error"));
  });
});
