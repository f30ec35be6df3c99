import assert from "node:assert/strict";
import { createSocket } from "node:dgram";
import { createServer } from "node:net";
import { describe, it } from "node:test";
import { answer } from "../lab/dns-responder.ts";
import { type ProbeSystem, parseIpPort, pingArgv, probeOutward, realSystem } from "./probe.ts";

const IPUTILS_REPLY = (ip: string) =>
  `PING ${ip} (${ip}) 56(84) bytes of data.\n64 bytes from ${ip}: icmp_seq=1 ttl=64 time=0.5 ms\n\n--- ${ip} ping statistics ---\n1 packets transmitted, 1 received, 0% packet loss, time 0ms\n`;
const IPUTILS_SILENT = (ip: string) =>
  `PING ${ip} (${ip}) 56(84) bytes of data.\n\n--- ${ip} ping statistics ---\n1 packets transmitted, 0 received, 100% packet loss, time 0ms\n`;

/** A system whose ping answers only for `answering` addresses; records what ran. */
function fake(
  answering: Set<string>,
  tools = new Set(["ping", "dig"]),
): ProbeSystem & { ran: string[][] } {
  const ran: string[][] = [];
  return {
    ran,
    platform: "linux",
    has: (p) => tools.has(p),
    exec: async (argv) => {
      ran.push([...argv]);
      const target = argv.at(-1)!;
      if (argv[0] === "ping")
        return answering.has(target)
          ? { code: 0, output: IPUTILS_REPLY(target) }
          : { code: 1, output: IPUTILS_SILENT(target) };
      return {
        code: 9,
        output:
          ";; communications error to 10.96.0.10#53: timed out\n;; no servers could be reached\n",
      };
    },
    connect: async (ip, port) => ({
      outcome: answering.has(`${ip}:${port}`) ? "connected" : "timeout",
      ms: 5,
    }),
    resolve: async (name) =>
      answering.has(name)
        ? { addresses: ["10.96.0.20"], ms: 2 }
        : { addresses: [], ms: 2000, code: "ETIMEOUT" },
  };
}

const targets = {
  peer: "10.8.0.1",
  podIp: "10.244.2.20",
  serviceIp: { ip: "10.96.0.20", port: 80 },
  public: "198.51.100.7",
  name: "web.demo.svc.cluster.local",
  dnsServer: "10.96.0.10",
};
const base = { timeoutMs: 1000, count: 1, all: false, clientName: "laptop" };

describe("probeOutward", () => {
  it("stops at the first silent hop and names its layer", async () => {
    const sys = fake(new Set(["10.8.0.1"]));
    const r = await probeOutward(targets, sys, base);
    assert.deepEqual(
      r.steps.map((s) => [s.role, s.answered]),
      [
        ["peer", true],
        ["pod-ip", false],
      ],
    );
    assert.equal(r.stoppedAt?.layer, "vpn-pod-forwarding");
    assert.equal(sys.ran.length, 2, "nothing past the silent hop is probed");
    // the transcript reads back with roles and results
    assert.deepEqual(
      r.parsed.commands.map((c) => [c.role, c.result]),
      [
        ["peer", "replies"],
        ["pod-ip", "timeout"],
      ],
    );
    assert.equal(r.parsed.client?.name, "laptop");
  });

  it("with --all probes every named target, in walk order", async () => {
    const r = await probeOutward(targets, fake(new Set(["10.8.0.1", "198.51.100.7"])), {
      ...base,
      all: true,
    });
    assert.deepEqual(
      r.steps.map((s) => [s.role, s.answered]),
      [
        ["peer", true],
        ["pod-ip", false],
        ["service-ip", false],
        ["public", true],
        ["name", false],
      ],
    );
    assert.equal(r.stoppedAt?.role, "pod-ip");
  });

  it("only probes the targets named, and passes when all answer", async () => {
    const sys = fake(new Set(["10.8.0.1", "10.96.0.20:80"]));
    const r = await probeOutward(
      { peer: "10.8.0.1", serviceIp: { ip: "10.96.0.20", port: 80 } },
      sys,
      base,
    );
    assert.equal(r.stoppedAt, undefined);
    assert.deepEqual(
      r.steps.map((s) => s.role),
      ["peer", "service-ip"],
    );
  });

  it("without ping and dig, uses TCP connects and Node's resolver, in a form the parser reads", async () => {
    const sys = fake(new Set(["10.8.0.1:443", "web.demo.svc.cluster.local"]), new Set());
    const r = await probeOutward(
      { peer: "10.8.0.1", name: targets.name, dnsServer: "10.96.0.10" },
      sys,
      base,
    );
    assert.deepEqual(
      r.parsed.commands.map((c) => [c.tool, c.result]),
      [
        ["tcp-connect", "ok"],
        ["resolve", "ok"],
      ],
    );
    assert.match(
      r.transcript,
      /\$ resolve web\.demo\.svc\.cluster\.local @10\.96\.0\.10 {2}# name/,
    );
  });

  it("bounds ping by count and timeout on each platform", () => {
    assert.deepEqual(pingArgv("linux", "10.8.0.1", 3, 2000), [
      "ping",
      "-c",
      "3",
      "-W",
      "2",
      "10.8.0.1",
    ]);
    assert.deepEqual(pingArgv("win32", "10.8.0.1", 2, 1500), [
      "ping",
      "-n",
      "2",
      "-w",
      "1500",
      "10.8.0.1",
    ]);
    assert.deepEqual(pingArgv("darwin", "10.8.0.1", 2, 1000), [
      "ping",
      "-c",
      "2",
      "-t",
      "2",
      "10.8.0.1",
    ]);
  });

  it("parses IP[:PORT]", () => {
    assert.deepEqual(parseIpPort("10.96.0.20:80"), { ip: "10.96.0.20", port: 80 });
    assert.deepEqual(parseIpPort("10.96.0.20"), { ip: "10.96.0.20" });
    assert.deepEqual(parseIpPort("[fd00::1]:443"), { ip: "fd00::1", port: 443 });
    assert.equal(parseIpPort("10.96.0.20:99999"), undefined);
    assert.equal(parseIpPort("web:80"), undefined);
  });
});

describe("probeOutward on loopback (real ping, sockets and resolver)", () => {
  it("pings, connects (open and refused) and resolves through a local DNS responder", async () => {
    const server = createServer((s) => s.end());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const open = (server.address() as { port: number }).port;
    const closed = await new Promise<number>((r) => {
      const s = createServer();
      s.listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => r(p));
      });
    });
    const dns = createSocket("udp4");
    const table = new Map([["web.lab.test", "10.96.0.20"]]);
    dns.on("message", (msg, rinfo) => {
      const out = answer(msg, table, "ok");
      if (out) dns.send(out, rinfo.port, rinfo.address);
    });
    await new Promise<void>((r) => dns.bind(0, "127.0.0.1", r));
    const dnsPort = dns.address().port;
    try {
      const real = realSystem();
      // dig cannot be pointed at a port through probe's options: use the resolver here
      const sys: ProbeSystem = { ...real, has: (p) => p !== "dig" && real.has(p) };
      const r = await probeOutward(
        {
          peer: "127.0.0.1",
          serviceIp: { ip: "127.0.0.1", port: open },
          name: "web.lab.test",
          dnsServer: `127.0.0.1:${dnsPort}`,
        },
        sys,
        { ...base, all: true },
      );
      assert.deepEqual(
        r.steps.map((s) => [s.role, s.result]),
        [
          ["peer", real.has("ping") ? "replies" : "refused"],
          ["service-ip", "ok"],
          ["name", "ok"],
        ],
      );
      const refused = await probeOutward(
        { serviceIp: { ip: "127.0.0.1", port: closed } },
        sys,
        base,
      );
      assert.equal(refused.steps[0]?.result, "refused");
      assert.equal(refused.stoppedAt, undefined, "a refused connection answered: the path works");
      const nx = await probeOutward(
        { name: "nope.lab.test", dnsServer: `127.0.0.1:${dnsPort}` },
        sys,
        base,
      );
      assert.equal(nx.steps[0]?.result, "nxdomain");
      assert.equal(nx.stoppedAt?.layer, "dns");
    } finally {
      server.close();
      dns.close();
    }
  });
});
