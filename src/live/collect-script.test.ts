import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { readIpRoute } from "../evidence/ip-route.ts";
import { readIpRule } from "../evidence/ip-rule.ts";
import { createLab, labUnavailableReason } from "../lab/netns.ts";
import { NODE_COMMANDS, NODE_SCRIPT, parseScriptOutput } from "./collect-commands.ts";
import { judge } from "./collect-exec.ts";

const scratch = mkdtempSync(join(tmpdir(), "podpath-script-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Stub tools: what each prints and how it exits, to run the real script under the real shell. */
const STUBS: Record<string, string> = {
  "iptables-save": `printf '*nat\\n:POSTROUTING ACCEPT [0:0]\\n-A POSTROUTING -j MASQUERADE\\nCOMMIT'`, // no final newline
  sysctl: `echo "net.ipv4.ip_forward = 1"; echo "sysctl: cannot stat /proc/sys/net/ipv4/conf/all/rp_filter: No such file or directory" >&2; exit 255`,
  // `ip -6 ...` as on a node booted with ipv6.disable=1
  ip: `case "$*" in route*) printf 'default via 10.0.0.1 dev eth0\\n\\n';; rule) printf '0:\\tfrom all lookup local\\n';; "-6 "*) echo 'RTNETLINK answers: Address family not supported by protocol' >&2; echo 'Dump terminated' >&2; exit 2;; *) printf '1: lo: <LOOPBACK>\\n';; esac`,
  conntrack: `echo "tcp 6 431999 ESTABLISHED src=10.4.0.12 dst=10.20.30.40"; echo "conntrack v1.4.7 (conntrack-tools): 1 flow entries have been shown." >&2`,
};

describe("NODE_SCRIPT under a real shell", () => {
  it("frames every command so that each section is byte-identical to running the command alone", () => {
    const bin = join(scratch, "bin");
    execFileSync("mkdir", ["-p", bin]);
    for (const [name, body] of Object.entries(STUBS)) {
      writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
      chmodSync(join(bin, name), 0o755);
    }
    // PATH without /usr/sbin: ip6tables-save is "not installed"; mktemp, cat, rm, printf stay
    const env = { PATH: `${bin}:/usr/bin:/bin` };
    const out = spawnSync("sh", ["-c", NODE_SCRIPT], { env });
    assert.equal(out.status, 0, out.stderr.toString());
    const sections = parseScriptOutput(out.stdout);
    assert.deepEqual(
      sections.map((s) => s.command),
      NODE_COMMANDS.map((c) => c.argv.join(" ")),
    );
    for (const c of NODE_COMMANDS) {
      const sec = sections.find((s) => s.command === c.argv.join(" "))!;
      const alone = spawnSync(c.argv[0]!, c.argv.slice(1), { env });
      if (alone.error) {
        assert.equal(sec.code, 127, c.argv[0]);
        assert.match(sec.stderr, /not found/);
        continue;
      }
      assert.equal(sec.code, alone.status, c.argv.join(" "));
      assert.ok(sec.stdout.equals(alone.stdout), `${c.argv.join(" ")} stdout differs`);
      assert.equal(sec.stderr, alone.stderr.toString());
    }
    // a node without IPv6: its `ip -6` commands are not available there, not failures
    const v6 = NODE_COMMANDS.filter((c) => c.argv[1] === "-6");
    assert.deepEqual(
      v6.map((c) => c.artifact),
      ["ip6-route", "ip6-rule"],
    );
    for (const c of v6) {
      const sec = sections.find((s) => s.command === c.argv.join(" "))!;
      const v = judge(c, { ...sec, timedOut: false }, 1000);
      assert.ok("why" in v && v.notAvailable === true, JSON.stringify(v));
      assert.match(v.why, /no IPv6.*: RTNETLINK answers: Address family not supported/);
    }
  });

  it("the parser recovers whatever arbitrary output and cut-offs give it, never throwing", () => {
    const framed = (cmd: string, body: Uint8Array, err: string, rc: number) =>
      Buffer.concat([
        Buffer.from(`\x1epodpath-begin ${cmd}\n`),
        body,
        Buffer.from(`\n\x1epodpath-stderr\n${err}\n\x1epodpath-end ${rc}\n`),
      ]);
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 200 }),
        fc.string({ maxLength: 40 }),
        fc.nat(255),
        fc.nat(400),
        (body, err, rc, cut) => {
          const clean = Buffer.from(body.filter((b) => b !== 0x1e));
          const all = Buffer.concat([
            framed("ip route", clean, err.replaceAll("\x1e", ""), rc),
            framed("ip addr", Buffer.from("x"), "", 0),
          ]);
          const whole = parseScriptOutput(all);
          assert.ok(whole[0]!.stdout.equals(clean));
          assert.equal(whole[0]!.code, rc);
          assert.equal(whole[1]!.code, 0);
          const partial = parseScriptOutput(all.subarray(0, Math.min(cut, all.length)));
          return (
            partial.length <= 2 &&
            partial.every((s) => s.code === undefined || Number.isInteger(s.code))
          );
        },
      ),
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (b) =>
        Array.isArray(parseScriptOutput(Buffer.from(b))),
      ),
    );
  });

  it("reads a network namespace's real iptables rules, IP sets, nftables, routes and sysctls as the commands print them", async (t) => {
    const why = labUnavailableReason();
    if (why !== undefined) {
      if (process.env["CI"]) assert.fail(`kernel test cannot run in CI: ${why}`);
      t.skip(why);
      return;
    }
    const lab = await createLab();
    try {
      const ns = await lab.addNamespace("node");
      const peer = await lab.addNamespace("peer");
      await lab.link(ns, "eth0", peer, "eth0");
      const setup = [
        ["ip", "link", "set", "lo", "up"],
        ["ip", "addr", "add", "10.128.0.20/24", "dev", "eth0"],
        ["ip", "link", "set", "eth0", "up"],
        ["ip", "route", "add", "10.20.0.0/16", "via", "10.128.0.1", "dev", "eth0", "onlink"],
        // policy routing: a table of its own and the rule that chooses it, in both families
        ["ip", "route", "add", "10.30.0.0/16", "via", "10.128.0.1", "dev", "eth0", "table", "100"],
        ["ip", "rule", "add", "from", "10.4.0.0/24", "lookup", "100", "pref", "100"],
        ["ip", "-6", "addr", "add", "fd00:128::20/64", "dev", "eth0", "nodad"],
        ["ip", "-6", "route", "add", "fd00:30::/48", "via", "fd00:128::1", "table", "100"],
        ["ip", "-6", "rule", "add", "from", "fd00:4::/64", "lookup", "100", "pref", "100"],
        ["iptables", "-w", "-t", "nat", "-N", "IP-MASQ"],
        [
          "iptables",
          "-w",
          "-t",
          "nat",
          "-A",
          "POSTROUTING",
          "-m",
          "addrtype",
          "!",
          "--dst-type",
          "LOCAL",
          "-j",
          "IP-MASQ",
        ],
        [
          "iptables",
          "-w",
          "-t",
          "nat",
          "-A",
          "IP-MASQ",
          "-d",
          "10.0.0.0/8",
          "-m",
          "comment",
          "--comment",
          "ip-masq-agent: local traffic is not subject to MASQUERADE",
          "-j",
          "RETURN",
        ],
        ["iptables", "-w", "-t", "nat", "-A", "IP-MASQ", "-j", "MASQUERADE"],
        // an IP set as Calico's Felix makes them, and an nftables table of its own
        ["ipset", "create", "cali40masq-ipam-pools", "hash:net", "family", "inet"],
        ["ipset", "add", "cali40masq-ipam-pools", "10.244.0.0/16"],
        ["nft", "add", "table", "inet", "podpath_test"],
        [
          "nft",
          "add",
          "chain",
          "inet",
          "podpath_test",
          "post",
          "{ type nat hook postrouting priority 100 ; }",
        ],
      ];
      for (const argv of setup) {
        const r = await ns.exec(argv);
        assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
      }
      const script = await ns.exec(["sh", "-c", NODE_SCRIPT]);
      assert.equal(script.code, 0, script.stderr);
      const sections = parseScriptOutput(Buffer.from(script.stdout));
      for (const argv of [
        ["iptables-save"],
        ["ip", "route", "show", "table", "all"],
        ["ip", "rule"],
        ["ip", "-6", "route", "show", "table", "all"],
        ["ip", "-6", "rule"],
        ["ip", "addr"],
        ["ipset", "save"],
        ["nft", "list", "ruleset"],
      ]) {
        const alone = await ns.exec(argv);
        const sec = sections.find((s) => s.command === argv.join(" "));
        assert.ok(sec, argv.join(" "));
        assert.equal(sec.code, alone.code);
        // iptables-save stamps the time; compare everything else
        const strip = (s: string) => s.replace(/^# (Generated|Completed) .*$/gm, "");
        assert.equal(strip(sec.stdout.toString("utf8")), strip(alone.stdout), argv.join(" "));
      }
      const ipt = sections.find((s) => s.command === "iptables-save")!.stdout.toString("utf8");
      assert.match(
        ipt,
        /-A IP-MASQ -d 10\.0\.0\.0\/8 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN/,
      );
      const out = (command: string) =>
        sections.find((s) => s.command === command)!.stdout.toString("utf8");
      // every table: the policy table's route and the kernel's local table
      assert.match(
        out("ip route show table all"),
        /^10\.30\.0\.0\/16 via 10\.128\.0\.1 dev eth0 table 100 /m,
      );
      assert.match(out("ip route show table all"), /^local 10\.128\.0\.20 dev eth0 table local /m);
      assert.match(out("ip rule"), /^100:\tfrom 10\.4\.0\.0\/24 lookup 100 ?$/m);
      assert.match(
        out("ip -6 route show table all"),
        /^fd00:30::\/48 via fd00:128::1 dev eth0 table 100 /m,
      );
      assert.match(out("ip -6 rule"), /^100:\tfrom fd00:4::\/64 lookup 100 ?$/m);
      // and the snapshot's readers take them as collected, every line, without a complaint
      for (const [command, family] of [
        ["ip route show table all", 4],
        ["ip -6 route show table all", 6],
      ] as const) {
        const r = readIpRoute(out(command), "ip-route.txt", { family });
        assert.deepEqual(r.diagnostics, [], command);
        assert.equal(r.value.length, out(command).trim().split("\n").length, command);
        assert.ok(
          r.value.some((x) => x.table === "local" && x.type === "local"),
          command,
        );
        assert.ok(
          r.value.some((x) => x.table === "100" && x.family === family),
          command,
        );
      }
      for (const command of ["ip rule", "ip -6 rule"]) {
        const r = readIpRule(out(command), "ip-rule.txt");
        assert.deepEqual(r.diagnostics, [], command);
        assert.ok(
          r.value.some((x) => x.priority === 100 && x.table === "100"),
          command,
        );
      }
      assert.match(
        sections.find((s) => s.command === "ipset save")!.stdout.toString("utf8"),
        /^create cali40masq-ipam-pools hash:net family inet .*\nadd cali40masq-ipam-pools 10\.244\.0\.0\/16$/m,
      );
      assert.match(
        sections.find((s) => s.command === "nft list ruleset")!.stdout.toString("utf8"),
        /table inet podpath_test \{\n\tchain post \{\n\t\ttype nat hook postrouting priority srcnat; policy accept;/,
      );
      assert.match(
        sections.find((s) => s.command.startsWith("sysctl"))!.stdout.toString(),
        /^net\.ipv4\.ip_forward = [01]$/m,
      );
    } finally {
      await lab.destroy();
    }
  });
});
