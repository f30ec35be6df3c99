import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { formatIp } from "../net/cidr.ts";
import { classifyLine } from "./probe-prompt.ts";
import {
  PROBE_RESULTS,
  type ProbeCommand,
  parseProbeJson,
  parseProbeTranscript,
  splitWords,
  toolOf,
} from "./probes.ts";
import { fits, PROMPT_STYLES, projectAll, restyle } from "./testdata/probes/prompt-styles.ts";
import { assertExpected, TOOL_PROBES } from "./testdata/probes/tool-lab.ts";

const dir = new URL("./testdata/probes/", import.meta.url);
const read = (name: string) => readFileSync(new URL(name, dir), "utf8");
const brief = (c: ProbeCommand) => [c.tool, c.target, c.result];

describe("parseProbeTranscript on real Linux tool output", () => {
  const { value, diagnostics } = parseProbeTranscript(read("linux-real.txt"), "probes/linux.txt");
  const cmds = value.commands;

  it("reads the client header and every command", () => {
    assert.equal(value.client?.name, "ns-a");
    assert.equal(formatIp(value.client!.vpnAddress!), "10.99.0.1");
    assert.equal(cmds.length, 30);
  });

  it("classifies iputils ping: replies, timeout, ICMP errors, local unreachable, name failure", () => {
    assert.deepEqual(cmds.slice(0, 6).map(brief), [
      ["ping", "10.99.0.2", "replies"],
      ["ping", "10.98.0.5", "timeout"],
      ["ping", "10.97.0.5", "unreachable"],
      ["ping", "10.99.0.77", "unreachable"],
      ["ping", "10.50.0.1", "unreachable"],
      ["ping", "no.such.host.invalid", "no-server"],
    ]);
    assert.deepEqual(cmds[0]!.timingsMs, [0.353, 0.053, 0.058]);
    assert.equal(cmds[0]!.sent, 3);
    assert.equal(cmds[1]!.received, 0);
    assert.equal(formatIp(cmds[2]!.replyFrom!), "10.99.0.2");
    assert.match(cmds[2]!.resultSource.text!, /Destination Net Unreachable/);
    assert.equal(formatIp(cmds[3]!.replyFrom!), "10.99.0.1");
  });

  it("classifies dig: answer, NXDOMAIN, +short, SERVFAIL, timeout and refused servers", () => {
    assert.deepEqual(cmds.slice(6, 12).map(brief), [
      ["dig", "web.vpn.test", "ok"],
      ["dig", "nope.vpn.test", "nxdomain"],
      ["dig", "web.vpn.test", "ok"],
      ["dig", "web.vpn.test", "error"],
      ["dig", "web.vpn.test", "no-server"],
      ["dig", "web.vpn.test", "no-server"],
    ]);
    assert.deepEqual(cmds[6]!.answers!.map(formatIp), ["10.99.0.2"]);
    assert.equal(formatIp(cmds[6]!.dnsServer!), "10.99.0.2");
    assert.deepEqual(cmds[6]!.timingsMs, [4]);
    assert.equal(cmds[9]!.status, "SERVFAIL");
    assert.equal(formatIp(cmds[10]!.dnsServer!), "10.98.0.9");
  });

  it("classifies nslookup", () => {
    assert.deepEqual(cmds.slice(12, 16).map(brief), [
      ["nslookup", "web.vpn.test", "ok"],
      ["nslookup", "nope.vpn.test", "nxdomain"],
      ["nslookup", "web.vpn.test", "error"],
      ["nslookup", "web.vpn.test", "no-server"],
    ]);
    assert.deepEqual(cmds[12]!.answers!.map(formatIp), ["10.99.0.2"]);
    assert.equal(cmds[14]!.status, "SERVFAIL");
  });

  it("classifies curl: status codes, refused (-v), unreachable (-v), timeouts, name failure", () => {
    assert.deepEqual(cmds.slice(16, 26).map(brief), [
      ["curl", "10.99.0.2", "ok"],
      ["curl", "10.99.0.2", "ok"],
      ["curl", "10.99.0.2", "ok"],
      ["curl", "10.99.0.2", "ok"],
      ["curl", "10.99.0.2", "error"],
      ["curl", "10.99.0.2", "refused"],
      ["curl", "10.98.0.5", "unreachable"],
      ["curl", "10.98.0.5", "timeout"],
      ["curl", "no.such.host.invalid", "nxdomain"],
      ["curl", "10.97.0.5", "timeout"],
    ]);
    assert.equal(cmds[16]!.status, "200");
    assert.equal(cmds[17]!.status, "200");
    assert.equal(cmds[17]!.port, 8080);
    assert.equal(cmds[25]!.port, 80);
    assert.deepEqual(cmds[23]!.timingsMs, [2001]);
    assert.ok(
      diagnostics.some(
        (d) => d.code === "PROBE_AMBIGUOUS" && d.source?.line === cmds[20]!.resultSource.line,
      ),
    );
  });

  it("classifies nc -vz and reads ip route", () => {
    assert.deepEqual(cmds.slice(26, 29).map(brief), [
      ["nc", "10.99.0.2", "ok"],
      ["nc", "10.99.0.2", "refused"],
      ["nc", "10.98.0.5", "timeout"],
    ]);
    assert.equal(cmds[26]!.port, 9090);
    const route = cmds[29]!;
    assert.equal(route.tool, "ip-route");
    assert.deepEqual(
      route.routes!.map((r) => [r.destination, r.via && formatIp(r.via), r.dev]),
      [
        ["10.97.0.0/24", "10.99.0.2", "eth0"],
        ["10.98.0.0/24", "10.99.0.2", "eth0"],
        ["10.99.0.0/24", undefined, "eth0"],
      ],
    );
  });

  it("reads `ip route get` answers with the snapshot's route reader, cited in the transcript", () => {
    const t = [
      "$ ip route get 10.96.0.10",
      "10.96.0.10 via 10.8.0.1 dev tun0 src 10.8.0.6 uid 0 ",
      "    cache ",
      "$ ip route get 10.8.0.6",
      "local 10.8.0.6 dev lo table local src 10.8.0.6 uid 0 ",
      "    cache <local> ",
      "$ ip route get 10.20.0.1",
      "RTNETLINK answers: Network is unreachable",
    ].join("\n");
    const { value, diagnostics } = parseProbeTranscript(t, "probes/get.txt");
    assert.deepEqual(
      diagnostics.filter((d) => d.severity !== "info"),
      [],
    );
    const [svc, local, none] = value.commands;
    assert.deepEqual(
      svc!.routes!.map((r) => [r.destination, r.via && formatIp(r.via), r.dev, r.source.line]),
      [["10.96.0.10", "10.8.0.1", "tun0", 2]],
    );
    assert.equal(svc!.routes![0]!.route?.src && formatIp(svc!.routes![0]!.route.src), "10.8.0.6");
    assert.equal(svc!.result, "ok");
    assert.deepEqual(
      local!.routes!.map((r) => [r.destination, r.route?.table, r.source.text]),
      [["local 10.8.0.6", "local", "local 10.8.0.6 dev lo table local src 10.8.0.6 uid 0 "]],
    );
    assert.equal(none!.result, "unreachable");
    assert.equal(none!.resultSource.line, 8);
  });

  it("cites the command line and the deciding output line", () => {
    const text = read("linux-real.txt").split(/\r?\n/);
    for (const c of cmds) {
      assert.equal(text[c.source.line - 1], c.source.text);
      assert.match(c.source.text!, /^\$ /);
      assert.equal(
        text[c.resultSource.line - 1],
        c.resultSource.text ?? text[c.resultSource.line - 1],
      );
      assert.ok(c.resultSource.line >= c.source.line);
    }
  });
});

describe("parseProbeTranscript on macOS, Windows and BusyBox formats", () => {
  it("reads macOS ping", () => {
    const { value } = parseProbeTranscript(read("macos-ping.txt"), "p.txt");
    assert.deepEqual(value.commands.map(brief), [
      ["ping", "10.8.0.1", "replies"],
      ["ping", "10.96.0.10", "timeout"],
      ["ping", "10.44.0.9", "unreachable"],
      ["ping", "nope.cluster.local", "nxdomain"],
    ]);
    assert.equal(formatIp(value.commands[2]!.replyFrom!), "10.8.0.1");
  });

  it("reads Windows prompts, ping, nslookup and tracert (unreachable replies are not replies)", () => {
    const { value } = parseProbeTranscript(read("windows-ping.txt"), "p.txt");
    assert.deepEqual(value.commands.map(brief), [
      ["ping", "10.8.0.1", "replies"],
      ["ping", "10.0.3.17", "timeout"],
      ["ping", "10.44.0.9", "unreachable"],
      ["ping", "web.example.invalid", "nxdomain"],
      ["nslookup", "web.example.invalid", "no-server"],
      ["traceroute", "10.0.3.17", "timeout"],
    ]);
    assert.deepEqual(value.commands[0]!.timingsMs, [24, 1, 25, 23]);
    assert.equal(value.commands[2]!.received, 0);
    const trace = value.commands[5]!;
    assert.equal(formatIp(trace.replyFrom!), "10.8.0.1");
    assert.equal(trace.hops!.length, 3);
    assert.equal(trace.resultSource.text?.trim().startsWith("2"), true);
  });

  it("reads BusyBox ping and traceroute", () => {
    const { value } = parseProbeTranscript(read("busybox-ping.txt"), "p.txt");
    assert.deepEqual(value.commands.map(brief), [
      ["ping", "10.8.0.1", "replies"],
      ["ping", "10.0.3.17", "timeout"],
      ["ping", "nope", "nxdomain"],
      ["traceroute", "10.0.3.17", "timeout"],
    ]);
    assert.deepEqual(value.commands[0]!.timingsMs, [0.08, 0.102]);
  });
});

describe("transcript conventions", () => {
  it("takes the hop role from a trailing comment", () => {
    const t = "$ ping -c 1 -W 2 10.8.0.1   # peer\n$ ping -c 1 10.0.3.17 # role: pod-ip\n";
    const { value } = parseProbeTranscript(t, "p.txt");
    assert.deepEqual(
      value.commands.map((c) => [c.role, c.target]),
      [
        ["peer", "10.8.0.1"],
        ["pod-ip", "10.0.3.17"],
      ],
    );
  });

  it("reports a file without commands, and an unknown tool, as diagnostics", () => {
    const a = parseProbeTranscript("hello\nworld\n", "p.txt");
    assert.equal(a.diagnostics[0]?.code, "PROBE_NO_COMMANDS");
    assert.equal(a.diagnostics[0]?.severity, "error");
    const b = parseProbeTranscript("$ arping 10.0.0.1\nsomething\n", "p.txt");
    assert.equal(b.value.commands[0]?.result, "error");
    assert.equal(b.diagnostics[0]?.code, "PROBE_UNKNOWN_TOOL");
  });

  it("splits quoted words like a shell, without expansion", () => {
    assert.deepEqual(splitWords(`curl -w "%{http_code}\\n" 'a b' c\\ d $HOME`), [
      "curl",
      "-w",
      "%{http_code}n",
      "a b",
      "c d",
      "$HOME",
    ]);
  });

  it("reads the JSON form and cites the JSON file's own lines", () => {
    const transcript = [
      "# client: laptop vpn-address: 10.8.0.6",
      "$ ping -c 1 10.8.0.1  # peer",
      "64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=2.0 ms",
    ];
    const text = JSON.stringify(
      { schemaVersion: 1, tool: "podpath", question: "probe", transcript },
      null,
      2,
    );
    const { value, diagnostics } = parseProbeJson(text, "probes/p.json");
    assert.deepEqual(diagnostics, []);
    const c = value.commands[0]!;
    assert.equal(c.result, "replies");
    const lines = text.split("\n");
    assert.match(lines[c.source.line - 1]!, /\$ ping -c 1 10\.8\.0\.1/);
    assert.match(lines[c.resultSource.line - 1]!, /64 bytes from/);
    assert.equal(parseProbeJson("{", "x.json").diagnostics[0]?.code, "PROBE_JSON");
    assert.equal(parseProbeJson("{}", "x.json").diagnostics[0]?.code, "PROBE_JSON");
  });
});

describe("parseProbeTranscript on real tracepath, mtr, host, wget, telnet, ncat and BusyBox output", () => {
  const text = read("tools-real.txt");
  const { value, diagnostics } = parseProbeTranscript(text, "probes/tools.txt");

  it("reads every command the lab ran, as the lab expects", () => {
    const byCommand = new Map(value.commands.map((c) => [c.command, c]));
    let checked = 0;
    for (const p of TOOL_PROBES) {
      const c = byCommand.get(p.command);
      if (!c && p.needs === "ipv6") continue;
      assert.ok(c, `not in tools-real.txt: ${p.command}`);
      assertExpected(c, p.expect);
      checked++;
    }
    assert.equal(checked, value.commands.length);
  });

  it("reads them without warnings", () => {
    assert.deepEqual(
      diagnostics.filter((d) => d.severity !== "info"),
      [],
    );
  });

  it("keeps tracepath's and mtr's hops, silent ones marked", () => {
    const silent = value.commands.find((c) => c.command === "tracepath -n -m 2 10.76.0.5")!;
    assert.deepEqual(
      silent.hops!.map((h) => [h.hop, h.address && formatIp(h.address), h.silent]),
      [
        [1, "10.71.0.2", false],
        [2, undefined, true],
      ],
    );
    const mtr = value.commands.find((c) => c.tool === "mtr" && c.result === "replies")!;
    assert.deepEqual(
      mtr.hops!.map((h) => h.address && formatIp(h.address)),
      ["10.71.0.2", "10.72.0.2"],
    );
    assert.equal(formatIp(mtr.replyFrom!), "10.72.0.2");
  });

  it("says why an mtr list that ends at a router is read as unreachable", () => {
    const c = value.commands.find((x) => x.tool === "mtr" && x.result === "unreachable")!;
    assert.ok(
      diagnostics.some(
        (d) => d.code === "PROBE_AMBIGUOUS" && d.source?.line === c.resultSource.line,
      ),
    );
  });
});

describe("transcripts as pasted: every prompt gives the same probes as the canonical $ form", () => {
  for (const fixture of ["linux-real.txt", "tools-real.txt"]) {
    const canonical = read(fixture);
    const base = parseProbeTranscript(canonical, "probes/t.txt");
    for (const style of PROMPT_STYLES) {
      if (!fits(canonical, style)) continue;
      it(`${fixture} behind ${style.name}`, () => {
        const styled = parseProbeTranscript(restyle(canonical, style), "probes/t.txt");
        assert.deepEqual(
          projectAll(styled.value, style.wrapsCommand === true),
          projectAll(base.value, style.wrapsCommand === true),
        );
        assert.deepEqual(styled.value.client, base.value.client);
        for (const c of styled.value.commands) assert.deepEqual(c.ranIn, style.ranIn);
        const codes = (d: typeof base.diagnostics) =>
          d
            .filter((x) => x.code !== "PROBE_SKIPPED_LINE")
            .map((x) => `${x.code}:${x.source?.line}`);
        assert.deepEqual(codes(styled.diagnostics), codes(base.diagnostics));
      });
    }
  }
});

describe("classifyLine", () => {
  const kind = (l: string) => {
    const k = classifyLine(l);
    return k.kind === "command" ? `command: ${k.command}` : k.kind;
  };

  it("reads a root prompt as a prompt only before a command it knows", () => {
    assert.equal(kind("# ping -c 1 10.8.0.1"), "command: ping -c 1 10.8.0.1");
    assert.equal(kind("# sysctl net.ipv4.ip_forward"), "command: sysctl net.ipv4.ip_forward");
    assert.equal(kind("# the laptop, on the VPN"), "skipped");
    assert.equal(kind("# Generated by iptables-save v1.8.9 on Tue"), "skipped");
    assert.equal(kind("# peer"), "skipped");
  });

  it("leaves tools' own output alone", () => {
    for (const l of [
      ";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 1",
      "; <<>> DiG 9.18.49 <<>> @10.72.0.2 web.probe.test",
      "PING 10.72.0.2 (10.72.0.2) 56(84) bytes of data.",
      "64 bytes from 10.72.0.2: icmp_seq=1 ttl=63 time=0.050 ms",
      "traceroute to 10.72.0.2 (10.72.0.2), 30 hops max, 60 byte packets",
      " 1  10.71.0.2  0.026 ms",
      "Address: 10.72.0.2#53",
      "Server:		10.72.0.2",
      "HOST: vm                          Loss%   Snt   Last   Avg  Best  Wrst StDev",
      "nc: connect to 10.98.0.5 port 80 (tcp) timed out: Operation now in progress",
      "curl: (7) Failed to connect to 10.99.0.2 port 9999 after 0 ms: Couldn't connect to server",
      "telnet: Unable to connect to remote host: Connection refused",
      "null                 100% |********************************|     3  0:00:00 ETA",
      "host is down, ping works",
      "Connecting to 10.72.0.2:8080... connected.",
      "$ ",
    ]) {
      assert.notEqual(kind(l).slice(0, 7), "command", l);
    }
  });

  it("takes a probe at the start of a line as a command when it names something to probe", () => {
    assert.equal(kind("ping -c 3 10.8.0.1"), "command: ping -c 3 10.8.0.1");
    assert.equal(
      kind("dig @10.96.0.10 web.demo.svc.cluster.local"),
      "command: dig @10.96.0.10 web.demo.svc.cluster.local",
    );
    assert.equal(kind("ip route get 10.96.0.10"), "command: ip route get 10.96.0.10");
    assert.equal(kind("curl http://web/"), "command: curl http://web/");
    assert.equal(kind("curl web"), "text"); // a bare word could be prose; behind a prompt it is read
    assert.equal(kind("$ curl web"), "command: curl web");
  });
});

describe("toolOf", () => {
  it("looks through sudo, timeout, kubectl exec and sh -c, and records the pod", () => {
    const t = (line: string) => {
      const r = toolOf(splitWords(line));
      return [r.tool, r.args.join(" "), r.ranIn];
    };
    assert.deepEqual(t("sudo -u root timeout 5 ping -c 1 10.8.0.1"), [
      "ping",
      "-c 1 10.8.0.1",
      undefined,
    ]);
    assert.deepEqual(t("kubectl exec -it openvpn-0 -n vpn -- ping -c 1 10.8.0.1"), [
      "ping",
      "-c 1 10.8.0.1",
      { pod: "openvpn-0", namespace: "vpn" },
    ]);
    assert.deepEqual(
      t("kubectl --context prod -n=vpn exec deploy/openvpn -c ovpn -- wget -qO- http://x/"),
      ["wget", "-qO- http://x/", { pod: "deploy/openvpn", namespace: "vpn", container: "ovpn" }],
    );
    assert.deepEqual(t(`kubectl exec pod/web-1 -- sh -c "nc -vz 10.0.0.1 80 && echo ok"`), [
      "nc",
      "-vz 10.0.0.1 80",
      { pod: "web-1" },
    ]);
    assert.deepEqual(t("kubectl exec web-1 curl -sS http://10.0.0.1/"), [
      "curl",
      "-sS http://10.0.0.1/",
      { pod: "web-1" },
    ]);
    assert.deepEqual(t("kubectl get pods -A"), ["unknown", "get pods -A", undefined]);
  });

  it("reads the probe up to a pipe, without redirections", () => {
    const c = parseProbeTranscript(
      "$ ping -c 1 10.8.0.1 2>&1 | tee out.txt\n64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=1 ms\n$ nc -vz 10.0.0.1 80 </dev/null > log # check\nConnection to 10.0.0.1 80 port [tcp/http] succeeded!\n",
      "p.txt",
    ).value.commands;
    assert.deepEqual(
      c.map((x) => [x.tool, x.target, x.port, x.result]),
      [
        ["ping", "10.8.0.1", undefined, "replies"],
        ["nc", "10.0.0.1", 80, "ok"],
      ],
    );
  });

  it("names the lines that look like a prompt but hold no command", () => {
    const { value, diagnostics } = parseProbeTranscript(
      [
        "# client: laptop vpn-address: 10.8.0.6",
        "# taken on the laptop, VPN up",
        "root@laptop:~# ping -c 1 -W 1 10.8.0.1",
        "PING 10.8.0.1 (10.8.0.1) 56(84) bytes of data.",
        "64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=2.0 ms",
        "# now the pod",
        "kubectl exec -n vpn openvpn-0 -- ping -c 1 -W 1 10.244.2.20",
        "PING 10.244.2.20 (10.244.2.20) 56(84) bytes of data.",
        "",
        "--- 10.244.2.20 ping statistics ---",
        "1 packets transmitted, 0 received, 100% packet loss, time 0ms",
      ].join("\n"),
      "probes/mixed.txt",
    );
    assert.equal(value.client?.name, "laptop");
    assert.deepEqual(
      value.commands.map((c) => [c.source.line, c.target, c.result, c.ranIn?.pod]),
      [
        [3, "10.8.0.1", "replies", undefined],
        [7, "10.244.2.20", "timeout", "openvpn-0"],
      ],
    );
    assert.deepEqual(
      diagnostics.filter((d) => d.code === "PROBE_SKIPPED_LINE").map((d) => d.source?.line),
      [2, 6],
    );
    assert.ok(diagnostics.every((d) => d.severity === "info"));
  });
});

describe("parseProbeTranscript fuzz", () => {
  const pieces = [
    "$ ",
    "ping ",
    "dig ",
    "curl ",
    "nc ",
    "traceroute ",
    "ip route ",
    "nslookup ",
    "-c ",
    "@",
    "10.8.0.1",
    " ",
    "\n",
    "From ",
    "Reply from ",
    "icmp_seq=1 ",
    "time=",
    "ms",
    "status: ",
    "(",
    ")",
    "*",
    "curl: (7) ",
    "packets transmitted, ",
    "0 received",
    "#",
    "'",
    '"',
    "\\",
    "[",
    "]",
    "via ",
    "dev ",
    ";; ",
    "Name:",
    "Address: ",
    "tcp-connect ",
    "resolve ",
    "connected in 3 ms",
    "refused (ECONNREFUSED) after 1 ms",
    " has address ",
    "NXDOMAIN (ENOTFOUND)",
    "timed out after 9 ms",
    "C:\\> ",
    "# ",
    "/ # ",
    "root@pod:/# ",
    "➜  ~ ",
    "kubectl exec -it p -n ns -- ",
    "sh -c '",
    "sudo ",
    "tracepath ",
    "mtr -r ",
    "host ",
    "wget ",
    "telnet ",
    " 1:  10.8.0.1  0.1ms reached",
    "  2.|-- ???  100.0  1  0.0  0.0  0.0  0.0  0.0",
    "Connecting to 10.8.0.1:80... failed: Connection refused.",
    "Host x not found: 3(NXDOMAIN)",
    "Trying 10.8.0.1...",
    "| ",
    "2>&1 ",
  ];
  it("never throws, and every result is one of the known results with a line in the text", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 300 }),
          fc.array(fc.constantFrom(...pieces), { maxLength: 80 }).map((a) => a.join("")),
        ),
        (text) => {
          const { value } = parseProbeTranscript(text, "f.txt");
          const n = text.split(/\r?\n/).length;
          for (const c of value.commands) {
            assert.ok(PROBE_RESULTS.includes(c.result));
            assert.ok(c.resultSource.line >= 1 && c.resultSource.line <= n);
          }
          parseProbeJson(text, "f.json");
        },
      ),
      { numRuns: 3000 },
    );
  });
});
