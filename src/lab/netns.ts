/**
 * @module lab/netns — the network-namespace harness: creates named namespaces and veth links for one
 * run, runs commands inside them, and removes everything again (normal exit, SIGINT/SIGTERM, or at
 * the next start when the owning process died). An explicit I/O module: it spawns `ip` and touches
 * /run. The root namespace's links, addresses, routes and rules are never changed: veth pairs are
 * created inside the first namespace with their peer placed straight into the second.
 */
import { type ChildProcess, execFileSync, spawn as spawnChild } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ExecOptions {
  input?: string;
  timeoutMs?: number;
}

export interface Namespace {
  /** The namespace name, `<lab id>-<role>`, e.g. "pp3k9x-node". */
  readonly name: string;
  readonly role: string;
  /** Runs `ip netns exec NAME argv…`; never rejects for a non-zero exit (code 124 on timeout). */
  exec(argv: readonly string[], opts?: ExecOptions): Promise<ExecResult>;
  /**
   * Starts a long-running process inside the namespace; it is killed by pid at destroy. stdout
   * and stderr are pipes; stdin is ignored unless `{ stdin: "pipe" }`.
   */
  spawn(argv: readonly string[], opts?: { stdin?: "pipe" | "ignore" }): ChildProcess;
}

export interface Lab {
  /** Short unique run id, e.g. "pp3k9x"; every namespace name starts with `<id>-`. */
  readonly id: string;
  readonly namespaces: readonly Namespace[];
  addNamespace(role: string): Promise<Namespace>;
  /**
   * A veth pair between two namespaces: `aIf` inside `a`, `bIf` inside `b`, both left down. The
   * pair is created inside `a` with its peer moved into `b` in the same call, so it never exists
   * in the root namespace and its names cannot collide with other runs (each run has its own
   * namespaces); names must be at most 15 characters (IFNAMSIZ).
   */
  link(a: Namespace, aIf: string, b: Namespace, bIf: string): Promise<void>;
  /** Idempotent: kills spawned processes (and anything else left inside), deletes namespaces. */
  destroy(): Promise<void>;
  /**
   * Keeps the lab after this process exits (`podpath lab up`): no destroy at exit, spawned
   * processes detached, the state file marked `kept` with `note`. Removed by removeLab (`lab down`).
   */
  keep(note: string): void;
}

/** Where runs record their owner pid: `<id>.pid` holding `pid starttime`. */
export const LAB_STATE_DIR = "/run/podpath-lab";
const NETNS_DIR = "/run/netns";
const DEFAULT_PREFIX = "pp";
const DEFAULT_TIMEOUT_MS = 30_000;

export class LabError extends Error {
  override readonly name = "LabError";
  readonly code: "ERR_LAB_UNAVAILABLE" | "ERR_LAB_COMMAND" | "ERR_LAB_USAGE";
  constructor(code: LabError["code"], message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** Why a lab cannot run here ("needs root (CAP_NET_ADMIN)", …), or undefined when it can. */
export function labUnavailableReason(): string | undefined {
  if (process.platform !== "linux") return "needs Linux (network namespaces)";
  if (!hasCapNetAdmin()) return "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create namespaces";
  try {
    execFileSync("ip", ["-V"], { stdio: "ignore" });
  } catch {
    return "needs iproute2 (`ip` not found on PATH)";
  }
  return undefined;
}

function hasCapNetAdmin(): boolean {
  try {
    const status = readFileSync("/proc/self/status", "utf8");
    const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(status);
    if (!m?.[1]) return false;
    const caps = BigInt(`0x${m[1]}`);
    // capability(7): CAP_NET_ADMIN = 12, CAP_SYS_ADMIN = 21 (`ip netns add` mounts)
    return (caps & (1n << 12n)) !== 0n && (caps & (1n << 21n)) !== 0n;
  } catch {
    return false;
  }
}

/** Runs a command (no shell) and collects its output; resolves on exit, timeout or spawn error. */
export function runCommand(
  argv: readonly string[],
  opts: ExecOptions & { onSpawn?: (c: ChildProcess) => void } = {},
): Promise<ExecResult> {
  const [cmd, ...args] = argv;
  if (cmd === undefined) return Promise.resolve({ code: 127, stdout: "", stderr: "empty argv" });
  return new Promise((resolve) => {
    const child = spawnChild(cmd, args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    let settled = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const finish = (code: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    };
    child.on("error", (e) => {
      stderr += String(e.message);
      finish(127);
    });
    child.on("close", (code, signal) => {
      if (timedOut) stderr += `\ntimed out after ${opts.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms`;
      finish(timedOut ? 124 : (code ?? (signal ? 128 : 1)));
    });
    child.stdin.on("error", () => {});
    child.stdin.end(opts.input ?? "");
    opts.onSpawn?.(child);
  });
}

/**
 * Runs `argv` in `ns` (with `input` on stdin) and returns its stdout; a non-zero exit throws,
 * naming the command, the namespace and the command's stderr.
 */
export async function mustExec(
  ns: Namespace,
  argv: readonly string[],
  input?: string,
): Promise<string> {
  const r = await ns.exec(argv, input === undefined ? {} : { input });
  if (r.code !== 0) {
    throw new Error(`${argv.join(" ")} in ${ns.name} exited ${r.code}: ${r.stderr.trim()}`);
  }
  return r.stdout;
}

async function must(argv: readonly string[], what: string): Promise<ExecResult> {
  const r = await runCommand(argv);
  if (r.code !== 0) {
    throw new LabError("ERR_LAB_COMMAND", `${what} failed: ${argv.join(" ")}: ${r.stderr.trim()}`);
  }
  return r;
}

const ROLE_RE = /^[a-z][a-z0-9-]{0,15}$/;
const IFNAME_RE = /^[A-Za-z0-9_.-]{1,15}$/;
const PREFIX_RE = /^[a-z][a-z0-9]{0,5}$/;

/** Live labs of this process, destroyed synchronously on exit and on SIGINT/SIGTERM. */
const live = new Set<LabImpl>();
let hooksInstalled = false;

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on("exit", () => {
    for (const lab of live) lab.destroySync();
  });
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.on(sig, () => {
      for (const lab of live) lab.destroySync();
      // With no other listener the default action (terminate) would have run; keep that behaviour.
      if (process.listenerCount(sig) === 1) {
        process.exitCode = 128 + (sig === "SIGINT" ? 2 : 15);
        process.exit();
      }
    });
  }
}

class NamespaceImpl implements Namespace {
  readonly name: string;
  readonly role: string;
  readonly children = new Set<ChildProcess>();
  constructor(name: string, role: string) {
    this.name = name;
    this.role = role;
  }
  exec(argv: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
    return runCommand(["ip", "netns", "exec", this.name, ...argv], opts);
  }
  spawn(argv: readonly string[], opts: { stdin?: "pipe" | "ignore" } = {}): ChildProcess {
    const child = spawnChild("ip", ["netns", "exec", this.name, ...argv], {
      stdio: [opts.stdin ?? "ignore", "pipe", "pipe"],
    });
    this.children.add(child);
    child.on("exit", () => this.children.delete(child));
    child.on("error", () => this.children.delete(child));
    return child;
  }
}

class LabImpl implements Lab {
  readonly id: string;
  readonly nsList: NamespaceImpl[] = [];
  private destroyed = false;
  private finished = false;
  constructor(id: string) {
    this.id = id;
  }
  get namespaces(): readonly Namespace[] {
    return this.nsList;
  }
  async addNamespace(role: string): Promise<Namespace> {
    if (this.destroyed) throw new LabError("ERR_LAB_USAGE", `lab ${this.id} was destroyed`);
    if (!ROLE_RE.test(role)) {
      throw new LabError("ERR_LAB_USAGE", `namespace role ${JSON.stringify(role)}: use [a-z0-9-]`);
    }
    const name = `${this.id}-${role}`;
    if (this.nsList.some((n) => n.name === name)) {
      throw new LabError("ERR_LAB_USAGE", `namespace role ${role} already exists in ${this.id}`);
    }
    // Synchronous on purpose: a signal handler cannot run between the namespace appearing and
    // it being recorded, so destroy on SIGINT/SIGTERM always knows every namespace.
    let failure: unknown;
    try {
      execFileSync("ip", ["netns", "add", name], { stdio: ["ignore", "ignore", "pipe"] });
    } catch (e) {
      failure = e;
    }
    const ns = new NamespaceImpl(name, role);
    if (existsSync(`${NETNS_DIR}/${name}`)) this.nsList.push(ns);
    if (failure !== undefined) {
      const stderr = String((failure as { stderr?: unknown }).stderr ?? "").trim();
      throw new LabError(
        "ERR_LAB_COMMAND",
        `creating namespace failed: ip netns add ${name}: ${stderr}`,
        {
          cause: failure,
        },
      );
    }
    await must(["ip", "-n", name, "link", "set", "lo", "up"], "bringing up lo");
    return ns;
  }
  async link(a: Namespace, aIf: string, b: Namespace, bIf: string): Promise<void> {
    for (const n of [aIf, bIf]) {
      if (!IFNAME_RE.test(n)) {
        throw new LabError(
          "ERR_LAB_USAGE",
          `interface name ${JSON.stringify(n)}: 1-15 of [A-Za-z0-9_.-]`,
        );
      }
    }
    for (const ns of [a, b]) {
      if (!this.nsList.includes(ns as NamespaceImpl)) {
        throw new LabError(
          "ERR_LAB_USAGE",
          `namespace ${ns.name} does not belong to lab ${this.id}`,
        );
      }
    }
    await must(
      [
        "ip",
        "-n",
        a.name,
        "link",
        "add",
        aIf,
        "type",
        "veth",
        "peer",
        "name",
        bIf,
        "netns",
        b.name,
      ],
      "creating veth pair",
    );
  }
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    // stays in `live` until done: a signal arriving meanwhile finishes the job synchronously
    const all = [...this.nsList];
    for (const ns of all) for (const c of ns.children) killTree(c.pid);
    await sleep(all.some((n) => n.children.size > 0) ? 100 : 0);
    for (const ns of all) {
      if (this.finished) return;
      for (const c of ns.children) killTree(c.pid, "SIGKILL");
      killNamespaceProcesses(ns.name);
      await runCommand(["ip", "netns", "del", ns.name]);
      removeEtcNetns(ns.name);
    }
    this.finish();
  }
  private finish(): void {
    this.finished = true;
    live.delete(this);
    removeLabTemp(this.id);
    rmSync(pidFile(this.id), { force: true });
  }
  keep(note: string): void {
    live.delete(this);
    for (const ns of this.nsList) {
      for (const c of ns.children) {
        c.stdout?.destroy();
        c.stderr?.destroy();
        c.unref();
      }
    }
    writeFileSync(pidFile(this.id), `kept ${JSON.stringify(note)}\n`);
  }
  /** The same, synchronously (for process exit and signals). */
  destroySync(): void {
    if (this.finished) return;
    this.destroyed = true;
    for (const ns of this.nsList) {
      for (const c of ns.children) killTree(c.pid, "SIGKILL");
      killNamespaceProcesses(ns.name);
      if (existsSync(`${NETNS_DIR}/${ns.name}`)) {
        try {
          execFileSync("ip", ["netns", "del", ns.name], { stdio: "ignore" });
        } catch {}
      }
      removeEtcNetns(ns.name);
    }
    this.finish();
  }
}

function killTree(pid: number | undefined, sig: NodeJS.Signals = "SIGTERM"): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, sig);
  } catch {}
}

/** Kills (by pid) every process still inside one of our namespaces, e.g. a daemon that forked. */
function killNamespaceProcesses(name: string): void {
  let out = "";
  try {
    out = execFileSync("ip", ["netns", "pids", name], { encoding: "utf8", stdio: "pipe" });
  } catch {
    return;
  }
  for (const p of out.split(/\s+/)) {
    const pid = Number(p);
    if (Number.isInteger(pid) && pid > 1 && pid !== process.pid) killTree(pid, "SIGKILL");
  }
}

/** `ip netns exec` bind-mounts /etc/netns/<name>/* over /etc; scenarios may create it. */
function removeEtcNetns(name: string): void {
  rmSync(`/etc/netns/${name}`, { recursive: true, force: true });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

const pidFile = (id: string) => `${LAB_STATE_DIR}/${id}.pid`;

/** Temporary folders of a lab (keys, configs) are named `podpath-<id>-…` in the temp folder. */
const TEMP_RE = /^podpath-(pp[a-z0-9]{4})-/;

/**
 * A new private (0700) temporary folder for one lab, `podpath-<id>-<purpose>-XXXXXX`: removed with
 * the lab, and at the next start when the run was killed, as its namespaces are.
 */
export function labTempDir(lab: Pick<Lab, "id">, purpose: string): string {
  return mkdtempSync(join(tmpdir(), `podpath-${lab.id}-${purpose}-`));
}

/** Removes the temporary folders of lab `id` (its private keys among them). */
function removeLabTemp(id: string): void {
  let names: string[] = [];
  try {
    names = readdirSync(tmpdir());
  } catch {
    return;
  }
  for (const n of names) {
    if (n.startsWith(`podpath-${id}-`)) rmSync(join(tmpdir(), n), { recursive: true, force: true });
  }
}

/** The kernel's start time of a process (field 22 of /proc/PID/stat), to tell pid reuse apart. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // the command name (field 2) may contain spaces and parentheses: split after the last ')'
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return rest[19];
  } catch {
    return undefined;
  }
}

/** Whether a process exists and is not a zombie (state Z or X in /proc/PID/stat). */
export function isProcessRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** Whether the process that wrote a pid file (`pid starttime`) is still running. */
export function isOwnerAlive(content: string): boolean {
  const [pidText, start] = content.trim().split(/\s+/);
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0 || !isProcessRunning(pid)) return false;
  const now = processStartTime(pid);
  return now !== undefined && (start === undefined || now === start);
}

function listNetns(): string[] {
  try {
    return readdirSync(NETNS_DIR);
  } catch {
    return [];
  }
}

/** A lab id recorded in the state directory, and whether its owner still runs. */
export interface LabRecord {
  readonly id: string;
  readonly ownerPid: number;
  readonly alive: boolean;
  /** Kept by `lab up` until `lab down`; never removed as stale. */
  readonly kept: boolean;
  /** What `keep(note)` recorded. */
  readonly note?: string;
  readonly namespaces: readonly string[];
}

/** All labs recorded in the state directory (any owner). */
export function listLabs(): LabRecord[] {
  let files: string[] = [];
  try {
    files = readdirSync(LAB_STATE_DIR).filter((f) => f.endsWith(".pid"));
  } catch {
    return [];
  }
  const netns = listNetns();
  return files.map((f) => {
    const id = f.slice(0, -4);
    let content = "";
    try {
      content = readFileSync(`${LAB_STATE_DIR}/${f}`, "utf8");
    } catch {}
    const kept = content.startsWith("kept");
    let note: string | undefined;
    if (kept) {
      try {
        note = String(JSON.parse(content.slice(4).trim()));
      } catch {}
    }
    return {
      id,
      ownerPid: kept ? 0 : Number(content.trim().split(/\s+/)[0]),
      alive: !kept && isOwnerAlive(content),
      kept,
      ...(note === undefined ? {} : { note }),
      namespaces: netns.filter((n) => n.startsWith(`${id}-`)),
    };
  });
}

/** Removes one recorded lab's namespaces (and the processes inside them) and its pid file. */
export function removeLab(id: string): void {
  for (const name of listNetns().filter((n) => n.startsWith(`${id}-`))) {
    killNamespaceProcesses(name);
    try {
      execFileSync("ip", ["netns", "del", name], { stdio: "ignore" });
    } catch {}
    removeEtcNetns(name);
  }
  removeLabTemp(id);
  rmSync(pidFile(id), { force: true });
  rmSync(`${LAB_STATE_DIR}/${id}.json`, { force: true });
}

/**
 * Removes labs whose owner process is dead. Live owners' labs are left alone, so concurrent runs
 * never remove each other's. Returns the ids removed.
 */
export function removeStaleLabs(): string[] {
  const removed: string[] = [];
  const labs = listLabs();
  for (const rec of labs) {
    if (rec.alive || rec.kept) continue;
    removeLab(rec.id);
    removed.push(rec.id);
  }
  // Namespaces named like a default-prefix lab but with no pid file: the pid file is written
  // before the first namespace and removed after the last, so no live run owns these.
  // Temporary folders too (a lab's keys): they are made after the pid file, like namespaces.
  const recorded = new Set(labs.map((l) => l.id));
  let temps: string[] = [];
  try {
    temps = readdirSync(tmpdir());
  } catch {}
  const orphans = new Set(
    [
      ...listNetns().map((n) => /^(pp[a-z0-9]{4})-/.exec(n)?.[1]),
      ...temps.map((n) => TEMP_RE.exec(n)?.[1]),
    ].filter((id): id is string => id !== undefined && !recorded.has(id)),
  );
  for (const id of orphans) {
    if (existsSync(pidFile(id))) continue;
    removeLab(id);
    removed.push(id);
  }
  return removed;
}

/**
 * Creates a lab (after removing stale labs of dead runs) and registers it for destruction at
 * process exit and on SIGINT/SIGTERM. Throws LabError ERR_LAB_UNAVAILABLE without privileges.
 * @example
 *   const lab = await createLab();
 *   const [pod, node] = [await lab.addNamespace("pod"), await lab.addNamespace("node")];
 *   await lab.link(pod, "eth0", node, "veth-pod");
 *   try { ... } finally { await lab.destroy(); }
 */
export async function createLab(opts: { prefix?: string } = {}): Promise<Lab> {
  const reason = labUnavailableReason();
  if (reason) throw new LabError("ERR_LAB_UNAVAILABLE", `podpath lab ${reason}`);
  const prefix = opts.prefix ?? DEFAULT_PREFIX;
  if (!PREFIX_RE.test(prefix)) {
    throw new LabError("ERR_LAB_USAGE", `lab prefix ${JSON.stringify(prefix)}: 1-6 of [a-z0-9]`);
  }
  mkdirSync(LAB_STATE_DIR, { recursive: true, mode: 0o755 });
  removeStaleLabs();
  const existing = new Set(listNetns());
  let id = "";
  for (let i = 0; i < 100; i++) {
    const candidate = prefix + randomId(4);
    if ([...existing].some((n) => n.startsWith(`${candidate}-`))) continue;
    try {
      // the pid file is written before any namespace exists, so a crash never leaves orphans
      writeFileSync(pidFile(candidate), `${process.pid} ${processStartTime(process.pid) ?? ""}\n`, {
        flag: "wx",
      });
      id = candidate;
      break;
    } catch {}
  }
  if (!id) throw new LabError("ERR_LAB_COMMAND", "could not allocate a unique lab id");
  const lab = new LabImpl(id);
  live.add(lab);
  installExitHooks();
  return lab;
}

function randomId(n: number): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  return [...randomBytes(n)].map((b) => alphabet[b % alphabet.length]).join("");
}
