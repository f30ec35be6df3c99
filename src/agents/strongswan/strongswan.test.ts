/**
 * Tests of the strongSwan readers on real output: `ipsec statusall` and `swanctl --list-sas` of
 * charon 5.9.8 in the ipsec lab (fixtures/), `ip xfrm policy` from policies installed on the real
 * kernel (at test time, in a namespace of this test), and ipsec.conf / swanctl.conf with errors.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { kernelSkip } from "../../lab/kernel-guard.ts";
import { createLab } from "../../lab/netns.ts";
import { formatCidr, formatIp } from "../../net/cidr.ts";
import { isLoaded, parseIpsecConf } from "./ipsec-conf.ts";
import { establishedIkeSas, installedChildSas, parseSaStatus } from "./sa-status.ts";
import { parseSwanctlConf } from "./swanctl-conf.ts";
import { parseXfrmPolicy, parseXfrmState, tunnelPolicies } from "./xfrm.ts";

const fixture = (f: string) => readFileSync(new URL(`fixtures/${f}`, import.meta.url), "utf8");
const ts = (
  l: readonly { value: { cidr: Parameters<typeof formatCidr>[0]; protoPort?: string } }[],
) => l.map((s) => formatCidr(s.value.cidr) + (s.value.protoPort ? `[${s.value.protoPort}]` : ""));

describe("parseIpsecConf", () => {
  const { value, diagnostics } = parseIpsecConf(fixture("ipsec.conf"), "pods/vpn/ss-0/ipsec.conf");
  const conn = (n: string) => value.conns.find((c) => c.name === n)!;

  it("applies %default and also=, the conn's own values winning", () => {
    assert.deepEqual(
      value.conns.map((c) => c.name),
      ["site-base", "rw", "onprem", "pool-range", "broken", "libreswan"],
    );
    assert.deepEqual(ts(conn("rw").left.subnets), ["10.244.0.0/16", "10.96.0.0/12"]);
    assert.equal(conn("rw").left.subnets[0]!.source.line, 10);
    assert.equal(conn("rw").left.updown?.value, "/etc/ipsec.d/updown-masq.sh");
    assert.deepEqual(ts(conn("onprem").left.subnets), ["10.244.1.0/24[tcp/5432]"]);
    assert.deepEqual(ts(conn("onprem").right.subnets), ["10.20.0.0/16"]);
    assert.equal(conn("onprem").right.host?.value, "198.51.100.20");
    assert.equal(conn("onprem").auto?.value, "start");
    assert.equal(value.setup.get("uniqueids")?.value, "never");
    assert.equal(value.setup.get("charondebug")?.value, "ike 1, knl 1");
  });

  it("reads rightsourceip pools as CIDRs, ranges as blocks, and auto=ignore as not loaded", () => {
    const rw = conn("rw").right.sourceIp?.value;
    assert.equal(rw?.kind, "pool");
    assert.deepEqual(rw?.kind === "pool" ? rw.cidrs.map(formatCidr) : [], ["10.9.0.0/24"]);
    const range = conn("pool-range").right.sourceIp?.value;
    assert.deepEqual(range?.kind === "pool" ? range.cidrs.map(formatCidr) : [], [
      "10.9.1.10/31",
      "10.9.1.12/30",
      "10.9.1.16/30",
      "10.9.1.20/32",
    ]);
    assert.equal(isLoaded(conn("pool-range")), false);
    assert.equal(conn("rw").right.dynamic, true);
  });

  it("reads libreswan's leftsubnets={…} list", () => {
    assert.deepEqual(ts(conn("libreswan").left.subnets), ["10.244.1.0/24", "10.244.2.0/24"]);
    assert.equal(conn("libreswan").auto?.value, "ondemand");
  });

  it("reports bad values with their line and keeps the rest of the conn", () => {
    assert.deepEqual(
      diagnostics.map((d) => [d.code, d.source?.line]),
      [
        ["IPSEC_CONF_SYNTAX", 37],
        ["IPSEC_CONF_SYNTAX", 33],
        ["IPSEC_CONF_SYNTAX", 34],
        ["IPSEC_CONF_SYNTAX", 35],
        ["IPSEC_CONF_SYNTAX", 36],
        ["IPSEC_CONF_SYNTAX", 41],
      ],
    );
    assert.match(diagnostics[1]!.message, /also=nowhere: expected the name of a conn/);
    assert.match(diagnostics[4]!.message, /auto=sometimes: expected one of/);
    assert.deepEqual(ts(conn("broken").left.subnets), ["10.244.0.0/16", "10.96.0.0/12"]);
  });

  it("reports an also= loop instead of following it forever", () => {
    const r = parseIpsecConf("conn a\n  also=b\nconn b\n  also=a\n  leftsubnet=10.0.0.0/8\n", "f");
    assert.ok(r.diagnostics.some((d) => /loop/.test(d.message)));
    assert.deepEqual(ts(r.value.conns[0]!.left.subnets), ["10.0.0.0/8"]);
  });
});

describe("parseSwanctlConf", () => {
  const { value, diagnostics } = parseSwanctlConf(fixture("swanctl.conf"), "swanctl.conf");
  it("reads connections, children's traffic selectors, updown and pools with lines", () => {
    assert.deepEqual(
      value.connections.map((c) => c.name),
      ["rw", "site"],
    );
    const rw = value.connections[0]!;
    assert.equal(rw.localAddrs?.value, "10.244.1.10");
    assert.deepEqual(
      rw.pools.map((p) => p.value),
      ["rw_pool"],
    );
    const net = rw.children[0]!;
    assert.deepEqual(ts(net.localTs), ["10.244.0.0/16", "10.96.0.0/12"]);
    assert.equal(net.localTs[0]!.source.line, 15);
    assert.equal(net.remoteDynamic, true);
    assert.equal(net.updown?.value, "/usr/lib/ipsec/_updown iptables");
    const db = value.connections[1]!.children[0]!;
    assert.deepEqual(ts(db.localTs), ["10.244.1.0/24[tcp/5432]"]);
    assert.deepEqual(ts(db.remoteTs), ["10.20.0.0/16"]);
    assert.equal(db.startAction?.value, "start");
    const pools = value.pools.map((p) => [
      p.name,
      p.addrs?.value.kind === "pool" ? p.addrs.value.cidrs.map(formatCidr).join(" ") : "",
    ]);
    assert.deepEqual(pools, [
      ["rw_pool", "10.9.0.0/24"],
      ["range_pool", "10.9.1.10/31 10.9.1.12/30 10.9.1.16/30 10.9.1.20/32"],
    ]);
  });
  it("reports a bad selector and an unknown pool with their lines", () => {
    assert.deepEqual(
      diagnostics.map((d) => [d.code, d.source?.line]),
      [
        ["SWANCTL_CONF_VALUE", 29],
        ["SWANCTL_CONF_VALUE", 32],
      ],
    );
  });
  it("reports an unclosed section at its opening line", () => {
    const r = parseSwanctlConf("connections {\n  rw {\n    pools = p\n", "s.conf");
    assert.ok(r.diagnostics.some((d) => d.source?.line === 2 && /never closed/.test(d.message)));
    assert.equal(r.value.connections[0]?.name, "rw");
  });
});

describe("parseSaStatus", () => {
  it("reads statusall: the established IKE SA, the installed CHILD SA, selectors and bytes", () => {
    const { value, diagnostics } = parseSaStatus(fixture("statusall-server.txt"), "s.txt");
    assert.deepEqual(diagnostics, []);
    assert.equal(value.format, "statusall");
    assert.deepEqual(
      establishedIkeSas(value).map((i) => [i.conn, i.localHost, i.remoteHost]),
      [["rw", "10.244.1.10", "192.0.2.10"]],
    );
    const [c] = installedChildSas(value);
    assert.equal(c?.mode, "TUNNEL");
    assert.deepEqual(ts(c!.localTs), ["10.0.0.0/8"]);
    assert.deepEqual(ts(c!.remoteTs), ["10.9.0.1/32"]);
    assert.ok((c?.bytesIn ?? 0) > 0 && (c?.packetsOut ?? 0) > 0);
    assert.deepEqual(
      value.pools.map((p) => p.value),
      ["10.9.0.0/24"],
    );
    assert.deepEqual(
      value.configured.map((x) => [x.conn, x.localTs.map((s) => formatCidr(s.cidr)).join(" ")]),
      [["rw", "10.0.0.0/8"]],
    );
  });
  it("reads an IKE SA without any CHILD SA (the tunnel carries nothing)", () => {
    for (const f of ["statusall-no-child.txt", "list-sas-no-child.txt"]) {
      const { value } = parseSaStatus(fixture(f), f);
      assert.equal(establishedIkeSas(value).length, 1, f);
      assert.equal(installedChildSas(value).length, 0, f);
    }
  });
  it("reads swanctl --list-sas: virtual IP, CHILD SA selectors and counters", () => {
    const { value, diagnostics } = parseSaStatus(fixture("list-sas-server.txt"), "l.txt");
    assert.deepEqual(diagnostics, []);
    assert.equal(value.format, "list-sas");
    const [ike] = establishedIkeSas(value);
    assert.equal(formatIp(ike!.remoteVip!), "10.9.0.1");
    const [c] = installedChildSas(value);
    assert.equal(c?.mode, "TUNNEL-in-UDP");
    assert.deepEqual(ts(c!.localTs), ["10.0.0.0/8"]);
    assert.deepEqual(ts(c!.remoteTs), ["10.9.0.1/32"]);
    assert.ok((c?.packetsIn ?? 0) > 0);
    const client = parseSaStatus(fixture("list-sas-client.txt"), "c.txt").value;
    assert.equal(formatIp(client.ikeSas[0]!.localVip!), "10.9.0.1");
  });
});

describe("parseXfrmPolicy / parseXfrmState", () => {
  it("reads policies: selectors, direction, priority, templates; socket policies apart", () => {
    const { value, diagnostics } = parseXfrmPolicy(fixture("xfrm-policy.txt"), "x.txt");
    assert.deepEqual(diagnostics, []);
    assert.equal(value.length, 6);
    const tun = tunnelPolicies(value).map((p) => [
      formatCidr(p.value.src),
      formatCidr(p.value.dst),
      p.value.dir,
      p.value.templates[0]?.mode,
    ]);
    assert.deepEqual(tun, [
      ["fd00:9::/64", "fd00:244::/48", "out", "tunnel"],
      ["10.244.1.0/24", "10.20.0.0/16", "out", "tunnel"],
      ["10.244.0.0/16", "10.9.0.0/24", "out", "tunnel"],
      ["10.9.0.0/24", "10.244.0.0/16", "fwd", "tunnel"],
      ["10.9.0.0/24", "10.244.0.0/16", "in", "tunnel"],
    ]);
    assert.equal(value[0]!.action, "block");
    assert.equal(value[2]!.dport, 5432);
    assert.equal(value[3]!.priority, 375423);
    assert.equal(formatIp(value[3]!.templates[0]!.dst!), "192.0.2.10");
  });
  it("reads a state block and reports a header that is not one", () => {
    const text = [
      "src 10.244.1.10 dst 192.0.2.10",
      "\tproto esp spi 0xc1a2b3c4 reqid 1 mode tunnel",
      "\treplay-window 0 flag af-unspec",
      "\tencap type espinudp sport 4500 dport 4500 addr 0.0.0.0",
      "\tsel src 0.0.0.0/0 dst 0.0.0.0/0 ",
      "garbage here",
    ].join("\n");
    const { value, diagnostics } = parseXfrmState(text, "s.txt");
    assert.equal(value[0]?.spi, "0xc1a2b3c4");
    assert.equal(value[0]?.mode, "tunnel");
    assert.equal(value[0]?.encap, "espinudp");
    assert.deepEqual(
      diagnostics.map((d) => d.source?.line),
      [6],
    );
  });
});

const skip = kernelSkip();
describe("ip xfrm on the real kernel", { skip }, () => {
  it("reads the policies and states ip xfrm prints for what was installed", async () => {
    const lab = await createLab({ prefix: "ppxf" });
    try {
      const ns = await lab.addNamespace("x");
      const add = async (argv: string[]) => {
        const r = await ns.exec(["ip", "xfrm", ...argv]);
        return r.code === 0 ? undefined : r.stderr.trim();
      };
      assert.equal(
        await add(
          "policy add src 10.9.0.0/24 dst 10.244.2.0/24 dir fwd tmpl src 192.0.2.10 dst 10.244.1.10 proto esp reqid 7 mode tunnel".split(
            " ",
          ),
        ),
        undefined,
      );
      const pol = parseXfrmPolicy((await ns.exec(["ip", "xfrm", "policy"])).stdout, "p");
      assert.deepEqual(
        pol.value.map((p) => [formatCidr(p.src), formatCidr(p.dst), p.dir, p.templates[0]?.reqid]),
        [["10.9.0.0/24", "10.244.2.0/24", "fwd", 7]],
      );
      // A state needs the kernel's ESP (CONFIG_INET_ESP); some kernels are built without it.
      const stateErr = await add(
        "state add src 10.244.1.10 dst 192.0.2.10 proto esp spi 0x00001234 reqid 7 mode tunnel enc cbc(aes) 0x00112233445566778899aabbccddeeff auth-trunc hmac(sha256) 0x00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff 128 sel src 10.244.0.0/16 dst 10.9.0.0/24".split(
          " ",
        ),
      );
      if (stateErr === undefined) {
        const st = parseXfrmState((await ns.exec(["ip", "xfrm", "state"])).stdout, "s");
        assert.deepEqual(st.diagnostics, []);
        assert.equal(st.value[0]?.spi, "0x00001234");
        assert.equal(formatCidr(st.value[0]!.selector!.dst), "10.9.0.0/24");
      } else {
        const esp = execFileSync("sh", [
          "-c",
          "zcat /proc/config.gz 2>/dev/null | grep INET_ESP= || true",
        ]);
        assert.match(stateErr, /not found|not supported/i, `state add failed: ${stateErr} ${esp}`);
      }
    } finally {
      await lab.destroy();
    }
  });
});
