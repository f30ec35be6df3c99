/**
 * @module capture/test-helpers/forms-lab — real captures for the tcpdump text forms (tests only,
 * root): two throwaway network namespaces with ICMP, UDP, TCP and IPv6 traffic between them,
 * captured by the real tcpdump as LINUX_SLL2 (`-i any`), LINUX_SLL (`-y LINUX_SLL -i any`) and
 * Ethernet (one interface), and the names the capturing namespace resolves its addresses to
 * (/etc/netns/<ns>/hosts, removed with the namespace), so tcpdump without `-n` prints names.
 */
import { execFileSync, spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { createLab, type Lab, type Namespace } from "../../lab/netns.ts";
import { stop, waitFor } from "./tcpdump-process.ts";

export const A = "10.99.0.1";
export const B = "10.99.0.2";
/** A second address of B that has a one-label name. */
export const B_GW = "10.99.0.3";
/** A third address of B with no name: lines mix names and numbers. */
export const B_PLAIN = "10.99.0.4";
export const A6 = "fd00:99::1";
export const B6 = "fd00:99::2";

/** What the capturing namespace's /etc/hosts says (fd00:99::2 and 10.99.0.4 stay unnamed). */
export const HOST_NAMES: Readonly<Record<string, string>> = {
  [A]: "node-a.internal",
  [B]: "db-b.corp.example",
  [B_GW]: "gw",
  [A6]: "node-a6.internal",
};

/** A service only the capturing namespace's /etc/services knows (tcpdump prints its name). */
export const LOCAL_SERVICE = { name: "podpath-test", port: 7777 } as const;

export interface FormsCaptures {
  readonly lab: Lab;
  /** The capturing namespace: `ip netns exec` there resolves HOST_NAMES and LOCAL_SERVICE. */
  readonly a: Namespace;
  readonly b: Namespace;
  /** `-i any` (LINUX_SLL2), `-y LINUX_SLL -i any`, `-i va` (Ethernet). */
  readonly files: { readonly sll2: string; readonly sll: string; readonly eth: string };
  /** Interface names of namespace a by index, as SLL2 records carry them. */
  readonly ifnames: ReadonlyMap<number, string>;
  /** What each tcpdump said it dropped (sll2, sll, eth): 0, or the captures miss packets. */
  readonly dropped: readonly number[];
  /**
   * A terminal's view of `tcpdump -i any -l` run live beside the captures (no `-n`: names):
   * its stderr (`verbose output suppressed`, `listening on`, the counts at the end) and stdout
   * in the order they were written.
   */
  readonly live: string;
  /** The command that printed `live`. */
  readonly liveCommand: readonly string[];
}

/** Waits (polling) until `ok()` holds. */
async function until(ok: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error("timeout waiting for tcpdump to start");
    await new Promise((r) => setTimeout(r, 20));
  }
}

const SERVER = `
import socket, select
ls = []
for port in (5432, 80):
  s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
  s.bind(("0.0.0.0", port)); s.listen(4); ls.append(s)
print("ready", flush=True)
served = 0
while served < 2:
  r, _, _ = select.select(ls, [], [])
  for s in r:
    c, _ = s.accept(); c.recv(100); c.sendall(b"pong" * 20); c.close(); served += 1
`;

const CLIENT = `
import socket, struct, time
def talk(addr, port):
  c = socket.create_connection((addr, port)); c.sendall(b"ping")
  while c.recv(1000): pass
  c.close()
talk("${B}", 5432)
talk("${B_GW}", 80)
for addr, port, fam in (("${B}", 9998, socket.AF_INET), ("${B}", ${LOCAL_SERVICE.port}, socket.AF_INET), ("${B6}", 22, socket.AF_INET6)):
  r = socket.socket(fam)
  try: r.connect((addr, port))
  except OSError: pass
  r.close()
# A DNS query to a closed port 53 (port unreachable quotes it), and a datagram to a numeric port.
q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\\x07example\\x03com\\x00" + struct.pack("!HH", 1, 1)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(q, ("${B}", 53)); time.sleep(0.3)
u.sendto(b"hello", ("${B_PLAIN}", 9999)); time.sleep(0.3)
`;

/**
 * Builds the lab, runs the traffic while three tcpdumps write to `dir`, and returns the lab (the
 * caller destroys it; that also removes /etc/netns/<ns>).
 */
export async function makeFormsCaptures(dir: string): Promise<FormsCaptures> {
  const lab = await createLab({ prefix: "ppfrm" });
  try {
    const a = await lab.addNamespace("a");
    const b = await lab.addNamespace("b");
    await lab.link(a, "va", b, "vb");
    const setup: [Namespace, string[]][] = [
      [a, ["ip", "addr", "add", `${A}/24`, "dev", "va"]],
      [a, ["ip", "-6", "addr", "add", `${A6}/64`, "dev", "va", "nodad"]],
      [a, ["ip", "link", "set", "va", "up"]],
      [b, ["ip", "addr", "add", `${B}/24`, "dev", "vb"]],
      [b, ["ip", "addr", "add", `${B_GW}/24`, "dev", "vb"]],
      [b, ["ip", "addr", "add", `${B_PLAIN}/24`, "dev", "vb"]],
      [b, ["ip", "-6", "addr", "add", `${B6}/64`, "dev", "vb", "nodad"]],
      [b, ["ip", "link", "set", "vb", "up"]],
    ];
    for (const [ns, argv] of setup) {
      const r = await ns.exec(argv);
      if (r.code !== 0) throw new Error(`${argv.join(" ")}: ${r.stderr}`);
    }
    // ip netns exec bind-mounts /etc/netns/<ns>/* over /etc/*: names, a local service, and no
    // DNS (resolution must answer from the files at once, never wait for a server).
    const etc = `/etc/netns/${a.name}`;
    mkdirSync(etc, { recursive: true });
    writeFileSync(
      join(etc, "hosts"),
      `127.0.0.1 localhost\n${Object.entries(HOST_NAMES)
        .map(([ip, name]) => `${ip} ${name}`)
        .join("\n")}\n`,
    );
    writeFileSync(join(etc, "nsswitch.conf"), "hosts: files\nservices: files\n");
    writeFileSync(join(etc, "resolv.conf"), "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n");
    writeFileSync(
      join(etc, "services"),
      `${readFileSync("/etc/services", "utf8")}\n${LOCAL_SERVICE.name} ${LOCAL_SERVICE.port}/tcp\n`,
    );
    const files = {
      sll2: join(dir, "any-sll2.pcap"),
      sll: join(dir, "any-sll.pcap"),
      eth: join(dir, "va-eth.pcap"),
    };
    // -i any drops packets with the default buffer when three captures run at once.
    const common = ["--immediate-mode", "-U", "-n", "-B", "8192"];
    const caps = [
      a.spawn(["tcpdump", "-i", "any", ...common, "-w", files.sll2]),
      a.spawn(["tcpdump", "-i", "any", "-y", "LINUX_SLL", ...common, "-w", files.sll]),
      a.spawn(["tcpdump", "-i", "va", ...common, "-w", files.eth]),
    ];
    const stderr = caps.map(() => "");
    for (const [i, c] of caps.entries())
      c.stderr?.on("data", (d: Buffer) => {
        stderr[i] += d.toString();
      });
    // The live one writes stdout and stderr into one file, in order, as a terminal shows them.
    const liveCommand = ["tcpdump", "-i", "any", "-l", "-B", "8192"];
    const liveFile = join(dir, "live.txt");
    const liveFd = openSync(liveFile, "w");
    const live = spawn("ip", ["netns", "exec", a.name, ...liveCommand], {
      stdio: ["ignore", liveFd, liveFd],
    });
    closeSync(liveFd);
    const liveExit = new Promise<void>((r) => live.once("exit", () => r()));
    await Promise.all([
      ...caps.map((c) => waitFor(c, /listening on/)),
      until(() => readFileSync(liveFile, "utf8").includes("listening on")),
    ]);
    const server = b.spawn(["python3", "-c", SERVER]);
    await waitFor(server, /ready/);
    for (const argv of [
      ["ping", "-c", "2", "-i", "0.2", "-W", "1", B],
      ["ping", "-c", "1", "-W", "1", B_PLAIN],
      ["ping", "-6", "-c", "2", "-i", "0.2", "-W", "1", B6],
    ]) {
      const r = await a.exec(argv);
      if (r.code !== 0) throw new Error(`${argv.join(" ")}: ${r.stdout}${r.stderr}`);
    }
    const client = await a.exec(["python3", "-c", CLIENT], { timeoutMs: 15_000 });
    if (client.code !== 0) throw new Error(`client: ${client.stderr}`);
    // Every capture has seen the last datagram's port unreachable before it stops.
    await Promise.all(caps.map((c) => stop(c)));
    live.kill("SIGINT");
    await liveExit;
    await stop(server);
    const links = await a.exec(["ip", "-o", "link"]);
    const ifnames = new Map<number, string>();
    for (const m of links.stdout.matchAll(/^(\d+): ([^:@]+)[:@]/gm))
      ifnames.set(Number(m[1]), m[2]!);
    const dropped = stderr.map((e) =>
      Number(/(\d+) packets? dropped by kernel/.exec(e)?.[1] ?? NaN),
    );
    const liveText = readFileSync(liveFile, "utf8");
    return { lab, a, b, files, ifnames, dropped, live: liveText, liveCommand };
  } catch (e) {
    await lab.destroy();
    throw e;
  }
}

/**
 * The real tcpdump's text of a capture, printed inside `ns` (its names), UTC, run beside the file
 * (so a pasted "reading from file" line names it, not a temporary path).
 */
export function tcpdumpText(
  ns: Namespace,
  file: string,
  flags: readonly string[],
  opts: { withStderr?: boolean } = {},
): string {
  const argv = ["ip", "netns", "exec", ns.name, "tcpdump", ...flags, "-r", basename(file)];
  const run = { cwd: dirname(file), env: { ...process.env, TZ: "UTC" } };
  if (opts.withStderr) {
    // As a terminal shows it: stderr's "reading from file" line first, then the packets.
    return execFileSync("sh", ["-c", `"$@" 2>&1`, "sh", ...argv], run).toString();
  }
  return execFileSync(argv[0]!, argv.slice(1), {
    ...run,
    stdio: ["ignore", "pipe", "ignore"],
  }).toString();
}
