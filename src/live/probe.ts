/**
 * @module live/probe — probes from the VPN client outward (peer → pod IP → Service VIP → public
 * target, then the name), stopping at the first hop that does not answer unless asked to go on.
 * Uses the system's ping and dig when present, a TCP connect and Node's resolver otherwise. Every
 * probe is bounded (count and timeout) and only the named targets are probed. An explicit I/O
 * module: it spawns processes and opens sockets; the result is a transcript in the `probes/` form.
 */
import { spawn } from "node:child_process";
import { Resolver } from "node:dns/promises";
import { accessSync, constants } from "node:fs";
import { Socket } from "node:net";
import { delimiter, join } from "node:path";
import { HOP_ORDER, hopState, LAYER_OF } from "../cases/vpn/hops.ts";
import { type ConnectOutcome, connectLine } from "../evidence/probe-native.ts";
import { type ProbeRole, type ProbeTranscript, parseProbeTranscript } from "../evidence/probes.ts";
import {
  EXEC_OUTPUT_LIMIT_BYTES,
  type OutputTruncation,
  truncationWhy,
} from "../k8s/output-limit.ts";
import { formatIp, tryParseIp } from "../net/cidr.ts";

export interface ProbeTargets {
  readonly peer?: string;
  readonly podIp?: string;
  readonly serviceIp?: { readonly ip: string; readonly port?: number };
  readonly public?: string;
  readonly name?: string;
  readonly dnsServer?: string;
}

export interface ExecOutcome {
  readonly code: number;
  readonly output: string;
  /** Set when a stream passed the output limit: reading stopped and the command was ended. */
  readonly truncated?: OutputTruncation;
}

/** What the prober needs from the system; tests pass fakes. */
export interface ProbeSystem {
  readonly platform: NodeJS.Platform;
  has(program: string): boolean;
  exec(argv: readonly string[], timeoutMs: number): Promise<ExecOutcome>;
  connect(
    ip: string,
    port: number,
    timeoutMs: number,
  ): Promise<{ outcome: ConnectOutcome; ms: number; code?: string }>;
  resolve(
    name: string,
    server: string | undefined,
    timeoutMs: number,
  ): Promise<{ addresses: string[]; ms: number; code?: string }>;
}

export interface ProbeOptions {
  readonly timeoutMs: number;
  readonly count: number;
  /** Keep probing after the first hop that does not answer. */
  readonly all: boolean;
  readonly clientName?: string;
  readonly vpnAddress?: string;
  readonly signal?: AbortSignal;
  readonly onStep?: (line: string) => void;
}

export interface ProbeStepResult {
  readonly role: ProbeRole;
  readonly target: string;
  readonly result: string;
  readonly answered: boolean;
}

export interface ProbeRun {
  readonly transcript: string;
  readonly parsed: ProbeTranscript;
  readonly steps: readonly ProbeStepResult[];
  /** The first hop that did not answer, and the layer it points to. */
  readonly stoppedAt?: {
    readonly role: ProbeRole;
    readonly layer: string;
    readonly explain: string;
  };
}

/** The ping command line of each platform, bounded by count and per-reply timeout. */
export function pingArgv(
  platform: NodeJS.Platform,
  target: string,
  count: number,
  timeoutMs: number,
): string[] {
  const secs = String(Math.max(1, Math.ceil(timeoutMs / 1000)));
  if (platform === "win32") return ["ping", "-n", String(count), "-w", String(timeoutMs), target];
  if (platform === "darwin")
    return ["ping", "-c", String(count), "-t", String(Number(secs) * count), target];
  return ["ping", "-c", String(count), "-W", secs, target];
}

const shown = (argv: readonly string[]) =>
  argv
    .map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `"${a.replace(/(["\\$`])/g, "\\$1")}"`))
    .join(" ");

interface Step {
  readonly role: ProbeRole;
  readonly target: string;
  readonly run: () => Promise<{ command: string; output: string }>;
}

/** Probes the named targets in walk order and returns the transcript. */
export async function probeOutward(
  targets: ProbeTargets,
  sys: ProbeSystem,
  opts: ProbeOptions,
): Promise<ProbeRun> {
  const steps = probeSteps(targets, sys, opts);
  const header = `# client: ${opts.clientName ?? "client"}${opts.vpnAddress ? ` vpn-address: ${opts.vpnAddress}` : ""}`;
  const lines: string[] = [header];
  const results: ProbeStepResult[] = [];
  let stoppedAt: ProbeRun["stoppedAt"];
  for (const step of steps) {
    if (opts.signal?.aborted) break;
    const { command, output } = await step.run();
    const block = [
      `$ ${command}  # ${step.role}`,
      ...output
        .replace(/\n+$/, "")
        .split("\n")
        .filter((l, _i, a) => !(a.length === 1 && l === "")),
    ];
    lines.push(...block);
    opts.onStep?.(block[0]!);
    const parsed = parseProbeTranscript(block.join("\n"), "step").value.commands[0];
    const answered =
      parsed !== undefined &&
      (step.role === "name" ? parsed.result === "ok" : hopState(parsed) === "answered");
    results.push({
      role: step.role,
      target: step.target,
      result: parsed?.result ?? "error",
      answered,
    });
    if (!answered && stoppedAt === undefined) {
      stoppedAt = stopOf(step.role);
      if (!opts.all) break;
    }
  }
  const transcript = `${lines.join("\n")}\n`;
  return {
    transcript,
    parsed: parseProbeTranscript(transcript, "probe").value,
    steps: results,
    ...(stoppedAt ? { stoppedAt } : {}),
  };
}

/** Where the walk stopped when the step of `role` got no answer: the hop's layer, or DNS. */
function stopOf(role: ProbeRole): NonNullable<ProbeRun["stoppedAt"]> {
  const hop = HOP_ORDER.find((h) => h === role);
  return hop
    ? { role, ...LAYER_OF[hop] }
    : {
        role: "name",
        layer: "dns",
        explain:
          "name resolution: the DNS server the client uses and whether it is reachable through the tunnel",
      };
}

/** The steps for the targets named, in walk order: peer, pod, Service, public address, name. */
function probeSteps(targets: ProbeTargets, sys: ProbeSystem, opts: ProbeOptions): Step[] {
  const { timeoutMs, count } = opts;
  const ping = (role: ProbeRole, target: string): Step => ({
    role,
    target,
    run: async () => {
      if (sys.has("ping")) {
        const argv = pingArgv(sys.platform, target, count, timeoutMs);
        const r = await sys.exec(argv, timeoutMs * count + 2_000);
        return { command: shown(argv), output: r.output };
      }
      return tcp(target, 443);
    },
  });
  const tcp = async (ip: string, port: number) => {
    const r = await sys.connect(ip, port, timeoutMs);
    return { command: `tcp-connect ${ip} ${port}`, output: connectLine(r.outcome, r.ms, r.code) };
  };
  const steps: Step[] = [];
  if (targets.peer) steps.push(ping("peer", targets.peer));
  if (targets.podIp) steps.push(ping("pod-ip", targets.podIp));
  if (targets.serviceIp) {
    const { ip, port } = targets.serviceIp;
    steps.push(
      port === undefined
        ? ping("service-ip", ip)
        : { role: "service-ip", target: `${ip}:${port}`, run: () => tcp(ip, port) },
    );
  }
  if (targets.public) steps.push(ping("public", targets.public));
  if (targets.name) {
    const name = targets.name;
    steps.push({
      role: "name",
      target: name,
      run: () => lookUp(name, targets.dnsServer, sys, timeoutMs),
    });
  }
  return steps;
}

/** Looks `name` up with dig when the client has it, else with the system resolver. */
async function lookUp(
  name: string,
  server: string | undefined,
  sys: ProbeSystem,
  timeoutMs: number,
): Promise<{ command: string; output: string }> {
  if (sys.has("dig")) {
    const secs = String(Math.max(1, Math.ceil(timeoutMs / 1000)));
    const argv = ["dig", ...(server ? [`@${server}`] : []), name, `+time=${secs}`, "+tries=1"];
    const r = await sys.exec(argv, timeoutMs + 2_000);
    return { command: shown(argv), output: r.output };
  }
  const r = await sys.resolve(name, server, timeoutMs);
  const lines = r.addresses.map((a) => `${name} has ${a.includes(":") ? "IPv6 " : ""}address ${a}`);
  if (r.code) lines.push(`${resolveFailure(r.code)} (${r.code}) after ${r.ms} ms`);
  return {
    command: `resolve ${name}${server ? ` @${server}` : ""}`,
    output: lines.join("\n"),
  };
}

function resolveFailure(code: string): string {
  if (code === "ENOTFOUND") return "NXDOMAIN";
  if (code === "ENODATA") return "NODATA";
  if (code === "ESERVFAIL") return "SERVFAIL";
  if (code === "EREFUSED") return "REFUSED";
  if (code === "ETIMEOUT" || code === "ECONNREFUSED") return "no server reached";
  return "error";
}

function onPath(program: string, env: NodeJS.ProcessEnv): boolean {
  for (const dir of (env["PATH"] ?? "").split(delimiter)) {
    if (dir === "") continue;
    for (const ext of process.platform === "win32" ? [".exe", ".com"] : [""]) {
      try {
        accessSync(join(dir, program + ext), constants.X_OK);
        return true;
      } catch {
        // not here
      }
    }
  }
  return false;
}

/**
 * The real system: PATH lookup, child processes with a hard timeout and an output limit per
 * stream (`maxOutputBytes`, default k8s/output-limit EXEC_OUTPUT_LIMIT_BYTES: past it the child
 * is killed and its output ends with a line saying so), sockets, Node's resolver.
 */
export function realSystem(
  env: NodeJS.ProcessEnv = process.env,
  limits: { readonly maxOutputBytes?: number } = {},
): ProbeSystem {
  const limitBytes = limits.maxOutputBytes ?? EXEC_OUTPUT_LIMIT_BYTES;
  return {
    platform: process.platform,
    has: (p) => onPath(p, env),
    exec: (argv, timeoutMs) =>
      new Promise((resolve) => {
        const chunks: Buffer[] = [];
        const size = { stdout: 0, stderr: 0 };
        let truncated: OutputTruncation | undefined;
        const child = spawn(argv[0]!, argv.slice(1), {
          stdio: ["ignore", "pipe", "pipe"],
          env: { ...env, LC_ALL: "C" },
        });
        const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
        const keep = (stream: OutputTruncation["stream"]) => (b: Buffer) => {
          if (truncated) return;
          const room = limitBytes - size[stream];
          chunks.push(b.length <= room ? b : b.subarray(0, room));
          size[stream] += Math.min(b.length, room);
          if (b.length > room) {
            truncated = { stream, limitBytes };
            // stop reading: closing the pipes also ends a grandchild that holds them (SIGPIPE)
            child.stdout.destroy();
            child.stderr.destroy();
            child.kill("SIGKILL");
          }
        };
        child.stdout.on("data", keep("stdout"));
        child.stderr.on("data", keep("stderr"));
        child.on("error", (e) => {
          clearTimeout(timer);
          resolve({ code: 127, output: `${argv[0]}: ${e.message}` });
        });
        child.on("close", (code) => {
          clearTimeout(timer);
          const output = Buffer.concat(chunks).toString();
          if (!truncated) return resolve({ code: code ?? 124, output });
          const note = `podpath: ${argv[0]} ${truncationWhy(truncated)}`;
          resolve({ code: code ?? 124, output: `${output}\n${note}`, truncated });
        });
      }),
    connect: (ip, port, timeoutMs) =>
      new Promise((resolve) => {
        const start = Date.now();
        const sock = new Socket();
        const done = (outcome: ConnectOutcome, code?: string) => {
          sock.destroy();
          resolve({ outcome, ms: Date.now() - start, ...(code ? { code } : {}) });
        };
        sock.setTimeout(timeoutMs, () => done("timeout"));
        sock.once("connect", () => done("connected"));
        sock.once("error", (e: NodeJS.ErrnoException) => {
          const code = e.code ?? "error";
          if (code === "ECONNREFUSED") done("refused", code);
          else if (code === "EHOSTUNREACH" || code === "ENETUNREACH") done("unreachable", code);
          else if (code === "ETIMEDOUT") done("timeout");
          else done("error", code);
        });
        sock.connect({ host: ip, port });
      }),
    resolve: async (name, server, timeoutMs) => {
      const r = new Resolver({ timeout: timeoutMs, tries: 1 });
      if (server) r.setServers([server]);
      const start = Date.now();
      try {
        const addresses = await r.resolve4(name);
        return { addresses, ms: Date.now() - start };
      } catch (e) {
        return {
          addresses: [],
          ms: Date.now() - start,
          code: (e as NodeJS.ErrnoException).code ?? "error",
        };
      }
    },
  };
}

/** `10.96.0.20:80` → {ip, port}; undefined when the address is not one. */
export function parseIpPort(text: string): { ip: string; port?: number } | undefined {
  const m = /^\[?([0-9a-fA-F:.]+?)\]?(?::(\d{1,5}))?$/.exec(text);
  if (!m) return undefined;
  const ip = tryParseIp(m[1]!);
  if (!ip) {
    const whole = tryParseIp(text);
    return whole ? { ip: formatIp(whole) } : undefined;
  }
  const port = m[2] === undefined ? undefined : Number(m[2]);
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  return port === undefined ? { ip: formatIp(ip) } : { ip: formatIp(ip), port };
}
