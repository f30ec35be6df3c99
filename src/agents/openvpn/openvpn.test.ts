import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { formatCidr, formatIp } from "../../net/cidr.ts";
import {
  CHART_DEFAULTS,
  chartMasqueradeRule,
  dottedMask,
  envClientPool,
  readChartValues,
  recognizeChart,
} from "./chart.ts";
import {
  clientPools,
  networkAndMask,
  parseOpenvpnConfig,
  serverTunnelAddress,
} from "./server-config.ts";

const ref = join(import.meta.dirname, "fixtures/reference");
const here = (p: string) => new URL(p, import.meta.url);

describe("parseOpenvpnConfig", () => {
  const text = readFileSync(here("./testdata/server.conf"), "utf8");
  const { value, diagnostics } = parseOpenvpnConfig(text, "pods/vpn/openvpn-0/openvpn.conf");

  it("reads the pool, topology, device, pushes and routes with their lines", () => {
    // the malformed `server … 255.255.0.255` later in the file is reported and does not replace it
    assert.equal(formatCidr(value.server!.value), "10.8.0.0/24");
    assert.equal(value.server!.source.line, 6);
    assert.equal(formatCidr(value.serverIpv6!.value), "fd00:8::/64");
    assert.equal(value.topology?.value, "subnet");
    assert.equal(value.dev?.value, "tun0");
    assert.equal(value.clientToClient?.line, 9);
    assert.deepEqual(
      value.pushedRoutes.map((r) => formatCidr(r.value)),
      ["10.96.0.0/12", "10.244.0.0/16"],
    );
    assert.deepEqual(
      value.pushedDns.map((d) => formatIp(d.value)),
      ["10.96.0.10"],
    );
    assert.equal(value.redirectGateway?.line, 13);
    assert.deepEqual(
      value.routes.map((r) => formatCidr(r.value)),
      ["192.168.50.0/24"],
    );
    assert.equal(formatIp(serverTunnelAddress(value.server!.value)), "10.8.0.1");
    assert.deepEqual(
      clientPools(value).map((p) => formatCidr(p.value)),
      ["10.8.0.0/24", "fd00:8::/64"],
    );
  });

  it("skips inline blocks and reports malformed values with their line", () => {
    assert.deepEqual(
      diagnostics.map((d) => [d.code, d.source?.line]),
      [
        ["OPENVPN_SYNTAX", 20],
        ["OPENVPN_SYNTAX", 21],
      ],
    );
  });

  it("reads the chart's openvpn.conf template without complaining about its placeholders", () => {
    const tpl = readFileSync(
      `${ref}/helm-charts-stable-openvpn-4.2.5/templates/config-openvpn.yaml`,
      "utf8",
    );
    const values: Record<string, string> = {
      OVPN_NETWORK: "10.240.0.0",
      OVPN_SUBNET: "255.255.0.0",
      OVPN_K8S_POD_NETWORK: "10.0.0.0",
      OVPN_K8S_POD_SUBNET: "255.0.0.0",
    };
    const conf = tpl
      .slice(tpl.indexOf("openvpn.conf: |-") + 17)
      .split("\n")
      .filter((l) => !l.includes("OVPN_K8S_SVC"))
      .join("\n")
      .replace(/\{\{[^}]*\}\}/g, (m) => values[/openvpn\.(\w+)/.exec(m)?.[1] ?? ""] ?? "");
    const r = parseOpenvpnConfig(conf, "cm");
    assert.equal(formatCidr(r.value.server!.value), "10.240.0.0/16");
    assert.equal(r.value.dev?.value, "tun0");
    assert.deepEqual(r.diagnostics, []);
  });

  it("converts netmasks exactly and refuses non-contiguous ones", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 32 }), (p) => {
        const c = networkAndMask("10.0.0.0", dottedMask(p));
        assert.equal(c?.prefix, p);
      }),
    );
    assert.equal(networkAndMask("10.0.0.0", "255.0.255.0"), undefined);
  });

  it("never throws on arbitrary text", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (t) => {
        parseOpenvpnConfig(`server ${t}\npush "${t}"\n${t}`, "f");
      }),
    );
  });
});

describe("stable/openvpn chart", () => {
  it("recognises the rendered Deployment by its chart label", () => {
    const text = readFileSync(
      `${ref}/examples/stable-openvpn-4.2.5-rendered-ipForwardInitContainer.yaml`,
      "utf8",
    );
    const [dep] = readKubeObjects(text, "cluster/vpn.yaml").value;
    const c = recognizeChart(dep!);
    assert.equal(c?.version, "4.2.5");
    assert.equal(c?.release, "vpn");
    assert.match(c!.source.text!, /chart: openvpn-4.2.5/);
  });

  it("reads values: the flag, the pool from OVPN_NETWORK/OVPN_SUBNET, with lines", () => {
    const text = readFileSync(`${ref}/helm-charts-stable-openvpn-4.2.5/values.yaml`, "utf8");
    const { value } = readChartValues(text, "values.yaml");
    assert.equal(value.ipForwardInitContainer?.value, CHART_DEFAULTS.ipForwardInitContainer);
    assert.match(value.ipForwardInitContainer!.source.text!, /^ipForwardInitContainer: false/);
    assert.equal(formatCidr(value.clientPool!.value), "10.240.0.0/16");
    assert.equal(formatCidr(value.podNetwork!.value), "10.0.0.0/8");
    assert.equal(value.serviceNetwork, undefined);
    const bad = readChartValues('ipForwardInitContainer: "true"\n', "v.yaml");
    assert.equal(bad.diagnostics[0]?.code, "CHART_VALUES");
  });

  it("writes the masquerade rule configure.sh installs", () => {
    const { value } = readChartValues(
      "openvpn:\n  OVPN_NETWORK: 10.240.0.0\n  OVPN_SUBNET: 255.255.0.0\n",
      "v",
    );
    assert.equal(
      chartMasqueradeRule(value.clientPool!.value),
      "-A POSTROUTING -s 10.240.0.0/16 -o eth0 -j MASQUERADE",
    );
  });

  it("reads env-style pools", () => {
    const y = `apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    env:\n    - name: OVPN_SERVER\n      value: 192.168.255.0/24\n`;
    const [pod] = readKubeObjects(y, "p.yaml").value;
    const pool = envClientPool(pod!, ["spec", "containers", 0]);
    assert.equal(formatCidr(pool!.value), "192.168.255.0/24");
    assert.equal(pool!.source.line, 9);
  });
});

describe("readChartValues fuzz", () => {
  it("never throws on arbitrary YAML-ish text", () => {
    const pieces = [
      "openvpn:\n",
      "  OVPN_NETWORK: ",
      "  OVPN_SUBNET: ",
      "10.8.0.0",
      "255.255.0.0",
      "ipForwardInitContainer: ",
      "true",
      "[",
      "{",
      "&a ",
      "*a",
      "\n",
      "- ",
      ": ",
      '"',
    ];
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 200 }),
          fc.array(fc.constantFrom(...pieces), { maxLength: 40 }).map((a) => a.join("")),
        ),
        (t) => {
          readChartValues(t, "v.yaml");
        },
      ),
      { numRuns: 1000 },
    );
  });
});
