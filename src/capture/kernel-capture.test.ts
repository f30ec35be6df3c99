/**
 * Captures made with the real tcpdump in throwaway network namespaces: `-i any` (LINUX_SLL2 with
 * directions), one interface with nanosecond timestamps (Ethernet), a tun device under a real
 * OpenVPN tunnel (RAW), and pcapng converted by editcap. Each is read by podpath and compared with
 * the real tcpdump's text of it (several printer flags) and with tshark; the conversations must
 * show what the test did (a TCP exchange, a ping, a closed UDP port, a refused connection).
 *
 * With UPDATE_CAPTURE_FIXTURES=1 the `-i any` capture and its text are saved as fixtures.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { createLab, type Lab, type Namespace } from "../lab/netns.ts";
import { formatIp, parseIp } from "../net/cidr.ts";
import { conversations } from "./conversations.ts";
import { LINKTYPE } from "./decode.ts";
import type { Packet } from "./packet.ts";
import { collect, projectFrame } from "./test-helpers/projection.ts";
import { stop } from "./test-helpers/tcpdump-process.ts";

const fixtures = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "captured");
const A = "10.99.0.1";
const B = "10.99.0.2";

function waitFor(
  child: ChildProcess,
  stream: "stdout" | "stderr",
  re: RegExp,
  ms = 10_000,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`timeout waiting for ${re}: ${seen}`)), ms);
    child[stream]?.on("data", (d: Buffer) => {
      seen += d.toString();
      if (re.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

/** The real tcpdump's text for a capture (UTC, numbered, dated, as TESTrun prints). */
function tcpdumpText(file: string, flags: readonly string[]): string {
  return execFileSync("tcpdump", ["-#", "-n", "-tttt", ...flags, "-r", file], {
    env: { ...process.env, TZ: "UTC" },
    stdio: ["ignore", "pipe", "ignore"],
  }).toString();
}

function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Waits until the packets tcpdump has written to `file` (-U: each as it is captured) satisfy
 * `done`: a capture is stopped once it holds what the test sent, however slow the machine is.
 */
async function untilCaptured(file: string, done: (ps: Packet[]) => boolean, ms = 20_000) {
  const end = Date.now() + ms;
  let seen: Packet[] = [];
  while (Date.now() < end) {
    try {
      seen = (await collect(file)).packets;
      if (done(seen)) return;
    } catch {}
    await sleep(50);
  }
  throw new Error(`${file}: not all packets captured after ${ms} ms (${seen.length} so far)`);
}

const SERVER = `
import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("${B}",5432)); s.listen(1); print("ready", flush=True)
c,_=s.accept(); c.recv(100); c.sendall(b"pong"*50); c.close()
`;
const CLIENT = `
import socket,time
c=socket.create_connection(("${B}",5432)); c.sendall(b"ping"); 
d=b""
while True:
  x=c.recv(1000)
  if not x: break
  d+=x
c.close()
u=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
  u.sendto(b"hello", ("${B}", 9999)); time.sleep(0.15)
r=socket.socket()
try: r.connect(("${B}", 9998))
except OSError: pass
`;

describe("captures made with the real tcpdump", { skip: kernelSkip() }, () => {
  let lab: Lab;
  let a: Namespace;
  let b: Namespace;
  let dir: string;
  let liveText = "";

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "podpath-capture-"));
    lab = await createLab({ prefix: "ppcap" });
    a = await lab.addNamespace("a");
    b = await lab.addNamespace("b");
    await lab.link(a, "va", b, "vb");
    for (const [ns, ifn, ip] of [
      [a, "va", `${A}/24`],
      [b, "vb", `${B}/24`],
    ] as const) {
      for (const argv of [
        ["ip", "addr", "add", ip, "dev", ifn],
        ["ip", "link", "set", ifn, "up"],
        ["ip", "link", "set", "lo", "up"],
      ]) {
        const r = await ns.exec(argv);
        assert.equal(r.code, 0, r.stderr);
      }
    }
    // Two captures at once in namespace a: every interface (SLL2), and va with nanoseconds.
    const any = a.spawn([
      "tcpdump",
      "-i",
      "any",
      "--immediate-mode",
      "-B",
      "8192",
      "-U",
      "-w",
      join(dir, "any.pcap"),
    ]);
    const one = a.spawn([
      "tcpdump",
      "-i",
      "va",
      "--time-stamp-precision=nano",
      "--immediate-mode",
      "-B",
      "8192",
      "-U",
      "-w",
      join(dir, "va.pcap"),
    ]);
    // And what people paste: tcpdump's live text of -i any, with interface names and directions.
    const live = a.spawn([
      "tcpdump",
      "-i",
      "any",
      "--immediate-mode",
      "-B",
      "8192",
      "-l",
      "-n",
      "-tttt",
      "-#",
    ]);
    live.stdout?.on("data", (d: Buffer) => {
      liveText += d.toString();
    });
    await Promise.all([
      waitFor(any, "stderr", /listening on/),
      waitFor(one, "stderr", /listening on/),
      waitFor(live, "stderr", /listening on/),
    ]);
    const server = b.spawn(["python3", "-c", SERVER]);
    await waitFor(server, "stdout", /ready/);
    const ping = await a.exec(["ping", "-c", "2", "-i", "0.2", "-W", "1", B]);
    assert.equal(ping.code, 0, ping.stderr);
    const client = await a.exec(["python3", "-c", CLIENT], { timeoutMs: 10_000 });
    assert.equal(client.code, 0, client.stderr);
    // the client's last packet is b's reset from port 9998: each file holds it before it stops
    const last = (ps: Packet[]) =>
      ps.some((p) => p.transport?.kind === "tcp" && p.transport.srcPort === 9998);
    await Promise.all([
      untilCaptured(join(dir, "any.pcap"), last),
      untilCaptured(join(dir, "va.pcap"), last),
    ]);
    await Promise.all([stop(any), stop(one)]);
    // the live text is read from a pipe: wait until it shows every IPv4 packet the file holds
    const inFile = (await collect(join(dir, "any.pcap"))).packets.filter(
      (p) => p.ip?.family === 4,
    ).length;
    const ipv4Lines = () => liveText.split("\n").filter((l) => / IP \d/.test(l)).length;
    for (let waited = 0; ipv4Lines() < inFile && waited < 20_000; waited += 50) await sleep(50);
    await stop(live);
    if (process.env["UPDATE_CAPTURE_FIXTURES"] === "1") {
      copyFileSync(join(dir, "any.pcap"), join(fixtures, "any-sll2.pcap"));
      writeFileSync(join(fixtures, "any-sll2.out"), tcpdumpText(join(dir, "any.pcap"), []));
    }
  });

  after(async () => {
    await lab?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("reads tcpdump -i any as LINUX_SLL2 with a direction on every packet", async () => {
    const { packets, diagnostics } = await collect(join(dir, "any.pcap"));
    assert.deepEqual(diagnostics, []);
    assert.ok(packets.length >= 15, `packets: ${packets.length}`);
    assert.ok(packets.every((p) => p.linkType === LINKTYPE.LINUX_SLL2));
    assert.ok(packets.every((p) => p.direction !== undefined));
    assert.ok(
      packets.some((p) => p.direction === "in") && packets.some((p) => p.direction === "out"),
    );
    assert.ok(packets.every((p) => p.iface?.startsWith("ifindex ")));
    const firstSyn = packets.find(
      (p) => p.transport?.kind === "tcp" && p.transport.dstPort === 5432,
    )!;
    assert.equal(firstSyn.direction, "out");
  });

  for (const file of ["any.pcap", "va.pcap"]) {
    for (const flags of [[], ["-v"], ["-e"], ["-q"], ["-vv", "-e"]]) {
      it(`agrees with the real tcpdump's text of ${file} (${flags.join(" ") || "default"})`, async () => {
        const nano = file === "va.pcap";
        const path = join(dir, file);
        const text = tcpdumpText(path, nano ? ["--nano", ...flags] : flags);
        const bin = await collect(path);
        const txt = await collect(new TextEncoder().encode(text), "text");
        assert.deepEqual(
          txt.diagnostics.filter((d) => d.severity !== "info"),
          [],
        );
        assert.equal(txt.packets.length, bin.packets.length);
        const withFlags = !flags.includes("-q");
        for (let i = 0; i < bin.packets.length; i++) {
          const x = txt.packets[i]!;
          const y = bin.packets[i]!;
          assert.equal(x.index, y.index);
          assert.equal(x.timeNs, nano ? y.timeNs : (y.timeNs / 1000n) * 1000n, `time ${i + 1}`);
          assert.deepEqual(
            projectFrame(x, withFlags),
            projectFrame(y, withFlags),
            `packet ${i + 1}`,
          );
          if (file === "any.pcap") assert.equal(x.direction, y.direction, `direction ${i + 1}`);
        }
      });
    }
  }

  it("reads tcpdump's live -i any text like the capture written at the same time", async () => {
    const bin = await collect(join(dir, "any.pcap"));
    const txt = await collect(new TextEncoder().encode(liveText), "live.txt");
    assert.deepEqual(
      txt.diagnostics.filter((d) => d.severity !== "info"),
      [],
    );
    // Only the IPv4 traffic (IPv6 neighbour noise depends on timing). Each capture socket stamps
    // a received packet itself, so the two readings of one packet differ by microseconds, and by
    // up to a millisecond or so on a busy machine; a misread time (its zone, its unit, its
    // fraction) is off by more than the 5 ms allowed (the exact times are held by the -r forms
    // tests, where both readings come from one file). Live text prints local time, so times
    // compare within the day.
    const ours = (ps: Packet[]) => ps.filter((p) => p.ip?.family === 4);
    const x = ours(txt.packets);
    const y = ours(bin.packets);
    assert.equal(x.length, y.length);
    for (let i = 0; i < x.length; i++) {
      assert.deepEqual(
        [x[i]!.direction, projectFrame(x[i]!)],
        [y[i]!.direction, projectFrame(y[i]!)],
      );
      const dt = (x[i]!.timeNs % 86_400_000_000_000n) - (y[i]!.timeNs % 86_400_000_000_000n);
      assert.ok(dt > -5_000_000n && dt < 5_000_000n, `packet ${i + 1}: ${dt} ns apart`);
    }
    const names = new Set(txt.packets.map((p) => p.iface));
    assert.ok(names.has("va"), [...names].join(","));
  });

  it("reads the same packets from pcapng (editcap) and agrees with tshark", async () => {
    const png = join(dir, "va.pcapng");
    execFileSync("editcap", ["-F", "pcapng", join(dir, "va.pcap"), png]);
    const fromPcap = await collect(join(dir, "va.pcap"));
    const fromPng = await collect(png);
    assert.equal(fromPng.format, "pcapng");
    assert.deepEqual(fromPng.diagnostics, []);
    assert.deepEqual(
      fromPng.packets.map((p) => [p.timeNs, projectFrame(p)]),
      fromPcap.packets.map((p) => [p.timeNs, projectFrame(p)]),
    );
    const fields = execFileSync(
      "tshark",
      [
        "-r",
        png,
        "-T",
        "fields",
        "-E",
        "separator=;",
        ...["frame.number", "frame.time_epoch", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst"].flatMap(
          (f) => ["-e", f],
        ),
      ],
      { stdio: ["ignore", "pipe", "ignore"] },
    )
      .toString()
      .trim()
      .split("\n");
    assert.equal(fields.length, fromPng.packets.length);
    for (const line of fields) {
      const [num, epoch, src4, dst4, src6, dst6] = line.split(";");
      const p = fromPng.packets[Number(num) - 1]!;
      const [sec, frac = ""] = epoch!.split(".");
      assert.equal(
        p.timeNs,
        BigInt(sec!) * 1_000_000_000n + BigInt(frac.padEnd(9, "0").slice(0, 9)),
      );
      const src = src4 || src6;
      const dst = dst4 || dst6;
      if (src) {
        const fam = src4 ? 4 : 6;
        assert.equal(formatIp({ family: fam, value: p.ip!.src }), src.split(",")[0]);
        assert.equal(formatIp({ family: fam, value: p.ip!.dst }), dst!.split(",")[0]);
      } else assert.equal(p.ip, undefined);
    }
  });

  it("finds in the conversations what the test did", async () => {
    const s = await conversations((await collect(join(dir, "any.pcap"))).packets, {
      file: "any.pcap",
      host: parseIp(B),
    });
    const find = (proto: string, port?: number) =>
      s.conversations.find(
        (c) => c.protocol === proto && (port === undefined || c.responder.port === port),
      );
    const tcp = find("tcp", 5432)!;
    assert.equal(formatIp(tcp.initiator.ip), A);
    assert.equal(tcp.tcp?.progress, "data-both-ways");
    assert.ok(tcp.tcp?.finFrom.includes("responder"));
    assert.ok(tcp.replied);
    const refused = find("tcp", 9998)!;
    assert.equal(refused.tcp?.progress, "syn-only");
    assert.deepEqual(refused.tcp?.rstFrom, ["responder"]);
    const udp = find("udp", 9999)!;
    assert.equal(udp.replied, false);
    // the kernel rate-limits ICMP errors (also across namespaces), so the datagram is sent three
    // times and at least one port unreachable must come back
    assert.equal(udp.icmpErrors[0]?.what, "port unreachable");
    assert.equal(formatIp(udp.icmpErrors[0]!.from), B);
    const echo = find("icmp")!;
    assert.equal(echo.initiatorBasis, "echo");
    assert.equal(echo.packetsFromInitiator, 2);
    assert.equal(echo.packetsFromResponder, 2);
    assert.ok(s.conversations.every((c) => c.seenOn.length > 0));
  });

  it("reads a tun device under a real OpenVPN tunnel (LINKTYPE_RAW)", async () => {
    const key = join(dir, "static.key");
    execFileSync("openvpn", ["--genkey", "secret", key], { stdio: "ignore" });
    const common = [
      "--dev",
      "tun0",
      "--secret",
      key,
      "--cipher",
      "AES-256-CBC",
      "--disable-dco",
      "--proto",
      "udp",
      "--verb",
      "3",
    ];
    const va = a.spawn([
      "openvpn",
      ...common,
      "--ifconfig",
      "10.8.0.1",
      "10.8.0.2",
      "--local",
      A,
      "--remote",
      B,
    ]);
    const vb = b.spawn([
      "openvpn",
      ...common,
      "--ifconfig",
      "10.8.0.2",
      "10.8.0.1",
      "--local",
      B,
      "--remote",
      A,
    ]);
    await Promise.all([
      waitFor(va, "stdout", /Initialization Sequence Completed/, 15_000),
      waitFor(vb, "stdout", /Initialization Sequence Completed/, 15_000),
    ]);
    const file = join(dir, "tun0.pcap");
    const cap = a.spawn(["tcpdump", "-i", "tun0", "--immediate-mode", "-U", "-w", file]);
    await waitFor(cap, "stderr", /listening on/);
    const ping = await a.exec(["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.8.0.2"]);
    assert.equal(ping.code, 0, ping.stderr);
    // three requests and three replies: stop once the file holds all six
    const icmp4 = (p: Packet) => p.transport?.kind === "icmp" && p.transport.version === 4;
    await untilCaptured(file, (ps) => ps.filter(icmp4).length >= 6);
    await stop(cap);
    const bin = await collect(file);
    assert.deepEqual(bin.diagnostics, []);
    const echoes = bin.packets.filter(
      (p: Packet) => p.transport?.kind === "icmp" && p.transport.version === 4,
    );
    assert.equal(echoes.length, 6);
    assert.ok(bin.packets.every((p) => p.linkType === LINKTYPE.RAW));
    assert.equal(formatIp({ family: 4, value: echoes[0]!.ip!.src }), "10.8.0.1");
    const txt = await collect(new TextEncoder().encode(tcpdumpText(file, [])), "text");
    assert.deepEqual(
      txt.packets.map((p) => projectFrame(p)),
      bin.packets.map((p) => projectFrame(p)),
    );
    if (process.env["UPDATE_CAPTURE_FIXTURES"] === "1") {
      copyFileSync(file, join(fixtures, "tun0-raw.pcap"));
      writeFileSync(join(fixtures, "tun0-raw.out"), tcpdumpText(file, []));
    }
    await Promise.all([stop(va), stop(vb)]);
  });
});
