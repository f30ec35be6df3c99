import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { memoryIo } from "../../cli/io.ts";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { forwardingSetters } from "./durable.ts";
import { resolveVpn } from "./input.ts";
import { planVpn, type VpnPlan } from "./plan.ts";
import { scriptNatRules } from "./plan-nat.ts";
import { vpnInputFromSnapshot } from "./snapshot-input.ts";

const here = (p: string) => new URL(p, import.meta.url).pathname;
const LAB = here("./testdata/vpn-lab/");
const SNAPSHOTS = {
  "lab fixed": join(LAB, "fixed"),
  "examples/vpn-forwarding-fixed": here("../../../examples/vpn-forwarding-fixed/"),
  "rendered chart": here("./testdata/chart-rendered/"),
};

function planOf(dir: string): VpnPlan {
  const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(dir)));
  return planVpn(resolveVpn(input)!, input.objects);
}

const tmp = mkdtempSync(join(tmpdir(), "podpath-plan-vpn-idem-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

async function cli(snapshot: string, opts: Record<string, unknown>) {
  const { run } = await import("../../cli/commands/plan-vpn.ts");
  const io = memoryIo();
  const code = await run([snapshot], { strategy: "all", output: "json", ...opts }, io);
  return { code, doc: JSON.parse(io.stdout()) as VpnPlan, stderr: io.stderr() };
}

describe("plan vpn on an already-fixed snapshot proposes nothing for forwarding", () => {
  for (const [name, dir] of Object.entries(SNAPSHOTS)) {
    it(name, () => {
      const plan = planOf(dir);
      assert.ok(plan.alreadySet.length > 0, "the setter is recognised");
      for (const s of plan.strategies) {
        assert.equal(s.applicable, false, s.strategy);
        assert.equal(s.patch, undefined);
        assert.equal(s.helmValues, undefined);
        assert.deepEqual(s.commands, []);
        assert.match(s.whyNot ?? "", /already set when the pod starts/);
      }
      assert.equal(plan.returnPath.needed, false, plan.returnPath.explanation);
    });
  }

  it("the rendered chart: both the chart's init container and the value, and the MASQUERADE of configure.sh, cited", () => {
    const plan = planOf(SNAPSHOTS["rendered chart"]);
    assert.deepEqual(plan.alreadySet.map((a) => a.kind).sort(), ["chart-value", "init-container"]);
    const at = plan.returnPath.evidence[1]!;
    assert.deepEqual([at.file, at.line], ["cluster/openvpn.yaml", 24]);
    assert.equal(
      at.text?.trim(),
      "iptables -t nat -A POSTROUTING -s 10.240.0.0/255.255.0.0 -o eth0 -j MASQUERADE",
    );
  });
});

describe("what sets forwarding at pod start", () => {
  const deployment = (init: unknown) =>
    readKubeObjects(
      JSON.stringify({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "v" },
        spec: { template: { spec: { initContainers: [init], containers: [] } } },
      }),
      "d.json",
    ).value[0]!;
  for (const [form, init, sets] of [
    [
      "sysctl -w in sh -c",
      { name: "a", image: "alpine", command: ["sh", "-c", "sysctl -w net.ipv4.ip_forward=1"] },
      true,
    ],
    [
      "echo 1 >",
      { name: "a", image: "x", command: ["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"] },
      true,
    ],
    [
      'echo "1" >',
      { name: "a", image: "x", args: ['echo "1" > /proc/sys/net/ipv4/ip_forward'] },
      true,
    ],
    [
      "sysctl -w …=0",
      { name: "a", image: "x", command: ["sysctl", "-w", "net.ipv4.ip_forward=0"] },
      false,
    ],
    [
      "reads only",
      { name: "a", image: "x", command: ["cat", "/proc/sys/net/ipv4/ip_forward"] },
      false,
    ],
  ] as const) {
    it(`${form}: ${sets ? "sets" : "does not set"} it`, () => {
      assert.equal(forwardingSetters(deployment(init)).length, sets ? 1 : 0);
    });
  }
});

describe("NAT rules in ConfigMap scripts", () => {
  const cm = (script: string) =>
    readKubeObjects(
      JSON.stringify({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "s", namespace: "vpn" },
        data: { "run.sh": script },
      }),
      "cm.json",
    ).value;
  it("reads MASQUERADE and SNAT with CIDR or dotted masks; skips `! -s`, comments, templates and the filter table", () => {
    const rules = scriptNatRules(
      cm(
        [
          "iptables -t nat -A POSTROUTING -s 10.8.0.0/24 -o eth0 -j MASQUERADE",
          "iptables -t nat -I POSTROUTING -s 10.9.0.0/255.255.255.0 -j SNAT --to-source 10.244.1.10",
          "# iptables -t nat -A POSTROUTING -s 10.7.0.0/24 -j MASQUERADE",
          "iptables -t nat -A POSTROUTING ! -s 10.6.0.0/24 -j MASQUERADE",
          "iptables -t nat -A POSTROUTING -s {{ .Values.net }}/{{ .Values.mask }} -j MASQUERADE",
          "iptables -A FORWARD -s 10.5.0.0/24 -j ACCEPT",
        ].join("\n"),
      ),
      "vpn",
    );
    assert.deepEqual(
      rules.map((r) => [r.target, r.source && `${r.source.start}/${r.source.prefix}`]),
      [
        ["MASQUERADE", `${0x0a080000n}/24`],
        ["SNAT", `${0x0a090000n}/24`],
      ],
    );
    assert.equal(
      scriptNatRules(cm("iptables -t nat -A POSTROUTING -s 10.8.0.0/24 -j MASQUERADE"), "other")
        .length,
      0,
    );
  });
});

describe("plan vpn --write and --pod", () => {
  it("--pod is optional when the snapshot has one VPN pod", async () => {
    const { code, doc } = await cli(join(LAB, "baseline-ns"), {});
    assert.equal(code, 0);
    assert.equal(doc.pod, "vpn/vpn-openvpn-6d9c7b5f4-x2x7k");
  });

  for (const lab of ["baseline-ns", "forwarding-off", "set-by-hand", "no-masquerade"]) {
    it(`${lab}: writes every file its apply lines name`, async () => {
      const dir = join(tmp, lab);
      const { code, doc } = await cli(join(LAB, lab), { write: dir });
      assert.equal(code, 0);
      const written = readdirSync(dir);
      assert.ok(written.length > 0);
      const named = doc.strategies
        .flatMap((s) => s.commands)
        .flatMap((c) => c.split(/\s+/).filter((w) => w.endsWith(".yaml")));
      assert.ok(named.length > 0, "the apply lines name files");
      for (const f of named) assert.ok(existsSync(f), `${f} is written`);
      for (const f of named) assert.ok(f.startsWith(`${dir}/`), `${f} is in --write`);
    });
  }

  it("refuses a non-empty --write folder and writes nothing there", async () => {
    const dir = join(tmp, "busy");
    mkdirSync(dir);
    writeFileSync(join(dir, "mine.txt"), "keep");
    await assert.rejects(cli(join(LAB, "baseline-ns"), { write: dir }), {
      code: "ERR_USAGE",
      message: /not empty/,
    });
    assert.deepEqual(readdirSync(dir), ["mine.txt"]);
  });

  it("checks the new pods by the Deployment's selector, never by the old pod's pod-template-hash", async () => {
    const { doc } = await cli(join(LAB, "forwarding-off"), {});
    assert.ok(
      doc.verify.includes("kubectl -n vpn rollout status deployment/vpn-openvpn"),
      doc.verify.join("\n"),
    );
    assert.ok(
      doc.verify.some((v) => v.startsWith("kubectl -n vpn get pods -l app=openvpn,release=vpn ")),
    );
    assert.ok(!doc.verify.some((v) => v.includes("pod-template-hash")));
    for (const c of [...doc.verify, ...doc.strategies.flatMap((s) => s.commands)])
      assert.ok(!/\bpod\/vpn-openvpn\b|exec -n vpn vpn-openvpn /.test(c), c);
  });
});
