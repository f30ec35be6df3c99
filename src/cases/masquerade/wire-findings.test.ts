import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parseCaptureMeta } from "../../capture/capture-meta.ts";
import { conversations, formatTime } from "../../capture/conversations.ts";
import { type Packet, TCP } from "../../capture/packet.ts";
import { readCapture } from "../../capture/read-capture.ts";
import { parseTcpdumpLines } from "../../capture/tcpdump-text.ts";
import { parseCidr, parseIp } from "../../net/cidr.ts";
import { wireFindings } from "./wire-findings.ts";

const POD = "10.4.1.5";
const NODE = "10.128.0.20";
const DEST = "10.20.30.40";
const base = {
  podCidrs: [parseCidr("10.4.0.0/14")],
  nodeAddresses: [parseIp(NODE)],
  dest: { ip: parseIp(DEST), port: 5432 },
};

function syn(
  i: number,
  src: string,
  dst: string,
  sp: number,
  dp: number,
  flags: number,
  extra: Partial<Packet> = {},
): Packet {
  return {
    index: i,
    timeNs: 1_700_000_000_000_000_000n + BigInt(i) * 1_000_000_000n,
    ip: { family: 4, src: parseIp(src).value, dst: parseIp(dst).value, protocol: 6 },
    transport: { kind: "tcp", srcPort: sp, dstPort: dp, flags, seq: 100, payloadLength: 0 },
    ...extra,
  };
}

async function conv(pkts: Packet[], file: string) {
  return (await conversations(pkts, { file })).conversations;
}

describe("wireFindings", () => {
  it("closes the case when the pod address leaves and no reply returns", async () => {
    const c = await conv(
      [1, 2, 3].map((i) =>
        syn(i, POD, DEST, 40000, 5432, TCP.SYN, { iface: "eth0", direction: "out" }),
      ),
      "captures/node.pcap",
    );
    const f = wireFindings({
      ...base,
      captures: [{ file: "captures/node.pcap", meta: { point: "node/gke-a-1" }, conversations: c }],
    });
    assert.equal(f.length, 1);
    assert.equal(f[0]!.id, "masq/wire-pod-source");
    assert.equal(f[0]!.severity, "error");
    assert.equal(f[0]!.subject, `flow/${POD}->${DEST}`);
    assert.equal(f[0]!.evidence[0]!.file, "captures/node.pcap");
    assert.equal(f[0]!.evidence[0]!.line, 1);
    assert.match(f[0]!.evidence[0]!.text!, /packet 1 at 2023-11-14T22:13:21\.000000000Z/);
    assert.match(f[0]!.explanation, /closes the case/);
  });

  it("reads the pod's packet on its veth (in) and the node address on eth0 (out) as masquerade working; no reply is the far side's problem", async () => {
    const c = await conv(
      [
        syn(1, POD, DEST, 40000, 5432, TCP.SYN, { iface: "veth1", direction: "in" }),
        syn(2, NODE, DEST, 61000, 5432, TCP.SYN, { iface: "eth0", direction: "out" }),
      ],
      "captures/node.pcap",
    );
    const f = wireFindings({
      ...base,
      captures: [{ file: "captures/node.pcap", conversations: c }],
    });
    assert.deepEqual(
      f.map((x) => [x.id, x.severity]),
      [["masq/reply-missing", "error"]],
    );
    assert.equal(f[0]!.evidence[0]!.line, 2);
  });

  it("reports the node source with replies as the healthy sign (info)", async () => {
    const c = await conv(
      [
        syn(1, NODE, DEST, 61000, 5432, TCP.SYN),
        syn(2, DEST, NODE, 5432, 61000, TCP.SYN | TCP.ACK),
      ],
      "captures/after.pcap",
    );
    const f = wireFindings({
      ...base,
      captures: [{ file: "captures/after.pcap", meta: { phase: "after" }, conversations: c }],
    });
    assert.deepEqual(
      f.map((x) => [x.id, x.severity]),
      [["masq/wire-node-source", "info"]],
    );
    assert.equal(f[0]!.evidence.length, 2);
    assert.equal(f[0]!.evidence[1]!.line, 2);
  });

  it("shows two observations side by side and cites tcpdump text by line", async () => {
    const node = await conv(
      [syn(1, POD, DEST, 40000, 5432, TCP.SYN, { iface: "eth0", direction: "out" })],
      "captures/node.pcap",
    );
    const text = [
      "reading from file remote.pcap, link-type EN10MB (Ethernet)",
      "10:00:01.000001 IP 10.4.1.5.40000 > 10.20.30.40.5432: Flags [S], seq 100, win 64240, length 0",
      "10:00:02.000001 IP 10.4.1.5.40000 > 10.20.30.40.5432: Flags [S], seq 100, win 64240, length 0",
    ];
    const pkts: Packet[] = [];
    for await (const p of parseTcpdumpLines(text, "captures/remote.txt", () => {})) pkts.push(p);
    const remote = (await conversations(pkts, { file: "captures/remote.txt" })).conversations;
    const f = wireFindings({
      ...base,
      captures: [
        { file: "captures/node.pcap", meta: { point: "node/gke-a-1" }, conversations: node },
        { file: "captures/remote.txt", meta: { point: "remote/onprem" }, conversations: remote },
      ],
    });
    assert.equal(f.length, 2);
    assert.ok(f.every((x) => x.id === "masq/wire-pod-source"));
    const remoteFinding = f.find((x) => x.evidence[0]!.file === "captures/remote.txt")!;
    assert.equal(remoteFinding.evidence[0]!.line, 2);
    assert.match(remoteFinding.explanation, /arrived at the far side/);
    for (const x of f) {
      assert.match(x.explanation, /captures\/node\.pcap \(node\/gke-a-1\), packet 1/);
      assert.match(
        x.explanation,
        /captures\/remote\.txt \(remote\/onprem\), line 2 \(packet 1\) at 10:00:01\.000001000/,
      );
    }
  });

  it("says what it assumed when the capture has no directions", async () => {
    const c = await conv([syn(1, POD, DEST, 40000, 5432, TCP.SYN)], "c.pcap");
    const f = wireFindings({ ...base, captures: [{ file: "c.pcap", conversations: c }] });
    assert.equal(f[0]!.id, "masq/wire-pod-source");
    assert.match(f[0]!.explanation, /does not record directions/);
  });

  it("ignores other destinations and other ports", async () => {
    const c = await conv(
      [syn(1, POD, "10.20.30.41", 40000, 5432, TCP.SYN), syn(2, POD, DEST, 40001, 443, TCP.SYN)],
      "c.pcap",
    );
    assert.deepEqual(
      wireFindings({ ...base, captures: [{ file: "c.pcap", conversations: c }] }),
      [],
    );
  });
});

describe("wireFindings on the example snapshot's real captures", () => {
  const root = join(
    dirname(fileURLToPath(import.meta.url)),
    "..",
    "..",
    "..",
    "examples",
    "snat-exception-list",
  );
  const names = ["node-gke-lab-default-0", "remote-onprem-dc1"];

  it("closes the case from both observations and cites the leaving packet's number and time", async () => {
    const captures = [];
    for (const name of names) {
      const file = `captures/${name}.pcap`;
      const meta = parseCaptureMeta(
        readFileSync(join(root, `captures/${name}.yaml`), "utf8"),
        `captures/${name}.yaml`,
      ).value;
      const conv = await conversations(readCapture(join(root, file), { file }), { file });
      captures.push({
        file,
        meta: {
          ...(meta.pointText === undefined ? {} : { point: meta.pointText }),
          ...(meta.phase === undefined ? {} : { phase: meta.phase }),
        },
        conversations: conv.conversations,
      });
    }
    const findings = wireFindings({
      captures,
      podCidrs: [parseCidr("10.4.0.0/24")],
      nodeAddresses: [parseIp("10.128.0.2")],
      dest: { ip: parseIp(DEST) },
    });
    const podSource = findings.filter((f) => f.id === "masq/wire-pod-source");
    assert.deepEqual(
      podSource.map((f) => [f.evidence[0]!.file, f.severity, f.subject]),
      [
        ["captures/node-gke-lab-default-0.pcap", "error", `flow/10.4.0.5->${DEST}`],
        ["captures/remote-onprem-dc1.pcap", "error", `flow/10.4.0.5->${DEST}`],
      ],
    );
    // Independently: the first packet from the pod address that the node capture shows leaving.
    let leaving: Packet | undefined;
    for await (const p of readCapture(join(root, "captures/node-gke-lab-default-0.pcap"))) {
      if (p.ip?.src === parseIp("10.4.0.5").value && p.direction === "out") {
        leaving = p;
        break;
      }
    }
    assert.ok(leaving);
    assert.equal(podSource[0]!.evidence[0]!.line, leaving.index);
    assert.match(
      podSource[0]!.evidence[0]!.text!,
      new RegExp(`packet ${leaving.index} at ${formatTime(leaving.timeNs).replace(/\./g, "\\.")}`),
    );
    for (const f of podSource) {
      assert.match(
        f.explanation,
        /node-gke-lab-default-0\.pcap \(node\/gke-lab-default-0, before\)/,
      );
      assert.match(f.explanation, /remote-onprem-dc1\.pcap \(remote\/onprem-dc1, before\)/);
    }
    // The node's own ping is answered: the healthy sign, info only.
    assert.ok(findings.some((f) => f.id === "masq/wire-node-source" && f.severity === "info"));
    assert.ok(!findings.some((f) => f.id === "masq/reply-missing"));
  });
});

describe("wireFindings: whose traffic carries the node address", () => {
  it("tells masquerade (pod copy arriving on its veth) from the node's own traffic", async () => {
    const masq = await conv(
      [
        syn(1, POD, DEST, 40000, 5432, TCP.SYN, { iface: "veth1", direction: "in" }),
        syn(2, NODE, DEST, 61000, 5432, TCP.SYN, { iface: "eth0", direction: "out" }),
        syn(3, DEST, NODE, 5432, 61000, TCP.SYN | TCP.ACK, { iface: "eth0", direction: "in" }),
      ],
      "m.pcap",
    );
    const own = await conv(
      [
        syn(1, NODE, DEST, 61000, 5432, TCP.SYN, { iface: "eth0", direction: "out" }),
        syn(2, DEST, NODE, 5432, 61000, TCP.SYN | TCP.ACK, { iface: "eth0", direction: "in" }),
      ],
      "o.pcap",
    );
    const [m] = wireFindings({ ...base, captures: [{ file: "m.pcap", conversations: masq }] });
    const [o] = wireFindings({ ...base, captures: [{ file: "o.pcap", conversations: own }] });
    assert.equal(m!.id, "masq/wire-node-source");
    assert.match(m!.explanation, /masquerade is applied/);
    assert.equal(o!.id, "masq/wire-node-source");
    assert.match(o!.explanation, /node's own traffic/);
    assert.doesNotMatch(o!.explanation, /healthy sign/);
  });
});

describe("wireFindings: one packet seen on both sides of the node", () => {
  // A pod's SYN on its veth and on eth0, microseconds apart, the same IP id (tcpdump -i any).
  function copy(
    i: number,
    us: number,
    src: string,
    dst: string,
    flags: number,
    where: Partial<Packet>,
  ) {
    const fromPod = dst === DEST;
    return {
      index: i,
      timeNs: 1_700_000_000_000_000_000n + BigInt(us) * 1000n,
      ...where,
      ip: {
        family: 4 as const,
        src: parseIp(src).value,
        dst: parseIp(dst).value,
        protocol: 6,
        id: fromPod ? 4177 : 0,
      },
      transport: {
        kind: "tcp" as const,
        srcPort: fromPod ? 40000 : 5432,
        dstPort: fromPod ? 5432 : 40000,
        flags,
        seq: fromPod ? 100 : 900,
        ...(fromPod ? {} : { ack: 101 }),
        payloadLength: 0,
      },
    } satisfies Packet;
  }
  const point = { point: "node/gke-a-1" };
  const dirs = {
    vethIn: { iface: "veth1", direction: "in" },
    vethOut: { iface: "veth1", direction: "out" },
    ethIn: { iface: "eth0", direction: "in" },
    ethOut: { iface: "eth0", direction: "out" },
  } as const;

  it("reports the masquerade with both packets and never the pod's copy as untranslated", async () => {
    const c = await conv(
      [
        copy(1, 0, POD, DEST, TCP.SYN, dirs.vethIn),
        copy(2, 40, NODE, DEST, TCP.SYN, dirs.ethOut),
        copy(3, 500, DEST, NODE, TCP.SYN | TCP.ACK, dirs.ethIn),
        copy(4, 510, DEST, POD, TCP.SYN | TCP.ACK, dirs.vethOut),
      ],
      "captures/node.pcap",
    );
    const f = wireFindings({
      ...base,
      captures: [{ file: "captures/node.pcap", meta: point, conversations: c }],
    });
    assert.deepEqual(
      f.map((x) => [x.id, x.severity]),
      [["masq/wire-node-source", "info"]],
    );
    assert.match(
      f[0]!.explanation,
      /pod address 10\.4\.1\.5 → node address 10\.128\.0\.20 on node\/gke-a-1 \(packets 1 and 2\)/,
    );
    assert.match(
      f[0]!.title,
      /pod address 10\.4\.1\.5 leaves toward 10\.20\.30\.40 as the node address/,
    );
    assert.match(f[0]!.explanation, /replies went back to the pod/);
    assert.deepEqual(
      f[0]!.evidence.map((e) => e.line),
      [1, 2, 3, 4],
    );
  });

  it("pairs by IP id where the capture has no directions, and still reports no pod source", async () => {
    const c = await conv(
      [
        copy(1, 0, POD, DEST, TCP.SYN, {}),
        copy(2, 40, NODE, DEST, TCP.SYN, {}),
        copy(3, 500, DEST, NODE, TCP.SYN | TCP.ACK, {}),
        copy(4, 510, DEST, POD, TCP.SYN | TCP.ACK, {}),
      ],
      "captures/node.txt",
    );
    const f = wireFindings({
      ...base,
      captures: [{ file: "captures/node.txt", meta: point, conversations: c }],
    });
    assert.deepEqual(
      f.map((x) => x.id),
      ["masq/wire-node-source"],
    );
    assert.match(f[0]!.explanation, /paired by IP identification \(id 4177\), sequence and time/);
  });

  it("says when the replies reached the node but not the pod", async () => {
    const c = await conv(
      [
        copy(1, 0, POD, DEST, TCP.SYN, dirs.vethIn),
        copy(2, 40, NODE, DEST, TCP.SYN, dirs.ethOut),
        copy(3, 500, DEST, NODE, TCP.SYN | TCP.ACK, dirs.ethIn),
      ],
      "captures/node.pcap",
    );
    const [f] = wireFindings({
      ...base,
      captures: [{ file: "captures/node.pcap", meta: point, conversations: c }],
    });
    assert.equal(f!.id, "masq/wire-node-source");
    assert.match(f!.explanation, /None of the replies is seen going back to the pod/);
  });

  it("reports a translated request without a reply as the far side's problem", async () => {
    const c = await conv(
      [copy(1, 0, POD, DEST, TCP.SYN, dirs.vethIn), copy(2, 40, NODE, DEST, TCP.SYN, dirs.ethOut)],
      "captures/node.pcap",
    );
    const f = wireFindings({
      ...base,
      captures: [{ file: "captures/node.pcap", meta: point, conversations: c }],
    });
    assert.deepEqual(
      f.map((x) => [x.id, x.severity]),
      [["masq/reply-missing", "error"]],
    );
    assert.match(f[0]!.explanation, /on node\/gke-a-1 \(packets 1 and 2\)/);
  });

  it("takes the pod address on both copies as proof the node did not masquerade", async () => {
    for (const where of [
      [dirs.vethIn, dirs.ethOut],
      [{}, {}],
    ] as const) {
      const c = await conv(
        [copy(1, 0, POD, DEST, TCP.SYN, where[0]), copy(2, 40, POD, DEST, TCP.SYN, where[1])],
        "captures/node.pcap",
      );
      const f = wireFindings({
        ...base,
        captures: [{ file: "captures/node.pcap", meta: point, conversations: c }],
      });
      assert.deepEqual(
        f.map((x) => [x.id, x.severity]),
        [["masq/wire-pod-source", "error"]],
      );
      assert.match(
        f[0]!.explanation,
        /as it went on, packets 1 and 2.*with the pod address 10\.4\.1\.5 both times: the node did not masquerade it/,
      );
      assert.deepEqual(f[0]!.evidence.map((e) => e.line).sort(), [1, 2]);
      assert.doesNotMatch(f[0]!.explanation, /does not record directions; the packet is taken/);
    }
  });
});
