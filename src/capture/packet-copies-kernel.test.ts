/**
 * Copies of one packet in captures made by the real tcpdump on a real node replica: a pod
 * namespace with a veth into a node namespace that forwards to a far namespace, masquerading
 * (iptables MASQUERADE) or not (the destination exempted, as ip-masq-agent's RETURN does, and the
 * far side without a route back). `tcpdump -i any` in the node namespace (LINUX_SLL2, and
 * `-y LINUX_SLL` for v1) sees each packet on the veth and on eth0; podpath must pair them, report
 * the translation with both packet numbers, and never call the pod's copy untranslated. The same
 * captures printed by `tcpdump -r -nn -v` and `-nn -e` must give the same answer.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { readWireCaptures } from "../cases/masquerade/wire.ts";
import { type WireCapture, wireFindings } from "../cases/masquerade/wire-findings.ts";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { createLab, type Lab, type Namespace } from "../lab/netns.ts";
import type { Diagnostic, Finding } from "../model/types.ts";
import { parseCidr, parseIp } from "../net/cidr.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { conversations } from "./conversations.ts";
import { LINKTYPE } from "./decode.ts";
import { type Packet, TCP } from "./packet.ts";
import { findCopies } from "./packet-copies.ts";
import { describeFrame } from "./render.ts";
import { collect } from "./test-helpers/projection.ts";
import { waitFor } from "./test-helpers/tcpdump-process.ts";

const POD = "10.4.0.5";
const NODE = "10.128.0.2";
const FAR = "10.20.30.40";
const FAR_LINK = "10.128.0.9";
const POINT = "node/replica-0";
/** tcpdump's printings of each capture: -v carries the IP id, -e the direction (SLL2: the interface). */
const TEXT_FORMS = [
  ["sll2", ["-nn", "-v"]],
  ["sll2", ["-nn", "-e"]],
  ["sll1", ["-nn", "-v"]],
  ["sll1", ["-nn", "-e"]],
] as const;

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const closed = new Promise<void>((r) => child.once("close", () => r()));
  child.kill("SIGINT");
  await closed;
}

/** Polls a capture file until `done` holds for its packets (tcpdump -U writes each at once). */
async function until(file: string, done: (ps: Packet[]) => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  let last: Packet[] = [];
  while (Date.now() < end) {
    try {
      last = (await collect(file)).packets;
      if (done(last)) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  const seen = last.map(
    (p) => `${p.index} ${p.iface ?? ""} ${p.direction ?? ""} ${describeFrame(p)}`,
  );
  assert.fail(`${file}: the expected packets never arrived:\n${seen.join("\n")}`);
}

const v4 = (s: string) => parseIp(s).value;
const isFrom = (p: Packet, src: string, dst: string) =>
  p.ip?.src === v4(src) && p.ip.dst === v4(dst);
const isEcho = (p: Packet, type: number) =>
  p.transport?.kind === "icmp" && p.transport.type === type;
const isSyn = (p: Packet) =>
  p.transport?.kind === "tcp" && p.transport.flags === TCP.SYN && p.transport.dstPort === 5432;

/** The real tcpdump's printing of a capture (UTC). */
function printed(file: string, flags: readonly string[]): Uint8Array {
  return execFileSync("tcpdump", ["-r", file, ...flags], {
    env: { ...process.env, TZ: "UTC" },
    stdio: ["ignore", "pipe", "ignore"],
  });
}

/** Where a packet is cited: its number in a capture file, its text line in tcpdump text. */
const citedAs = (p: Packet) => p.line ?? p.index;

async function findingsFor(input: string | Uint8Array, file: string): Promise<Finding[]> {
  const { packets } = await collect(input, file);
  return wire((await conversations(packets, { file })).conversations, file);
}

function wire(convs: WireCapture["conversations"], file: string): Finding[] {
  return wireFindings({
    captures: [{ file, meta: { point: POINT, phase: "before" }, conversations: convs }],
    podCidrs: [parseCidr("10.4.0.0/16")],
    nodeAddresses: [parseIp(NODE)],
    dest: { ip: parseIp(FAR) },
  });
}

describe("copies of one packet in real node captures", { skip: kernelSkip() }, () => {
  let lab: Lab;
  let pod: Namespace;
  let node: Namespace;
  let far: Namespace;
  let dir: string;

  async function must(ns: Namespace, argv: string[]): Promise<string> {
    const r = await ns.exec(argv);
    assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
    return r.stdout;
  }

  /** Captures one scenario on every interface of the node, as SLL2 and as SLL v1. */
  async function capture(
    name: string,
    traffic: () => Promise<void>,
    done: (ps: Packet[]) => boolean,
  ): Promise<{ sll2: string; sll1: string }> {
    const sll2 = join(dir, `${name}-sll2.pcap`);
    const sll1 = join(dir, `${name}-sll1.pcap`);
    // No --immediate-mode: it gives each packet a snaplen-sized ring frame (a few in the default
    // buffer), and a burst of forwarded copies overflows it ("dropped by kernel"). -U still
    // writes every packet as it is delivered; `until` waits for the last ones.
    const common = ["-i", "any", "-U", "-n"];
    // a busy machine can still make the kernel drop a packet from the capture (tcpdump says so
    // when it stops): then the capture is not the whole conversation, and it is taken again
    for (let attempt = 1; ; attempt++) {
      const a = node.spawn(["tcpdump", ...common, "-w", sll2, "ip"]);
      const b = node.spawn(["tcpdump", ...common, "-y", "LINUX_SLL", "-w", sll1, "ip"]);
      let said = "";
      for (const c of [a, b]) c.stderr?.on("data", (d: Buffer) => (said += d.toString()));
      await Promise.all([waitFor(a, /listening on/), waitFor(b, /listening on/)]);
      await traffic();
      await Promise.all([until(sll2, done), until(sll1, done)]);
      await Promise.all([stop(a), stop(b)]);
      if (!/\b[1-9]\d* packets? dropped by kernel/.test(said) || attempt === 3)
        return { sll2, sll1 };
    }
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "podpath-copies-"));
    lab = await createLab({ prefix: "ppcopy" });
    pod = await lab.addNamespace("pod");
    node = await lab.addNamespace("node");
    far = await lab.addNamespace("far");
    await lab.link(pod, "eth0", node, "vethpod");
    await lab.link(node, "eth0", far, "eth0");
    await must(pod, ["ip", "addr", "add", `${POD}/24`, "dev", "eth0"]);
    await must(pod, ["ip", "link", "set", "eth0", "up"]);
    await must(pod, ["ip", "route", "add", "default", "via", "10.4.0.1"]);
    await must(node, ["ip", "addr", "add", "10.4.0.1/24", "dev", "vethpod"]);
    await must(node, ["ip", "link", "set", "vethpod", "up"]);
    await must(node, ["ip", "addr", "add", `${NODE}/24`, "dev", "eth0"]);
    await must(node, ["ip", "link", "set", "eth0", "up"]);
    await must(node, ["ip", "route", "add", `${FAR}/32`, "via", FAR_LINK]);
    await must(node, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    // the far side: its own link to the node and the destination address; no route to the pods
    await must(far, ["ip", "addr", "add", `${FAR_LINK}/24`, "dev", "eth0"]);
    await must(far, ["ip", "link", "set", "eth0", "up"]);
    await must(far, ["ip", "addr", "add", `${FAR}/32`, "dev", "lo"]);
    // what ip-masq-agent installs: exempted destinations RETURN, the rest is masqueraded
    await must(node, ["iptables", "-w", "-t", "nat", "-N", "MASQ-AGENT"]);
    await must(node, [
      "iptables",
      "-w",
      "-t",
      "nat",
      "-A",
      "POSTROUTING",
      "-o",
      "eth0",
      "-j",
      "MASQ-AGENT",
    ]);
    await must(node, ["iptables", "-w", "-t", "nat", "-A", "MASQ-AGENT", "-j", "MASQUERADE"]);
  });

  after(async () => {
    await lab?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe("with masquerade", () => {
    let files: { sll2: string; sll1: string };
    before(async () => {
      const server = far.spawn([
        "python3",
        "-c",
        `import socket
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("${FAR}",5432)); s.listen(1); print("ready", flush=True)
c,_=s.accept(); c.recv(100); c.sendall(b"pong"); c.close()`,
      ]);
      await waitFor(server, /ready/);
      files = await capture(
        "masq",
        async () => {
          await must(pod, ["ping", "-c", "2", "-i", "0.2", "-W", "2", FAR]);
          await must(pod, [
            "python3",
            "-c",
            `import socket
c=socket.create_connection(("${FAR}",5432), timeout=5); c.sendall(b"ping")
while c.recv(100): pass
c.close()`,
          ]);
        },
        // every echo and the client's FIN, each seen on both sides of the node
        (ps) =>
          ps.filter((p) => isEcho(p, 8) || isEcho(p, 0)).length >= 8 &&
          ps.filter(
            (p) =>
              p.transport?.kind === "tcp" &&
              p.transport.dstPort === 5432 &&
              ((p.transport.flags ?? 0) & TCP.FIN) !== 0,
          ).length >= 2,
      );
    });

    for (const v of ["sll2", "sll1"] as const) {
      it(`pairs the copies and reports the translation with both packets (${v})`, async () => {
        const file = files[v];
        const { packets } = await collect(file);
        assert.equal(packets[0]!.linkType, v === "sll2" ? LINKTYPE.LINUX_SLL2 : LINKTYPE.LINUX_SLL);
        // independently of the pairing: the pod's first SYN as it reached the node, and the
        // node's, with the same IP id
        const podSyn = packets.find((p) => isSyn(p) && isFrom(p, POD, FAR))!;
        const nodeSyn = packets.find((p) => isSyn(p) && isFrom(p, NODE, FAR))!;
        assert.ok(podSyn && nodeSyn);
        assert.equal(podSyn.direction, "in");
        assert.equal(nodeSyn.direction, "out");
        assert.equal(podSyn.ip!.id, nodeSyn.ip!.id);
        const copies = await findCopies(packets);
        const synPair = copies.find((c) => c.first === podSyn.index)!;
        assert.equal(synPair.again, nodeSyn.index);
        assert.equal(synPair.basis, "direction");
        assert.equal(synPair.source?.to.ip.value, v4(NODE));
        // the echo request the same way, and every reply un-NATed back to the pod
        // the pod's first echo request with a copy leaving as the node (same IP id): on a busy
        // machine the first request can go before the node's neighbour entry is ready
        const nodeEchoes = packets.filter((p) => isEcho(p, 8) && isFrom(p, NODE, FAR));
        const podEcho = packets.find(
          (p) =>
            isEcho(p, 8) && isFrom(p, POD, FAR) && nodeEchoes.some((n) => n.ip!.id === p.ip!.id),
        )!;
        const nodeEcho = nodeEchoes.find((n) => n.ip!.id === podEcho.ip!.id)!;
        assert.ok(copies.some((c) => c.first === podEcho.index && c.again === nodeEcho.index));
        const replies = packets.filter((p) => isEcho(p, 0) && isFrom(p, FAR, NODE));
        for (const r of replies)
          assert.ok(
            copies.some((c) => c.first === r.index && c.destination?.to.ip.value === v4(POD)),
            `echo reply packet ${r.index} paired with its copy to the pod`,
          );

        const f = wire((await conversations(packets, { file })).conversations, file);
        assert.deepEqual(
          f.filter((x) => x.id === "masq/wire-pod-source"),
          [],
        );
        const node = f.filter((x) => x.id === "masq/wire-node-source");
        assert.equal(node.length, 1, JSON.stringify(f.map((x) => x.id)));
        const first = podEcho.index < podSyn.index ? [podEcho, nodeEcho] : [podSyn, nodeSyn];
        assert.ok(
          node[0]!.explanation.includes(
            `pod address ${POD} → node address ${NODE} on ${POINT} (packets ${first[0]!.index} and ${first[1]!.index})`,
          ),
          node[0]!.explanation,
        );
        const cited = node[0]!.evidence.map((e) => e.line);
        assert.ok(cited.includes(first[0]!.index) && cited.includes(first[1]!.index));
      });
    }

    it("reads the capture's node from captures/<name>.yaml in a snapshot", async () => {
      const snap = join(dir, "snapshot");
      mkdirSync(join(snap, "captures"), { recursive: true });
      writeFileSync(join(snap, "captures", "node.pcap"), execFileSync("cat", [files.sll2]));
      writeFileSync(join(snap, "captures", "node.yaml"), `point: ${POINT}\nphase: before\n`);
      const diagnostics: Diagnostic[] = [];
      const caps = await readWireCaptures(
        loadSnapshot(openSnapshot(snap)),
        diagnostics,
        parseIp(FAR),
      );
      assert.deepEqual(
        diagnostics.filter((d) => d.severity === "error"),
        [],
      );
      assert.equal(caps[0]!.meta?.point, POINT);
      const f = wireFindings({
        captures: caps,
        podCidrs: [parseCidr("10.4.0.0/16")],
        nodeAddresses: [parseIp(NODE)],
        dest: { ip: parseIp(FAR), port: 5432 },
      });
      assert.deepEqual(
        f.map((x) => x.id),
        ["masq/wire-node-source"],
      );
      assert.match(f[0]!.explanation, new RegExp(`on ${POINT} \\(packets \\d+ and \\d+\\)`));
      assert.match(f[0]!.explanation, /replies went back to the pod/);
    });

    for (const [v, flags] of TEXT_FORMS) {
      it(`gives the same answer for tcpdump -r ${v} ${flags.join(" ")}`, async () => {
        const text = printed(files[v], flags);
        const { packets } = await collect(text, "node.txt");
        const podSyn = packets.find((p) => isSyn(p) && isFrom(p, POD, FAR))!;
        const nodeSyn = packets.find((p) => isSyn(p) && isFrom(p, NODE, FAR))!;
        // the pod's first echo request with a copy leaving as the node (same IP id): on a busy
        // machine the first request can go before the node's neighbour entry is ready
        const nodeEchoes = packets.filter((p) => isEcho(p, 8) && isFrom(p, NODE, FAR));
        const podEcho = packets.find(
          (p) =>
            isEcho(p, 8) && isFrom(p, POD, FAR) && nodeEchoes.some((n) => n.ip!.id === p.ip!.id),
        )!;
        const nodeEcho = nodeEchoes.find((n) => n.ip!.id === podEcho.ip!.id)!;
        assert.ok(podSyn && nodeSyn && podEcho && nodeEcho);
        const f = await findingsFor(text, "captures/node.txt");
        assert.deepEqual(
          f.filter((x) => x.id === "masq/wire-pod-source"),
          [],
        );
        const node = f.find((x) => x.id === "masq/wire-node-source");
        assert.ok(node, JSON.stringify(f.map((x) => x.id)));
        const first = podEcho.index < podSyn.index ? [podEcho, nodeEcho] : [podSyn, nodeSyn];
        assert.ok(
          node.explanation.includes(
            `pod address ${POD} → node address ${NODE} on ${POINT} (lines ${citedAs(first[0]!)} and ${citedAs(first[1]!)})`,
          ),
          node.explanation,
        );
        // where nothing says on which interface a copy was seen, the pairing says what it rests on
        const directional = packets.some((p) => p.direction !== undefined);
        if (directional) assert.doesNotMatch(node.explanation, /paired by/);
        else assert.match(node.explanation, /paired by IP identification \(id \d+\)/);
      });
    }
  });

  describe("without masquerade (destination exempted, no route back)", () => {
    let files: { sll2: string; sll1: string };
    before(async () => {
      await must(node, [
        "iptables",
        "-t",
        "nat",
        "-I",
        "MASQ-AGENT",
        "1",
        "-d",
        `${FAR}/32`,
        "-j",
        "RETURN",
      ]);
      // NAT is decided per connection: no translation left over from the scenario before
      await must(node, ["conntrack", "-F"]);
      files = await capture(
        "exempt",
        async () => {
          // the far side has no route back to the pod range: nothing answers
          const ping = await pod.exec(["ping", "-c", "1", "-W", "1", FAR]);
          assert.notEqual(ping.code, 0, "the far side answered a ping it has no route back for");
          const tcp = await pod.exec([
            "python3",
            "-c",
            `import socket
try: socket.create_connection(("${FAR}",5432), timeout=0.5)
except OSError: pass`,
          ]);
          assert.equal(tcp.code, 0, tcp.stderr);
        },
        (ps) =>
          ps.filter((p) => isEcho(p, 8)).length >= 2 && ps.filter((p) => isSyn(p)).length >= 2,
      );
    });

    for (const [v, flags] of [["sll2", undefined], ["sll1", undefined], ...TEXT_FORMS] as const) {
      it(`shows the pod address on both copies and reports it untranslated (${v}${flags ? ` as tcpdump -r ${flags.join(" ")}` : ""})`, async () => {
        const input = flags === undefined ? files[v] : printed(files[v], flags);
        const file = flags === undefined ? "captures/node.pcap" : "captures/node.txt";
        const { packets } = await collect(input, file);
        const syns = packets.filter((p) => isSyn(p) && isFrom(p, POD, FAR));
        assert.ok(syns.length >= 2);
        assert.ok(!packets.some((p) => p.ip?.src === v4(NODE)), "a packet left masqueraded");
        const copies = await findCopies(packets);
        const pair = copies.find((c) => c.first === syns[0]!.index)!;
        assert.equal(pair.again, syns[1]!.index);
        assert.equal(pair.source, undefined);
        const f = await findingsFor(input, file);
        const pod = f.filter((x) => x.id === "masq/wire-pod-source");
        assert.equal(pod.length, 1, JSON.stringify(f.map((x) => x.id)));
        assert.equal(pod[0]!.severity, "error");
        assert.ok(!f.some((x) => x.id === "masq/wire-node-source"));
        const echo = packets.filter((p) => isEcho(p, 8) && isFrom(p, POD, FAR));
        const firstPair = echo[0]!.index < syns[0]!.index ? echo : syns;
        const word = flags === undefined ? "packets" : "lines";
        assert.ok(
          pod[0]!.explanation.includes(
            `${word} ${citedAs(firstPair[0]!)} and ${citedAs(firstPair[1]!)}`,
          ),
          pod[0]!.explanation,
        );
        assert.match(pod[0]!.explanation, /both times: the node did not masquerade it/);
        const cited = pod[0]!.evidence.map((e) => e.line);
        assert.ok(cited.includes(citedAs(firstPair[0]!)) && cited.includes(citedAs(firstPair[1]!)));
      });
    }
  });
});
