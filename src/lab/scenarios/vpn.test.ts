/**
 * Kernel test: the VPN replica on a real OpenVPN server and client in network namespaces. Each
 * finding appears for the variant with the problem and disappears when that problem is fixed.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { vpnFindings } from "../../cases/vpn/analyze.ts";
import { vpnInputFromSnapshot } from "../../cases/vpn/snapshot-input.ts";
import { readSysctl } from "../../evidence/sysctl.ts";
import { type ProbeSystem, probeOutward, realSystem } from "../../live/probe.ts";
import type { FindingId } from "../../model/types.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { kernelSkip } from "../kernel-guard.ts";
import { createLab } from "../netns.ts";
import { scenario, VPN, VpnOptions } from "./vpn.ts";
import { VPN_NS, VPN_POD } from "./vpn-cluster.ts";

const skip = kernelSkip();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function replica(
  options: Record<string, string | true>,
): Promise<{ ids: Set<FindingId>; dir: string }> {
  const lab = await createLab({ prefix: "ppv" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-vpn-test-"));
  dirs.push(dir);
  try {
    await scenario.run({ lab, outDir: dir, log: () => {} }, VpnOptions.parse(options));
  } finally {
    await lab.destroy();
  }
  const { input } = vpnInputFromSnapshot(loadSnapshot(openSnapshot(dir)));
  return { ids: new Set(vpnFindings(input).map((f) => f.id)), dir };
}

describe("lab vpn: findings appear with the problem and disappear with the fix", {
  skip,
  concurrency: false,
}, () => {
  it("forwarding off → forwarding-disabled at the pod-ip hop; on → gone", async () => {
    const off = await replica({ "ip-forward": "0" });
    assert.ok(off.ids.has("vpn/forwarding-disabled"));
    assert.ok(off.ids.has("vpn/first-silent-hop"));
    // the real sysctl read inside the server's namespace
    const sys = readSysctl(
      (await import("node:fs")).readFileSync(
        join(off.dir, `pods/${VPN_NS}/${VPN_POD}/sysctl.txt`),
        "utf8",
      ),
      "sysctl.txt",
    ).value;
    assert.equal(sys.get("net.ipv4.ip_forward")?.value, "0");
    const on = await replica({ "ip-forward": "1", manifest: "init-container" });
    assert.ok(!on.ids.has("vpn/forwarding-disabled"));
    assert.ok(!on.ids.has("vpn/first-silent-hop"));
  });

  it("forwarding on without masquerade → client-pool-unroutable; with masquerade → gone", async () => {
    const bare = await replica({
      "ip-forward": "1",
      "masquerade-pool": "off",
      manifest: "init-container",
    });
    assert.ok(bare.ids.has("vpn/client-pool-unroutable"));
    assert.ok(bare.ids.has("vpn/first-silent-hop"));
    const masq = await replica({
      "ip-forward": "1",
      "masquerade-pool": "on",
      manifest: "init-container",
    });
    assert.ok(!masq.ids.has("vpn/client-pool-unroutable"));
  });

  it("masquerade with a client-pool policy → policy-source-mismatch; without masquerade → gone", async () => {
    const withMasq = await replica({ "ip-forward": "1", policy: true, manifest: "init-container" });
    assert.ok(withMasq.ids.has("vpn/policy-source-mismatch"));
    const routed = await replica({
      "ip-forward": "1",
      policy: true,
      "masquerade-pool": "off",
      manifest: "init-container",
    });
    assert.ok(!routed.ids.has("vpn/policy-source-mismatch"));
  });

  it("broken DNS → dns-layer; DNS answering → gone", async () => {
    const broken = await replica({ "ip-forward": "1", dns: "broken", manifest: "init-container" });
    assert.ok(broken.ids.has("vpn/dns-layer"));
    assert.ok(!broken.ids.has("vpn/forwarding-disabled"));
    const ok = await replica({ "ip-forward": "1", dns: "ok", manifest: "init-container" });
    assert.ok(!ok.ids.has("vpn/dns-layer"));
  });

  it("set by hand only → forwarding-not-durable; the chart value in the manifest → gone", async () => {
    const byHand = await replica({ "ip-forward": "1", manifest: "none" });
    assert.ok(byHand.ids.has("vpn/forwarding-not-durable"));
    const chart = await replica({ "ip-forward": "1", manifest: "chart-value" });
    assert.ok(!chart.ids.has("vpn/forwarding-not-durable"));
  });

  it("podpath probe from the laptop: stops at the pod IP with forwarding off, passes with it on", async () => {
    const walk = async (ipForward: "0" | "1") => {
      const lab = await createLab({ prefix: "ppv" });
      try {
        await scenario.run(
          { lab, outDir: undefined, log: () => {} },
          VpnOptions.parse({ "ip-forward": ipForward }),
        );
        const laptop = lab.namespaces.find((n) => n.role === "laptop")!;
        const real = realSystem();
        // the system's own ping and dig, run inside the laptop's namespace
        const sys: ProbeSystem = {
          ...real,
          platform: "linux",
          has: (p) => p === "ping" || p === "dig",
          exec: async (argv, timeoutMs) => {
            const r = await laptop.exec(argv, { timeoutMs });
            return { code: r.code, output: r.stdout + r.stderr };
          },
          connect: async (ip, port, timeoutMs) => {
            const t0 = Date.now();
            const secs = String(Math.ceil(timeoutMs / 1000));
            const r = await laptop.exec(["nc", "-vz", "-w", secs, ip, String(port)], {
              timeoutMs: timeoutMs + 2000,
            });
            const out = r.stdout + r.stderr;
            const outcome =
              r.code === 0 ? "connected" : /refused/.test(out) ? "refused" : "timeout";
            return { outcome, ms: Date.now() - t0 };
          },
        };
        return await probeOutward(
          {
            peer: VPN.peer,
            podIp: VPN.targetPodIp,
            serviceIp: { ip: VPN.webServiceIp, port: 80 },
            public: VPN.publicIp,
            name: VPN.webName,
            dnsServer: VPN.dnsServiceIp,
          },
          sys,
          { timeoutMs: 1000, count: 1, all: false },
        );
      } finally {
        await lab.destroy();
      }
    };
    const off = await walk("0");
    assert.deepEqual(
      off.steps.map((x) => [x.role, x.answered]),
      [
        ["peer", true],
        ["pod-ip", false],
      ],
    );
    assert.equal(off.stoppedAt?.layer, "vpn-pod-forwarding");
    const on = await walk("1");
    assert.equal(on.stoppedAt, undefined);
    assert.deepEqual(
      on.parsed.commands.map((c) => [c.role, c.result]),
      [
        ["peer", "replies"],
        ["pod-ip", "replies"],
        ["service-ip", "ok"],
        ["public", "replies"],
        ["name", "ok"],
      ],
    );
  });
});
