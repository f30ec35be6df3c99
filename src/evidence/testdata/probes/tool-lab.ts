/**
 * @module evidence/testdata/probes/tool-lab — runs the probe tools for real, in network namespaces
 * built for the run (client → router → server), and returns each command with its output, plus
 * what the transcript reader must make of it. Used by probe-tools.kernel.test.ts; run as a script
 * (root) to regenerate tools-real.txt beside it:
 * `node --import tsx src/evidence/testdata/probes/tool-lab.ts`
 */
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createLab, type Lab, type Namespace } from "../../../lab/netns.ts";
import { formatIp } from "../../../net/cidr.ts";
import type { ProbeCommand, ProbeResult, ProbeTool } from "../../probes.ts";

/** What the reader must find in one command's output. */
export interface Expect {
  readonly tool: ProbeTool;
  readonly target?: string;
  /** One result, or the results allowed where the host decides (name failures). */
  readonly result: ProbeResult | readonly ProbeResult[];
  readonly port?: number;
  readonly status?: string;
  /** The address that answered (echo replier, or the router that sent the ICMP error). */
  readonly replyFrom?: string;
  readonly answers?: readonly string[];
  readonly dnsServer?: string;
  /** The first silent hop of a hop list. */
  readonly silentFrom?: number;
}

export interface ToolProbe {
  /** As a person types it. */
  readonly command: string;
  readonly expect: Expect;
  readonly needs?: "ipv6";
}

export interface ToolRun {
  readonly command: string;
  readonly output: string;
  readonly expect: Expect;
}

/** The lab's addresses: the client's router answers; past it, 10.76/24 is silent, 10.75/24 is refused. */
export const ADDR = {
  client: "10.71.0.1",
  router: "10.71.0.2",
  routerFar: "10.72.0.1",
  server: "10.72.0.2",
  servfailDns: "10.72.0.4",
  silent: "10.76.0.5",
  noRoute: "10.75.0.5",
  client6: "fd71::1",
  router6: "fd71::2",
} as const;

const NAME_FAILURE = ["no-server", "nxdomain"] as const;
const A = ADDR;

export const TOOL_PROBES: readonly ToolProbe[] = [
  // ping (iputils), ping6
  {
    command: `ping -c 2 -i 0.2 ${A.server}`,
    expect: { tool: "ping", target: A.server, result: "replies", replyFrom: A.server },
  },
  {
    command: `ping -c 1 -W 1 ${A.silent}`,
    expect: { tool: "ping", target: A.silent, result: "timeout" },
  },
  {
    command: `ping -c 1 -W 1 ${A.noRoute}`,
    expect: { tool: "ping", target: A.noRoute, result: "unreachable", replyFrom: A.router },
  },
  {
    command: `ping6 -c 2 -i 0.2 ${A.router6}`,
    expect: { tool: "ping", target: A.router6, result: "replies", replyFrom: A.router6 },
    needs: "ipv6",
  },
  // traceroute (Linux), tracepath (iputils), mtr --report
  {
    command: `traceroute -n -w 1 -q 1 ${A.server}`,
    expect: { tool: "traceroute", target: A.server, result: "replies", replyFrom: A.server },
  },
  {
    command: `traceroute -n -w 1 -q 1 -m 3 ${A.silent}`,
    expect: { tool: "traceroute", target: A.silent, result: "timeout", silentFrom: 2 },
  },
  {
    command: `traceroute -n -w 1 -q 1 -m 3 ${A.noRoute}`,
    expect: { tool: "traceroute", target: A.noRoute, result: "unreachable", replyFrom: A.router },
  },
  {
    command: `tracepath -n ${A.server}`,
    expect: { tool: "tracepath", target: A.server, result: "replies", replyFrom: A.server },
  },
  {
    command: `tracepath -n -m 2 ${A.silent}`,
    expect: { tool: "tracepath", target: A.silent, result: "timeout", silentFrom: 2 },
  },
  {
    command: `tracepath -n -m 3 ${A.noRoute}`,
    expect: { tool: "tracepath", target: A.noRoute, result: "unreachable", replyFrom: A.router },
  },
  {
    command: "tracepath -m 2 no.such.host.invalid",
    expect: { tool: "tracepath", target: "no.such.host.invalid", result: NAME_FAILURE },
  },
  {
    command: `mtr -r -n -c 2 -i 0.2 --gracetime 1 ${A.server}`,
    expect: { tool: "mtr", target: A.server, result: "replies", replyFrom: A.server },
  },
  {
    command: `mtr -r -n -c 1 -i 0.2 --gracetime 1 -m 3 ${A.silent}`,
    expect: { tool: "mtr", target: A.silent, result: "timeout", silentFrom: 2 },
  },
  {
    command: `mtr --report -n -c 1 -i 0.2 --gracetime 1 -m 3 ${A.noRoute}`,
    expect: { tool: "mtr", target: A.noRoute, result: "unreachable", replyFrom: A.router },
  },
  {
    command: "mtr -r -c 1 --gracetime 1 no.such.host.invalid",
    expect: { tool: "mtr", target: "no.such.host.invalid", result: NAME_FAILURE },
  },
  // DNS: dig, host (BIND), nslookup (BusyBox) against lab/dns-responder
  {
    command: `dig @${A.server} web.probe.test +tries=1 +time=1`,
    expect: { tool: "dig", target: "web.probe.test", result: "ok", answers: [A.server] },
  },
  {
    command: `host web.probe.test ${A.server}`,
    expect: {
      tool: "host",
      target: "web.probe.test",
      result: "ok",
      answers: [A.server],
      dnsServer: A.server,
    },
  },
  {
    command: `host nope.probe.test ${A.server}`,
    expect: { tool: "host", target: "nope.probe.test", result: "nxdomain", status: "NXDOMAIN" },
  },
  {
    command: `host -t AAAA web.probe.test ${A.server}`,
    expect: { tool: "host", target: "web.probe.test", result: "nxdomain", status: "NOERROR" },
  },
  {
    command: `host web.probe.test ${A.servfailDns}`,
    expect: { tool: "host", target: "web.probe.test", result: "error", status: "SERVFAIL" },
  },
  {
    command: `host -W 1 web.probe.test ${A.silent}`,
    expect: { tool: "host", target: "web.probe.test", result: "no-server" },
  },
  {
    command: `host -v web.probe.test ${A.server}`,
    expect: { tool: "host", target: "web.probe.test", result: "ok", answers: [A.server] },
  },
  {
    command: `busybox nslookup web.probe.test ${A.server}`,
    expect: { tool: "nslookup", target: "web.probe.test", result: "ok", answers: [A.server] },
  },
  // HTTP: curl, GNU wget, BusyBox wget
  {
    command: `curl -sS -o /dev/null -w '%{http_code}\\n' http://${A.server}:8080/`,
    expect: { tool: "curl", target: A.server, result: "ok", port: 8080, status: "200" },
  },
  {
    command: `wget -O /dev/null http://${A.server}:8080/`,
    expect: { tool: "wget", target: A.server, result: "ok", port: 8080, status: "200" },
  },
  {
    command: `wget -O /dev/null http://${A.server}:8080/missing`,
    expect: { tool: "wget", target: A.server, result: "ok", port: 8080, status: "404" },
  },
  {
    command: `wget -S --spider http://${A.server}:8080/`,
    expect: { tool: "wget", target: A.server, result: "ok", port: 8080, status: "200" },
  },
  {
    command: `wget -T 1 -t 1 -O /dev/null http://${A.server}:9091/`,
    expect: { tool: "wget", target: A.server, result: "refused", port: 9091 },
  },
  {
    command: `wget -T 1 -t 1 -O /dev/null http://${A.silent}/`,
    expect: { tool: "wget", target: A.silent, result: "timeout", port: 80 },
  },
  {
    command: "wget -t 1 -O /dev/null http://no.such.host.invalid/",
    expect: { tool: "wget", target: "no.such.host.invalid", result: NAME_FAILURE, port: 80 },
  },
  {
    command: `busybox wget -O /dev/null http://${A.server}:8080/`,
    expect: { tool: "wget", target: A.server, result: "ok", port: 8080 },
  },
  {
    command: `busybox wget -q -O - http://${A.server}:8080/missing`,
    expect: { tool: "wget", target: A.server, result: "ok", port: 8080, status: "404" },
  },
  {
    command: `busybox wget -O /dev/null http://${A.server}:9091/`,
    expect: { tool: "wget", target: A.server, result: "refused", port: 9091 },
  },
  // TCP: nc (OpenBSD), ncat (Nmap), telnet (inetutils, BusyBox)
  {
    command: `nc -vz -w 1 ${A.server} 9090`,
    expect: { tool: "nc", target: A.server, result: "ok", port: 9090 },
  },
  {
    command: `ncat -v -z ${A.server} 9090`,
    expect: { tool: "nc", target: A.server, result: "ok", port: 9090 },
  },
  {
    command: `ncat -v -w 1 ${A.server} 9091`,
    expect: { tool: "nc", target: A.server, result: "refused", port: 9091 },
  },
  {
    command: `ncat -v -w 1 ${A.silent} 80`,
    expect: { tool: "nc", target: A.silent, result: "timeout", port: 80 },
  },
  {
    command: `telnet ${A.server} 9090`,
    expect: { tool: "telnet", target: A.server, result: "ok", port: 9090 },
  },
  {
    command: `telnet ${A.server} 9091`,
    expect: { tool: "telnet", target: A.server, result: "refused", port: 9091 },
  },
  {
    command: `telnet ${A.silent} 80`,
    expect: { tool: "telnet", target: A.silent, result: "timeout", port: 80 },
  },
  {
    command: `telnet ${A.noRoute} 80`,
    expect: { tool: "telnet", target: A.noRoute, result: "unreachable", port: 80 },
  },
  {
    command: `busybox telnet ${A.server} 9091`,
    expect: { tool: "telnet", target: A.server, result: "refused", port: 9091 },
  },
  // the client's route
  {
    command: `ip route get ${A.server}`,
    expect: { tool: "ip-route", target: A.server, result: "ok" },
  },
];

/** Asserts that the reader made of `c` what `e` says. */
export function assertExpected(c: ProbeCommand, e: Expect): void {
  const at = `${c.command} (line ${c.source.line})`;
  assert.equal(c.tool, e.tool, at);
  if (e.target !== undefined) assert.equal(c.target, e.target, at);
  const allowed: readonly ProbeResult[] = typeof e.result === "string" ? [e.result] : e.result;
  assert.ok(allowed.includes(c.result), `${at}: ${c.result}, expected ${allowed.join(" or ")}`);
  if (e.port !== undefined) assert.equal(c.port, e.port, at);
  if (e.status !== undefined) assert.equal(c.status, e.status, at);
  if (e.replyFrom !== undefined) assert.equal(c.replyFrom && formatIp(c.replyFrom), e.replyFrom, at);
  if (e.answers !== undefined) assert.deepEqual(c.answers?.map(formatIp), e.answers, at);
  if (e.dnsServer !== undefined) {
    assert.equal(c.dnsServer && formatIp(c.dnsServer), e.dnsServer, at);
  }
  if (e.silentFrom !== undefined) {
    const first = c.hops?.find((h) => h.silent);
    assert.equal(first?.hop, e.silentFrom, at);
    // the deciding line is the first silent hop's
    assert.match(c.resultSource.text ?? "", new RegExp(`^\\s*${e.silentFrom}\\b`), at);
  }
  // the deciding line is an output line of this command (or the command line itself)
  assert.ok(c.resultSource.line >= c.source.line, at);
}

/** The programs the lab runs; a missing one fails the kernel test with its name (CI installs them). */
export const TOOL_PROGRAMS = [
  "ping",
  "traceroute",
  "tracepath",
  "mtr",
  "dig",
  "host",
  "curl",
  "wget",
  "nc",
  "ncat",
  "telnet",
  "busybox",
] as const;

const HTTP_SERVER = `
const http = require("node:http");
http.createServer((req, res) => {
  const ok = req.url === "/";
  res.writeHead(ok ? 200 : 404, { "content-type": "text/plain" });
  res.end(ok ? "ok\\n" : "missing\\n");
}).listen(8080, process.argv[1], () => process.stdout.write("ready\\n"));
`;

async function must(ns: Namespace, argv: readonly string[]): Promise<void> {
  const r = await ns.exec(argv, { timeoutMs: 15_000 });
  if (r.code !== 0) throw new Error(`${argv.join(" ")} in ${ns.name}: ${r.stderr.trim()}`);
}

/** Resolves when a spawned process prints `ready`. */
function ready(child: ReturnType<Namespace["spawn"]>, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`${what} not ready: ${seen}`)), 15_000);
    const on = (d: Buffer) => {
      seen += d.toString();
      if (/ready/.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", (d: Buffer) => {
      seen += d.toString();
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited ${code}: ${seen}`));
    });
  });
}

/** Is IPv6 usable in namespaces here? (Some kernels boot with it disabled.) */
export function hasIpv6(): boolean {
  return existsSync("/proc/sys/net/ipv6");
}

/** Builds client → router → server with the services the probes reach. */
async function build(lab: Lab, ipv6: boolean): Promise<Namespace> {
  const client = await lab.addNamespace("client");
  const router = await lab.addNamespace("router");
  const server = await lab.addNamespace("server");
  await lab.link(client, "eth0", router, "eth0");
  await lab.link(router, "eth1", server, "eth0");
  const steps: [Namespace, string][] = [
    [client, "ip link set lo up"],
    [client, "ip link set eth0 up"],
    [client, `ip addr add ${A.client}/24 dev eth0`],
    [client, `ip route add default via ${A.router}`],
    // a connect to a silent address gives up after ~3 s (1 s, then 2 s), not two minutes
    [client, "sysctl -qw net.ipv4.tcp_syn_retries=1"],
    // the host's resolver is out of the lab's reach: the client refuses its own queries to it, so
    // a name failure is told at once rather than after the resolver's 5 s timeout
    [client, "sysctl -qw net.ipv4.icmp_ratelimit=0"],
    [
      client,
      "iptables -A OUTPUT -p udp --dport 53 ! -d 10.72.0.0/24 -j REJECT --reject-with icmp-port-unreachable",
    ],
    [
      client,
      "iptables -A OUTPUT -p tcp --dport 53 ! -d 10.72.0.0/24 -j REJECT --reject-with tcp-reset",
    ],
    [router, "ip link set lo up"],
    [router, "ip link set eth0 up"],
    [router, "ip link set eth1 up"],
    [router, `ip addr add ${A.router}/24 dev eth0`],
    [router, `ip addr add ${A.routerFar}/24 dev eth1`],
    [router, "sysctl -qw net.ipv4.ip_forward=1"],
    // every probe runs at once: ICMP errors must not be rate limited away
    [router, "sysctl -qw net.ipv4.icmp_ratelimit=0"],
    [router, `ip route add 10.76.0.0/24 via ${A.server}`],
    // 10.75/24 is refused with "net unreachable" by a firewall rule, not by a missing route: the
    // kernel rate-limits routing errors per sender (net.ipv4.route.error_cost, a host-wide setting)
    // and the probes run at once; REJECT's ICMP follows icmp_ratelimit, set per namespace above
    [router, `ip route add 10.75.0.0/24 via ${A.server}`],
    [router, "iptables -A FORWARD -d 10.75.0.0/24 -j REJECT --reject-with icmp-net-unreachable"],

    [server, "ip link set lo up"],
    [server, "ip link set eth0 up"],
    [server, `ip addr add ${A.server}/24 dev eth0`],
    [server, `ip addr add ${A.servfailDns}/24 dev eth0`],
    [server, `ip route add default via ${A.routerFar}`],
    [server, "sysctl -qw net.ipv4.ip_forward=1"],
    [server, "sysctl -qw net.ipv4.icmp_ratelimit=0"],
    // past the server, 10.76/24 is dropped without a word: the silent hop
    [server, "ip route add blackhole 10.76.0.0/24"],
  ];
  if (ipv6) {
    steps.push(
      [client, "sysctl -qw net.ipv6.conf.all.disable_ipv6=0"],
      [router, "sysctl -qw net.ipv6.conf.all.disable_ipv6=0"],
      [client, `ip -6 addr add ${A.client6}/64 dev eth0 nodad`],
      [router, `ip -6 addr add ${A.router6}/64 dev eth0 nodad`],
    );
  }
  for (const [ns, cmd] of steps) await must(ns, cmd.split(" "));
  const responder = fileURLToPath(new URL("../../../lab/dns-responder.ts", import.meta.url));
  const node = [process.execPath, "--import", "tsx", responder];
  await Promise.all([
    ready(server.spawn([...node, A.server, "53", "ok", `web.probe.test=${A.server}`]), "dns"),
    ready(server.spawn([...node, A.servfailDns, "53", "servfail"]), "servfail dns"),
    ready(server.spawn([process.execPath, "-e", HTTP_SERVER, A.server]), "http"),
  ]);
  server.spawn(["nc", "-lk", A.server, "9090"]);
  // wait until the listener accepts
  for (let i = 0; ; i++) {
    const r = await client.exec(["nc", "-z", "-w", "1", A.server, "9090"], { timeoutMs: 5_000 });
    if (r.code === 0) break;
    if (i > 50) throw new Error(`nc listener on ${A.server}:9090 never accepted: ${r.stderr}`);
    await new Promise((res) => setImmediate(res));
  }
  return client;
}

/** Runs `jobs` with at most `limit` at once, keeping their order. */
async function pool<T, R>(items: readonly T[], limit: number, job: (t: T) => Promise<R>) {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await job(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: limit }, worker));
  return out;
}

/**
 * Runs every probe in the client namespace (a shell runs the line as typed, stderr with stdout,
 * stdin empty) and returns the outputs. Needs root; the lab is removed before it returns.
 */
export async function runToolLab(opts: { prefix?: string } = {}): Promise<ToolRun[]> {
  const ipv6 = hasIpv6();
  const lab = await createLab({ prefix: opts.prefix ?? "ppt" });
  try {
    const client = await build(lab, ipv6);
    const probes = TOOL_PROBES.filter((p) => ipv6 || p.needs !== "ipv6");
    return await pool(probes, 12, async (p) => {
      const r = await client.exec(["sh", "-c", `${p.command} 2>&1 </dev/null`], {
        timeoutMs: 30_000,
      });
      return { command: p.command, output: r.stdout.replace(/\n+$/, ""), expect: p.expect };
    });
  } finally {
    await lab.destroy();
  }
}

/** The runs as one transcript in the canonical form: `$ command`, then its output. */
export function transcriptOf(runs: readonly ToolRun[]): string {
  const lines = [`# client: lab-client vpn-address: ${A.client}`];
  for (const r of runs) lines.push(`$ ${r.command}`, ...(r.output ? r.output.split("\n") : []));
  return `${lines.join("\n")}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const runs = await runToolLab();
  const out = fileURLToPath(new URL("./tools-real.txt", import.meta.url));
  writeFileSync(out, transcriptOf(runs));
  process.stdout.write(`wrote ${out} (${runs.length} commands)\n`);
}
