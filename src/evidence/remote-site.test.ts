/** @module evidence/remote-site.test — the remote/*.yaml schema: strict CIDRs, positions, unknown keys. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatCidr } from "../net/cidr.ts";
import { parsePort, readRemoteSites } from "./remote-site.ts";

// The example from DESIGN.md, as a user would write it.
const DESIGN_EXAMPLE = `kind: RemoteSite              # one file per site podpath cannot see into (on-prem DC, peer VPC)
name: onprem-dc1
prefixes: [10.20.0.0/16]      # the site's own addresses
routesBack: [10.128.0.0/20]   # cluster-side prefixes the site routes back over the tunnel
vpn:                          # optional: the tunnel between cluster network and site
  kind: cloud-vpn-classic     # or cloud-vpn-ha, ipsec, wireguard, openvpn
  localTrafficSelectors: [10.128.0.0/20]   # cluster side
  remoteTrafficSelectors: [10.20.0.0/16]   # site side
allowlists:                   # firewall rules, ACLs, database allowlists that name sources
  - name: db-firewall
    sources: [10.128.0.0/20]
    destinations: [10.20.30.40/32]
    ports: [tcp/5432]
`;

describe("readRemoteSites", () => {
  it("reads the DESIGN.md example with a line for every entry", () => {
    const { value, diagnostics } = readRemoteSites(DESIGN_EXAMPLE, "remote/onprem-dc1.yaml");
    assert.deepEqual(diagnostics, []);
    const [s] = value;
    assert.equal(s?.name, "onprem-dc1");
    assert.deepEqual(
      s?.prefixes.map((e) => [formatCidr(e.cidr), e.source.line]),
      [["10.20.0.0/16", 3]],
    );
    assert.deepEqual(
      s?.routesBack?.map((e) => [formatCidr(e.cidr), e.source.line]),
      [["10.128.0.0/20", 4]],
    );
    assert.equal(s?.vpn?.kind, "cloud-vpn-classic");
    assert.equal(s?.vpn?.localTrafficSelectors?.[0]?.source.line, 7);
    assert.equal(s?.vpn?.remoteTrafficSelectors?.[0]?.source.line, 8);
    const fw = s?.allowlists[0];
    assert.equal(fw?.name, "db-firewall");
    assert.equal(fw?.source.line, 10);
    assert.deepEqual(
      fw?.destinations.map((e) => formatCidr(e.cidr)),
      ["10.20.30.40/32"],
    );
    assert.deepEqual(
      fw?.ports.map((p) => [p.protocol, p.from, p.to, p.source.line]),
      [["tcp", 5432, 5432, 13]],
    );
    assert.equal(s?.prefixes[0]?.source.col, 12);
  });

  it("tells an absent routesBack (unknown) from an empty one (nothing routed back)", () => {
    const absent = readRemoteSites(
      "kind: RemoteSite\nname: a\nprefixes: [10.20.0.0/16]\n",
      "a.yaml",
    ).value[0];
    const empty = readRemoteSites("kind: RemoteSite\nname: a\nroutesBack: []\n", "a.yaml").value[0];
    assert.equal(absent?.routesBack, undefined);
    assert.deepEqual(empty?.routesBack, []);
  });

  it("rejects bad CIDRs strictly, at their line, and keeps the good ones", () => {
    const text =
      "kind: RemoteSite\nname: a\nprefixes:\n  - 10.20.0.0/16\n  - 10.0.0.300/8\n  - 10.30.0.0/33\n  - 10.128.0.1/20\n  - 010.1.0.0/16\n";
    const { value, diagnostics } = readRemoteSites(text, "r.yaml");
    assert.deepEqual(
      value[0]?.prefixes.map((e) => formatCidr(e.cidr)),
      ["10.20.0.0/16"],
    );
    assert.deepEqual(
      diagnostics.map((d) => [d.code, d.severity, d.source?.line]),
      [
        ["REMOTE_CIDR", "error", 5],
        ["REMOTE_CIDR", "error", 6],
        ["REMOTE_CIDR", "error", 7],
        ["REMOTE_CIDR", "error", 8],
      ],
    );
    assert.match(
      diagnostics[2]!.message,
      /host bits set.*expected a CIDR such as 10\.128\.0\.0\/20/,
    );
    assert.equal(diagnostics[0]!.source?.file, "r.yaml");
  });

  it("warns about unknown keys with their line, and still reads the site", () => {
    const text =
      "kind: RemoteSite\nname: a\nprefixs: [10.0.0.0/8]\nvpn:\n  kind: ipsec\n  ike: v2\n";
    const { value, diagnostics } = readRemoteSites(text, "u.yaml");
    assert.equal(value[0]?.vpn?.kind, "ipsec");
    assert.deepEqual(
      diagnostics.map((d) => [d.code, d.severity]),
      [
        ["UNKNOWN_KEY", "warning"],
        ["UNKNOWN_KEY", "warning"],
      ],
    );
    assert.deepEqual(diagnostics.map((d) => d.source?.line).sort(), [3, 6]);
    assert.ok(diagnostics.some((d) => /prefixs/.test(d.message)));
  });

  it("reports schema errors with the line of the field", () => {
    const text =
      "kind: RemoteSite\nname: a\nvpn:\n  kind: gre\nallowlists:\n  - name: x\n    ports: [tcp/70000, udp/53]\n";
    const { value, diagnostics } = readRemoteSites(text, "e.yaml");
    assert.equal(value[0]?.vpn, undefined);
    assert.deepEqual(
      value[0]?.allowlists[0]?.ports.map((p) => p.protocol),
      ["udp"],
    );
    const vpn = diagnostics.find((d) => d.code === "REMOTE_SCHEMA");
    assert.equal(vpn?.source?.line, 4);
    assert.match(vpn!.message, /vpn\.kind/);
    const port = diagnostics.find((d) => d.code === "REMOTE_PORT");
    assert.equal(port?.source?.line, 7);
  });

  it("reads several sites from one file and skips what is not a site", () => {
    const text = `${DESIGN_EXAMPLE}---\nkind: RemoteSite\nname: peer-vpc\nprefixes: [172.20.0.0/16]\n---\nkind: Other\nname: x\n`;
    const { value, diagnostics } = readRemoteSites(text, "m.yaml");
    assert.deepEqual(
      value.map((s) => s.name),
      ["onprem-dc1", "peer-vpc"],
    );
    assert.equal(value[1]?.source.line, 15);
    assert.equal(diagnostics.length, 1);
    assert.equal(diagnostics[0]?.source?.line, 19);
  });
});

describe("parsePort", () => {
  it("reads protocols, ports and ranges, and explains what it expects", () => {
    assert.deepEqual(parsePort("tcp/8000-8080"), { protocol: "tcp", from: 8000, to: 8080 });
    assert.deepEqual(parsePort("icmp"), { protocol: "icmp" });
    for (const bad of ["5432", "tcp/0", "tcp/9-1", "http/80", "tcp/65536"]) {
      assert.equal(typeof parsePort(bad), "string", bad);
    }
  });
});
