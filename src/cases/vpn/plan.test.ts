import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { stringify } from "yaml";
import { readKubeletSysctlConfig } from "../../agents/pod-security/kubelet-config.ts";
import { memoryIo } from "../../cli/io.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { resolveVpn } from "./input.ts";
import {
  CHART_INIT_CONTAINER,
  INIT_CONTAINER,
  planFiles,
  planVpn,
  type StrategyPlan,
} from "./plan.ts";
import { vpnInputFromSnapshot } from "./snapshot-input.ts";

const lab = (v: string) => new URL(`./testdata/vpn-lab/${v}/`, import.meta.url).pathname;
function planFor(v: string, kubelet?: string) {
  const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(lab(v))));
  const ctx = resolveVpn(input)!;
  const kubeletConfig = kubelet
    ? readKubeletSysctlConfig(kubelet, "nodes/n/kubelet.yaml", "n").value
    : undefined;
  return { plan: planVpn(ctx, input.objects, kubeletConfig ? { kubeletConfig } : {}), ctx, input };
}
const by = (plan: { strategies: readonly StrategyPlan[] }, s: string) =>
  plan.strategies.find((x) => x.strategy === s)!;

const tmp = mkdtempSync(join(tmpdir(), "podpath-plan-vpn-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** Runs `podpath admission check FILE --level L -o json` in-process and returns its exit code. */
async function admissionCheck(manifest: Record<string, unknown>, level: string): Promise<number> {
  const file = join(tmp, `m-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, stringify(manifest, { aliasDuplicateObjects: false }));
  const { run } = await import("../../cli/commands/admission-check.ts");
  const io = memoryIo();
  return run([file], { level, version: "latest", output: "json", _command: "check" }, io);
}

describe("planVpn in a baseline namespace", () => {
  const { plan } = planFor("baseline-ns");

  it("predicts Pod Security's own messages for the privileged init container and the pod sysctl", () => {
    const init = by(plan, "init-container");
    assert.equal(init.admission?.allowed, "no");
    assert.match(
      init.admission!.messages[0]!,
      /violates PodSecurity "baseline:latest": .*privileged \(container "enable-ip-forward" must not set securityContext\.privileged=true\)/,
    );
    const sys = by(plan, "pod-sysctls");
    assert.equal(sys.admission?.allowed, "no");
    // the wording of ../shared/reference/openvpn/examples/expected-admission.md (B, enforce=baseline)
    assert.match(
      sys.admission!.messages[0]!,
      /non-default capabilities \(container "openvpn" must not include "NET_ADMIN" in securityContext\.capabilities\.add\), forbidden sysctls \(net\.ipv4\.ip_forward\)/,
    );
  });

  it("agrees with `podpath admission check` at level baseline: both patched manifests are denied", async () => {
    for (const s of ["init-container", "pod-sysctls"]) {
      assert.equal(
        await admissionCheck(by(plan, s).patched as Record<string, unknown>, "baseline"),
        1,
        s,
      );
    }
  });
});

describe("planVpn in a privileged namespace", () => {
  it("the init container is admitted, and admission check agrees", async () => {
    const { plan } = planFor("set-by-hand");
    const init = by(plan, "init-container");
    assert.equal(init.admission?.allowed, "yes");
    assert.equal(await admissionCheck(init.patched as Record<string, unknown>, "privileged"), 0);
  });

  it("the pod sysctl is unknown without a kubelet config, names the command that tells", () => {
    const { plan } = planFor("set-by-hand");
    const sys = by(plan, "pod-sysctls");
    assert.equal(sys.admission?.allowed, "unknown");
    assert.ok(sys.admission!.notes.some((n) => n.includes("/configz")));
  });

  it("the kubelet's allowedUnsafeSysctls decides the pod sysctl", () => {
    const allow =
      'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nallowedUnsafeSysctls: ["net.ipv4.*"]\n';
    const deny =
      'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nallowedUnsafeSysctls: ["kernel.msg*"]\n';
    assert.equal(by(planFor("set-by-hand", allow).plan, "pod-sysctls").admission?.allowed, "yes");
    const no = by(planFor("set-by-hand", deny).plan, "pod-sysctls").admission!;
    assert.equal(no.allowed, "no");
    assert.ok(
      no.messages.some(
        (m) =>
          m.includes("SysctlForbidden") &&
          m.includes('forbidden sysctl: "net.ipv4.ip_forward" not allowlisted'),
      ),
    );
  });
});

describe("planVpn with a kubelet config the kubelet refuses", () => {
  it("admits nothing, whatever the strategy, citing the refused item", () => {
    const refused =
      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nallowedUnsafeSysctls:\n  - net.ipv4.*\n  - vm.swappiness\n";
    const { plan } = planFor("set-by-hand", refused);
    for (const s of ["init-container", "pod-sysctls", "chart-value"]) {
      const a = by(plan, s).admission!;
      assert.equal(a.allowed, "no", s);
      assert.ok(
        a.messages.some(
          (m) => m.includes("nodes/n/kubelet.yaml:5: ") && m.includes("vm.swappiness"),
        ),
        a.messages.join("\n"),
      );
    }
  });
});

describe("planVpn patches", () => {
  const { plan, ctx } = planFor("set-by-hand");

  it("the strategic-merge patch adds exactly the init container; the patched manifest keeps the rest", () => {
    const init = by(plan, "init-container");
    const patch = init.patch as { spec: { template: { spec: { initContainers: unknown[] } } } };
    assert.deepEqual(patch.spec.template.spec.initContainers, [INIT_CONTAINER]);
    const patched = init.patched as { spec: { template: { spec: Record<string, unknown> } } };
    const original = ctx.workload!.raw as { spec: { template: { spec: Record<string, unknown> } } };
    const { initContainers, ...rest } = patched.spec.template.spec;
    assert.deepEqual(initContainers, [INIT_CONTAINER]);
    assert.deepEqual(rest, original.spec.template.spec);
  });

  it("the sysctls patch carries the whole list (it has no merge key)", () => {
    const sys = by(plan, "pod-sysctls");
    const patch = sys.patch as {
      spec: { template: { spec: { securityContext: { sysctls: unknown[] } } } };
    };
    assert.deepEqual(patch.spec.template.spec.securityContext.sysctls, [
      { name: "net.ipv4.ip_forward", value: "1" },
    ]);
  });

  it("the chart strategy is the values override and renders the chart's own init container", () => {
    const chart = by(plan, "chart-value");
    assert.deepEqual(chart.helmValues, { ipForwardInitContainer: true });
    const spec = (chart.patched as { spec: { template: { spec: { initContainers: unknown[] } } } })
      .spec.template.spec;
    assert.deepEqual(spec.initContainers[0], CHART_INIT_CONTAINER);
    // the chart template, verbatim: helm/charts stable/openvpn 4.2.5 templates/openvpn-deployment.yaml
    const tpl = readFileSync(
      join(
        import.meta.dirname,
        "../../agents/openvpn/fixtures/reference/helm-charts-stable-openvpn-4.2.5/templates/openvpn-deployment.yaml",
      ),
      "utf8",
    );
    for (const s of [
      "sysctl -w net.ipv4.ip_forward=1",
      "image: busybox:1.29",
      "name: sysctl",
      "privileged: true",
    ]) {
      assert.ok(tpl.includes(s), s);
    }
    assert.ok(chart.commands.some((c) => c.includes("--set ipForwardInitContainer=true")));
  });

  it("ends with the check after rollout, and says the pool is already masqueraded", () => {
    assert.ok(plan.verify.some((v) => v.includes("sysctl net.ipv4.ip_forward")));
    assert.equal(plan.returnPath.needed, false);
    const files = planFiles(plan).map((f) => f.name);
    assert.ok(
      files.includes("patch-init-container.yaml") && files.includes("values-ip-forward.yaml"),
    );
  });

  it("names the masquerade rule when the pool has no way back", () => {
    const { plan: p } = planFor("no-masquerade");
    assert.equal(p.returnPath.needed, true);
    assert.equal(p.returnPath.rule, "-A POSTROUTING -s 10.8.0.0/24 -o eth0 -j MASQUERADE");
    assert.match(p.returnPath.route ?? "", /ip route add 10\.8\.0\.0\/24 via 10\.244\.1\.10/);
  });
});

describe("podpath plan vpn (command)", () => {
  it("prints JSON with every strategy, and refuses a bad --pod", async () => {
    const { run } = await import("../../cli/commands/plan-vpn.ts");
    const io = memoryIo();
    const code = await run(
      [lab("baseline-ns")],
      { pod: "vpn/vpn-openvpn-6d9c7b5f4-x2x7k", strategy: "all", output: "json" },
      io,
    );
    assert.equal(code, 0);
    const doc = JSON.parse(io.stdout());
    assert.deepEqual(
      doc.strategies.map((s: StrategyPlan) => s.strategy),
      ["init-container", "pod-sysctls", "chart-value"],
    );
    await assert.rejects(run([lab("baseline-ns")], { pod: "nope" }, memoryIo()), {
      code: "ERR_USAGE",
    });
  });
});

describe("planVpn on GKE Autopilot", () => {
  it("predicts the Warden rejection for the privileged init container", () => {
    const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(lab("set-by-hand"))));
    const ctx = resolveVpn(input)!;
    const plan = planVpn(ctx, input.objects, { platform: "gke-autopilot" });
    const init = by(plan, "init-container");
    assert.equal(init.admission?.allowed, "no");
    assert.ok(
      init.admission!.messages.some((m) => /autogke-disallow-privilege|Autopilot/.test(m)),
      init.admission!.messages.join("\n"),
    );
  });
});

describe("planVpn for a hostNetwork VPN pod", () => {
  it("warns that forwarding is the node's, and predicts the API rejection of the pod sysctl", () => {
    const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(lab("set-by-hand"))));
    const objects = input.objects.map((o) =>
      o.kind === "Deployment"
        ? {
            ...o,
            raw: (() => {
              const raw = structuredClone(o.raw) as {
                spec: { template: { spec: Record<string, unknown> } };
              };
              raw.spec.template.spec["hostNetwork"] = true;
              return raw;
            })(),
          }
        : o,
    );
    const ctx = resolveVpn({ ...input, objects })!;
    const plan = planVpn(ctx, objects, { kubernetesVersion: "v1.30" });
    assert.match(plan.warnings[0] ?? "", /hostNetwork/);
    const sys = by(plan, "pod-sysctls");
    assert.equal(sys.admission?.allowed, "no");
    assert.ok(
      sys.admission!.messages.some((m) =>
        m.includes("may not be specified when 'hostNetwork' is true"),
      ),
    );
  });
});
