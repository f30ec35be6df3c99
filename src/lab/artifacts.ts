/**
 * @module lab/artifacts — collects real artifacts from lab namespaces into a snapshot folder in
 * DESIGN.md's layout: kernel state (iptables-save, ip route, ip addr, sysctl, conntrack), tcpdump
 * captures with their `{point, phase}` sidecar, and probe transcripts as a person would paste them.
 * An explicit I/O module (runs commands in namespaces, writes files).
 */
import type { ChildProcess } from "node:child_process";
import { closeSync } from "node:fs";
import { createBeneath, writeBeneathCreating } from "../snapshot/out-folder.ts";
import type { Namespace } from "./netns.ts";

/** The sysctls a snapshot records: forwarding and reverse-path filtering decide a router's fate. */
export const SNAPSHOT_SYSCTLS = [
  "net.ipv4.ip_forward",
  "net.ipv4.conf.all.forwarding",
  "net.ipv4.conf.all.rp_filter",
  "net.ipv4.conf.default.rp_filter",
  "net.ipv6.conf.all.forwarding",
] as const;

/**
 * Writes a new file (creating its folders) and returns its path relative to `root`: never through
 * a link, never over a file already there (snapshot/out-folder).
 */
export function writeSnapshotFile(root: string, rel: string, content: string | Uint8Array): string {
  writeBeneathCreating(root, rel, content);
  return rel;
}

async function output(ns: Namespace, argv: readonly string[]): Promise<string> {
  const r = await ns.exec(argv, { timeoutMs: 15_000 });
  if (r.code !== 0) {
    throw new Error(`${argv.join(" ")} in ${ns.name} exited ${r.code}: ${r.stderr.trim()}`);
  }
  return r.stdout;
}

/** Which kernel artifacts to read from a namespace. */
export type KernelArtifact =
  | "iptables-save"
  | "ip6tables-save"
  | "ip-route"
  | "ip-addr"
  | "sysctl"
  | "conntrack";

const READERS: { [K in KernelArtifact]: readonly string[] } = {
  "iptables-save": ["iptables-save"],
  "ip6tables-save": ["ip6tables-save"],
  "ip-route": ["ip", "route", "show"],
  "ip-addr": ["ip", "addr", "show"],
  sysctl: ["sysctl", ...SNAPSHOT_SYSCTLS],
  conntrack: ["conntrack", "-L"],
};

/**
 * Reads kernel artifacts from `ns` into `<root>/<dir>/<artifact>.txt` (dir e.g. `nodes/gke-1` or
 * `pods/default/app`). Returns the relative paths written.
 */
export async function collectKernelState(
  ns: Namespace,
  root: string,
  dir: string,
  which: readonly KernelArtifact[],
): Promise<string[]> {
  const written: string[] = [];
  for (const a of which) {
    const text = await output(ns, READERS[a]);
    written.push(writeSnapshotFile(root, `${dir}/${a}.txt`, text));
  }
  return written;
}

/** A running tcpdump writing a pcap file. */
export interface Capture {
  readonly rel: string;
  stop(): Promise<void>;
}

/**
 * Starts `tcpdump -w` in `ns` and resolves once it is listening. `iface` "any" gives Linux cooked
 * v2 (SLL2) link headers, as `tcpdump -i any` on a node does. The sidecar
 * `captures/<name>.yaml` records where and when it was taken.
 */
export async function startCapture(
  ns: Namespace,
  root: string,
  name: string,
  opts: { iface: string; filter: string; point: string; phase: "before" | "after" },
): Promise<Capture> {
  const rel = `captures/${name}.pcap`;
  writeSnapshotFile(root, `captures/${name}.yaml`, `point: ${opts.point}\nphase: ${opts.phase}\n`);
  // the file is created here (no link followed); tcpdump writes into it by this process's
  // descriptor (/proc/PID/fd/N), so nothing put at its path meanwhile is ever opened
  const fd = createBeneath(root, rel);
  // -Z root: tcpdump otherwise drops to its own user and may not write into the output folder.
  // --immediate-mode: without it libpcap's TPACKET_V3 ring hands packets over in blocks (after
  // about a second), and the packets of the last block are lost when tcpdump is stopped.
  const child = ns.spawn([
    "tcpdump",
    "-Z",
    "root",
    "--immediate-mode",
    "-U",
    "-n",
    "-s",
    "256",
    "-i",
    opts.iface,
    "-w",
    `/proc/${process.pid}/fd/${fd}`,
    ...opts.filter.split(" "),
  ]);
  const closeFd = () => {
    try {
      closeSync(fd);
    } catch {}
  };
  try {
    await waitForStderr(child, /listening on/, 5_000);
  } catch (e) {
    closeFd();
    throw e;
  }
  return {
    rel,
    stop: async () => {
      await stopProcess(child);
      closeFd();
    },
  };
}

function waitForStderr(child: ChildProcess, re: RegExp, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let err = "";
    const timer = setTimeout(() => reject(new Error(`tcpdump did not start: ${err}`)), timeoutMs);
    child.stderr?.setEncoding("utf8").on("data", (d: string) => {
      err += d;
      if (re.test(err)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`tcpdump exited ${code}: ${err.trim()}`));
    });
  });
}

/** SIGINT (tcpdump flushes and exits), then SIGKILL if it lingers; resolves when it has exited. */
export function stopProcess(child: ChildProcess, graceMs = 2_000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    child.on("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGINT");
  });
}

/** One probe as typed at a shell, and its real output (stdout then stderr, as a terminal shows). */
export interface ProbeStep {
  /** The command line shown after `$ `. */
  readonly shown: string;
  /** What actually runs (no shell). */
  readonly argv: readonly string[];
  readonly input?: string;
  readonly timeoutMs?: number;
  /** Show stderr before stdout (nc -v prints "Connection ... succeeded!" before the data). */
  readonly stderrFirst?: boolean;
}

export interface LabProbeOutput {
  readonly shown: string;
  readonly code: number;
  readonly output: string;
}

/** Runs probe steps in `ns` and renders them as a DESIGN.md transcript. */
export async function runProbes(
  ns: Namespace,
  steps: readonly ProbeStep[],
): Promise<{ transcript: string; results: LabProbeOutput[] }> {
  const results: LabProbeOutput[] = [];
  for (const s of steps) {
    const opts = {
      timeoutMs: s.timeoutMs ?? 15_000,
      ...(s.input === undefined ? {} : { input: s.input }),
    };
    const r = await ns.exec(s.argv, opts);
    const output = s.stderrFirst ? r.stderr + r.stdout : r.stdout + r.stderr;
    results.push({ shown: s.shown, code: r.code, output });
  }
  return { transcript: renderTranscript(results), results };
}

/** `$ cmd` lines followed by their output, each output ending in a newline. */
export function renderTranscript(results: readonly LabProbeOutput[], header?: string): string {
  const lines: string[] = header === undefined ? [] : [header];
  for (const r of results) {
    lines.push(`$ ${r.shown}`);
    const out = r.output.replace(/\n+$/, "");
    if (out !== "") lines.push(out);
  }
  return `${lines.join("\n")}\n`;
}
