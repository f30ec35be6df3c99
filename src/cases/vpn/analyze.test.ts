import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { cidrOf } from "../../agents/openvpn/server-config.ts";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { parseProbeTranscript } from "../../evidence/probes.ts";
import { readSysctl } from "../../evidence/sysctl.ts";
import { parseIptablesSave } from "../../iptables/save-parser.ts";
import type { Finding, FindingId } from "../../model/types.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { analyzeVpn, vpnFindings } from "./analyze.ts";
import type { VpnInput } from "./input.ts";
import { masqueradeOf } from "./masquerade.ts";
import { vpnInputFromSnapshot } from "./snapshot-input.ts";

// Snapshots written by `podpath lab run vpn` (real OpenVPN, sysctl, iptables and probes): see
// testdata/vpn-lab/*/README.md for each variant's command line.
const lab = (v: string) => new URL(`./testdata/vpn-lab/${v}/`, import.meta.url).pathname;
const load = (v: string) => vpnInputFromSnapshot(loadSnapshot(openSnapshot(lab(v))));
const ids = (fs: readonly Finding[]) => new Set(fs.map((f) => f.id));

function assertEvidenceReal(v: string, fs: readonly Finding[]): void {
  for (const f of fs) {
    assert.ok(f.evidence.length > 0, `${f.id} cites evidence`);
    for (const e of f.evidence) {
      const lines = readFileSync(`${lab(v)}${e.file}`, "utf8").split(/\r?\n/);
      assert.ok(e.line >= 1 && e.line <= lines.length, `${f.id}: ${e.file}:${e.line} exists`);
      if (e.text !== undefined)
        assert.equal(lines[e.line - 1]!.trim(), e.text.trim(), `${f.id}: ${e.file}:${e.line}`);
    }
  }
}

describe("vpnFindings on the lab replicas", () => {
  const cases: [string, FindingId[], FindingId[]][] = [
    [
      "forwarding-off",
      ["vpn/forwarding-disabled", "vpn/first-silent-hop"],
      ["vpn/client-pool-unroutable", "vpn/dns-layer", "vpn/forwarding-not-durable"],
    ],
    [
      "no-masquerade",
      ["vpn/client-pool-unroutable", "vpn/first-silent-hop"],
      ["vpn/forwarding-disabled", "vpn/policy-source-mismatch"],
    ],
    [
      "pool-policy",
      ["vpn/policy-source-mismatch", "vpn/first-silent-hop"],
      ["vpn/client-pool-unroutable", "vpn/forwarding-disabled"],
    ],
    [
      "dns-broken",
      ["vpn/dns-layer"],
      ["vpn/first-silent-hop", "vpn/forwarding-disabled", "vpn/client-pool-unroutable"],
    ],
    [
      "set-by-hand",
      ["vpn/forwarding-not-durable"],
      ["vpn/first-silent-hop", "vpn/forwarding-disabled", "vpn/dns-layer"],
    ],
    ["baseline-ns", ["vpn/admission-rejects", "vpn/forwarding-disabled"], []],
  ];
  for (const [variant, present, absent] of cases) {
    it(`${variant}: names ${present.join(", ")}`, () => {
      const { input, diagnostics } = load(variant);
      assert.deepEqual(
        diagnostics.filter((d) => d.severity === "error"),
        [],
      );
      const fs = vpnFindings(input);
      const got = ids(fs);
      for (const id of present)
        assert.ok(got.has(id), `${variant}: expected ${id}, got ${[...got].join(", ")}`);
      for (const id of absent) assert.ok(!got.has(id), `${variant}: did not expect ${id}`);
      assertEvidenceReal(variant, fs);
    });
  }

  it("the fixed replica (init container in the manifest, forwarding on) has no findings", () => {
    const { findings, missing } = analyzeVpn(load("fixed").input);
    assert.deepEqual(findings, []);
    assert.deepEqual(missing, []);
  });

  it("names the hop and the layer: the pod IP, and forwarding in the VPN pod", () => {
    const f = vpnFindings(load("forwarding-off").input).find(
      (x) => x.id === "vpn/first-silent-hop",
    )!;
    assert.match(f.title, /pod-ip \(vpn-pod-forwarding\)/);
    assert.match(f.explanation, /10\.244\.2\.20/);
    const fwd = vpnFindings(load("forwarding-off").input).find(
      (x) => x.id === "vpn/forwarding-disabled",
    )!;
    assert.equal(fwd.severity, "error");
    assert.match(fwd.evidence[0]!.text!, /net\.ipv4\.ip_forward = 0/);
  });

  it("in the policy replica, says that a later hop answers, so the tunnel forwards", () => {
    const f = vpnFindings(load("pool-policy").input).find((x) => x.id === "vpn/first-silent-hop")!;
    assert.match(f.explanation, /later hop answers/);
    const p = vpnFindings(load("pool-policy").input).find(
      (x) => x.id === "vpn/policy-source-mismatch",
    )!;
    assert.match(p.explanation, /10\.244\.1\.10/);
    assert.match(p.evidence[0]!.text!, /ipBlock/);
    assert.match(p.title, /demo\/allow-vpn-clients/);
  });

  it("without the pod's sysctl file, infers forwarding from the probe pattern and names the command", () => {
    const { input } = load("forwarding-off");
    const stripped: VpnInput = {
      ...input,
      pods: input.pods.map(({ sysctl: _drop, ...rest }) => rest),
    };
    const { findings, missing } = analyzeVpn(stripped);
    const f = findings.find((x) => x.id === "vpn/forwarding-disabled")!;
    assert.equal(f.severity, "warning");
    assert.match(
      f.explanation,
      /kubectl exec -n vpn vpn-openvpn-6d9c7b5f4-x2x7k -- sysctl net\.ipv4\.ip_forward/,
    );
    assert.ok(
      missing.some(
        (m) => m.file.endsWith("/sysctl.txt") && m.command?.includes("sysctl net.ipv4.ip_forward"),
      ),
    );
  });

  it("the chart value ipForwardInitContainer: true makes forwarding durable", () => {
    const { input } = load("set-by-hand");
    const values = {
      file: "pods/vpn/p/helm-values.yaml",
      ipForwardInitContainer: {
        value: true,
        source: { file: "pods/vpn/p/helm-values.yaml", line: 1 },
      },
    };
    assert.ok(ids(vpnFindings(input)).has("vpn/forwarding-not-durable"));
    assert.ok(
      !ids(vpnFindings({ ...input, chartValues: [values] })).has("vpn/forwarding-not-durable"),
    );
  });

  it("judges a remote allowlist for the client pool against the translated source", () => {
    const { input } = load("set-by-hand");
    const src = { file: "remote/db.yaml", line: 7, text: "- 10.8.0.0/24" };
    const site = (cidr: string) => ({
      name: "onprem",
      file: "remote/db.yaml",
      allowlists: [{ name: "db-firewall", sources: [{ value: cidrOf(cidr)!, source: src }] }],
    });
    const hit = vpnFindings({ ...input, remotes: [site("10.8.0.0/24")] }).find(
      (f) => f.id === "vpn/policy-source-mismatch",
    );
    assert.equal(hit?.subject, "remote/onprem");
    assert.ok(
      !ids(vpnFindings({ ...input, remotes: [site("10.244.1.0/24")] })).has(
        "vpn/policy-source-mismatch",
      ),
    );
  });
});

describe("vpn/service-vip-suffices", () => {
  it("is suggested when clients only probe Services and no redirect-gateway is pushed", () => {
    const { input } = load("set-by-hand");
    const t = parseProbeTranscript(
      '$ ping -c 1 10.8.0.1\n64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=1 ms\n$ curl -sS -m 3 -o /dev/null -w "%{http_code}\\n" http://10.96.0.20/\n200\n',
      "probes/svc.txt",
    ).value;
    const fs = vpnFindings({ ...input, probes: [t] });
    const f = fs.find((x) => x.id === "vpn/service-vip-suffices");
    assert.equal(f?.severity, "info");
    assert.ok(
      !ids(vpnFindings(input)).has("vpn/service-vip-suffices"),
      "not when pods and public hosts are probed",
    );
  });
});

describe("vpnFindings with little evidence", () => {
  it("names what is missing and never throws on an empty snapshot", () => {
    const { findings, missing } = analyzeVpn({ pods: [], objects: [], probes: [] });
    assert.deepEqual(findings, []);
    assert.ok(missing.some((m) => m.file.startsWith("probes/")));
  });

  it("finds the VPN pod from the chart label alone and asks for its sysctl", () => {
    const text = readFileSync(
      join(
        import.meta.dirname,
        "../../agents/openvpn/fixtures/reference/examples/stable-openvpn-4.2.5-rendered-ipForwardInitContainer.yaml",
      ),
      "utf8",
    );
    const objects = readKubeObjects(text, "cluster/vpn.yaml").value;
    const { missing, context } = analyzeVpn({ pods: [], objects, probes: [] });
    assert.equal(context?.workload?.name, "vpn-openvpn");
    assert.ok(
      missing.some((m) => m.command?.startsWith("kubectl exec -n vpn vpn-openvpn -- sysctl")),
    );
  });

  it("reads 1 with an init container in the chart-rendered manifest: durable", () => {
    const text = readFileSync(
      join(
        import.meta.dirname,
        "../../agents/openvpn/fixtures/reference/examples/stable-openvpn-4.2.5-rendered-ipForwardInitContainer.yaml",
      ),
      "utf8",
    );
    const objects = readKubeObjects(text, "cluster/vpn.yaml").value;
    const sysctl = {
      file: "pods/vpn/vpn-openvpn-1/sysctl.txt",
      values: readSysctl("net.ipv4.ip_forward = 1\n", "pods/vpn/vpn-openvpn-1/sysctl.txt").value,
    };
    const fs = vpnFindings({
      pods: [{ namespace: "vpn", name: "vpn-openvpn-1", sysctl }],
      objects,
      probes: [],
      vpnPod: "vpn/vpn-openvpn-1",
    });
    assert.ok(!ids(fs).has("vpn/forwarding-not-durable"));
  });
});

describe("masqueradeOf (the pod's nat table, through the nat evaluator)", () => {
  const client = { family: 4 as const, value: 0x0a080002n }; // 10.8.0.2
  const dst = { family: 4 as const, value: 0x0af40214n }; // 10.244.2.20
  const verdict = (rules: string) =>
    masqueradeOf(
      parseIptablesSave(
        `*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n${rules}COMMIT\n`,
        "ipt.txt",
      ).value,
      { src: client, dst, outIface: "eth0" },
    ).kind;
  it("sees the chart's rule, and only for the pool and eth0", () => {
    assert.equal(verdict("-A POSTROUTING -s 10.8.0.0/24 -o eth0 -j MASQUERADE\n"), "masqueraded");
    assert.equal(
      verdict("-A POSTROUTING -s 10.240.0.0/16 -o eth0 -j MASQUERADE\n"),
      "not-masqueraded",
    );
    assert.equal(
      verdict("-A POSTROUTING -s 10.8.0.0/24 -o eth1 -j MASQUERADE\n"),
      "not-masqueraded",
    );
    assert.equal(verdict(""), "not-masqueraded");
    assert.equal(
      verdict(
        ":X - [0:0]\n-A POSTROUTING -j X\n-A X -d 10.244.0.0/16 -j RETURN\n-A POSTROUTING -s 10.8.0.0/24 -j MASQUERADE\n",
      ),
      "masqueraded",
    );
    assert.equal(
      verdict(
        "-A POSTROUTING -d 10.244.0.0/16 -j ACCEPT\n-A POSTROUTING -s 10.8.0.0/24 -j MASQUERADE\n",
      ),
      "not-masqueraded",
    );
  });
});

describe("vpn/policy-source-mismatch: scope that grows after translation", () => {
  it("a policy for the pool that also admits the VPN pod's range now admits every client", () => {
    const { input } = load("set-by-hand");
    const np = readKubeObjects(
      [
        "apiVersion: networking.k8s.io/v1",
        "kind: NetworkPolicy",
        "metadata: {name: db, namespace: demo}",
        "spec:",
        "  podSelector: {}",
        "  ingress:",
        "  - from:",
        "    - ipBlock: {cidr: 10.8.0.0/24}",
        "  - from:",
        "    - ipBlock: {cidr: 10.244.1.0/24}",
        "",
      ].join("\n"),
      "cluster/np.yaml",
    ).value;
    const fs = vpnFindings({ ...input, objects: [...input.objects, ...np] }).filter(
      (f) => f.id === "vpn/policy-source-mismatch",
    );
    assert.deepEqual(
      fs.map((f) => [f.severity, f.evidence[0]!.line]),
      [
        ["error", 8],
        ["warning", 10],
      ],
    );
  });
});

describe("vpn/first-silent-hop layers", () => {
  const walk = (t: string) =>
    vpnFindings({
      ...load("set-by-hand").input,
      probes: [parseProbeTranscript(t, "probes/p.txt").value],
    }).find((f) => f.id === "vpn/first-silent-hop");
  it("a silent peer points at the tunnel itself", () => {
    const f = walk(
      "$ ping -c 2 -W 1 10.8.0.1\nPING 10.8.0.1 (10.8.0.1) 56(84) bytes of data.\n\n--- 10.8.0.1 ping statistics ---\n2 packets transmitted, 0 received, 100% packet loss, time 1001ms\n",
    );
    assert.match(f?.title ?? "", /peer \(tunnel\)/);
    assert.equal(f?.evidence.at(-1)?.line, 5); // "2 packets transmitted, 0 received"
  });
  it("an ICMP error is not silence: the hop fails and the explanation says so", () => {
    const f = walk(
      "$ ping -c 1 10.8.0.1\n64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=1 ms\n$ ping -c 1 10.244.2.20\nFrom 10.8.0.1 icmp_seq=1 Destination Host Unreachable\n",
    );
    assert.match(f?.explanation ?? "", /fails \(unreachable\)/);
  });
});

describe("vpnFindings fuzz", () => {
  const pieces = [
    "$ ping -c 1 10.8.0.1\n",
    "$ ping -c 1 10.244.2.20\n",
    "$ curl -m 1 http://10.96.0.20/\n",
    "$ dig @10.96.0.10 web.demo.svc.cluster.local\n",
    "$ ping 198.51.100.7  # public\n",
    "64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=1 ms\n",
    "1 packets transmitted, 0 received\n",
    "curl: (28) Connection timed out after 1000 milliseconds\n",
    ";; no servers could be reached\n",
    "From 10.8.0.1 icmp_seq=1 Destination Host Unreachable\n",
    "status: NXDOMAIN\n",
    "200\n",
    "# peer\n",
  ];
  it("never throws, and every probe citation is a line of the transcript", () => {
    const { input } = load("pool-policy");
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...pieces), { maxLength: 30 }), (parts) => {
        const text = parts.join("");
        const t = parseProbeTranscript(text, "probes/f.txt").value;
        const n = text.split("\n").length;
        for (const f of vpnFindings({ ...input, probes: [t] })) {
          for (const e of f.evidence)
            if (e.file === "probes/f.txt") assert.ok(e.line >= 1 && e.line <= n);
        }
      }),
      { numRuns: 300 },
    );
  });
});
