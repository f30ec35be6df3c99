import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { type FlowSpec, parseFlowSpec } from "./flow-spec.ts";
import { kernelSkip } from "./kernel-guard.ts";
import { natSection, parseConntrackLine } from "./nat-sandbox.ts";
import { ReplayError, replayFlow } from "./replay.ts";

const EXAMPLE = readFileSync(
  new URL(
    "../../examples/snat-exception-list/nodes/gke-lab-default-0/iptables-save.txt",
    import.meta.url,
  ),
  "utf8",
);
const flow = (s: string, proto?: string): FlowSpec => {
  const f = parseFlowSpec(s, proto);
  if ("error" in f) throw new Error(f.error);
  return f;
};

describe("natSection", () => {
  it("cuts the nat table out of a full dump", () => {
    const dump =
      "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n";
    assert.equal(
      natSection(dump),
      "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n",
    );
    assert.equal(natSection("*filter\nCOMMIT\n"), undefined);
    assert.equal(natSection("*nat\n-A X -j Y\n"), undefined);
  });
});

describe("parseConntrackLine", () => {
  it("splits the original and reply tuples", () => {
    const p = parseConntrackLine(
      "tcp      6 117 SYN_SENT src=10.4.0.5 dst=10.20.30.40 sport=43366 dport=5432 [UNREPLIED] src=10.20.30.40 dst=10.128.0.2 sport=5432 dport=61000 mark=0 use=1",
    );
    assert.deepEqual(p?.orig, {
      src: "10.4.0.5",
      dst: "10.20.30.40",
      sport: "43366",
      dport: "5432",
    });
    assert.equal(p?.reply["dst"], "10.128.0.2");
    assert.equal(p?.reply["dport"], "61000");
    assert.equal(parseConntrackLine(""), undefined);
  });
});

describe("replayFlow", { skip: kernelSkip() }, () => {
  it("replays the seed node: exempt on-prem keeps the pod address, the internet is masqueraded", async () => {
    const onprem = await replayFlow(EXAMPLE, flow("10.4.0.5->10.20.30.40:5432"));
    assert.equal(onprem.kernelSource, "10.4.0.5");
    assert.equal(onprem.trace.decision, "keep");
    assert.equal(onprem.agree, true);
    const out = await replayFlow(EXAMPLE, flow("10.4.0.5->8.8.8.8:53", "udp"), {
      nodeIp: "10.128.0.7",
    });
    assert.equal(out.kernelSource, "10.128.0.7");
    assert.equal(out.trace.decision, "masquerade");
    assert.equal(out.agree, true);
    assert.match(out.trace.decidingRule?.text ?? "", /MASQUERADE/);
  });

  it("replays the node's own traffic through OUTPUT and POSTROUTING", async () => {
    const r = await replayFlow(EXAMPLE, flow("10.128.0.2->10.20.30.40"));
    assert.equal(r.kernelSource, "10.128.0.2");
    assert.equal(r.agree, true);
  });

  it("refuses a table the kernel refuses, naming the kernel's complaint", async () => {
    const bad =
      "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -m nosuchmatch -j MASQUERADE\nCOMMIT\n";
    await assert.rejects(replayFlow(bad, flow("10.4.0.5->8.8.8.8")), (e: unknown) => {
      assert.ok(e instanceof ReplayError);
      assert.equal(e.code, "ERR_REPLAY_KERNEL");
      assert.match(e.message, /nosuchmatch/);
      return true;
    });
  });

  it("refuses input without a nat table, or a node address of the other family, before building anything", async () => {
    await assert.rejects(replayFlow("*filter\nCOMMIT\n", flow("10.4.0.5->8.8.8.8")), {
      code: "ERR_REPLAY_INPUT",
    });
    await assert.rejects(replayFlow(EXAMPLE, flow("fd00::5->fd00::1"), { nodeIp: "10.128.0.2" }), {
      code: "ERR_REPLAY_INPUT",
      message: /not an IPv6 address/,
    });
  });
});

/** An ip6tables-save nat table as kubenet writes it for IPv6: masquerade all but the pod range. */
const V6_DUMP = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING ! -d fd00:10:244::/56 -m comment --comment "kubenet: SNAT for outbound traffic from cluster" -m addrtype ! --dst-type LOCAL -j MASQUERADE
COMMIT
`;

const ipv6Skip = () =>
  kernelSkip() || (existsSync("/proc/sys/net/ipv6") ? false : "IPv6 is disabled in this kernel");

describe("replayFlow over IPv6", { skip: ipv6Skip() }, () => {
  it("loads ip6tables rules: the pod range keeps its address, elsewhere the node's IPv6 address", async () => {
    const inside = await replayFlow(V6_DUMP, flow("fd00:10:244:1::5->[fd00:10:244:2::7]:8080"));
    assert.equal(inside.kernelSource, "fd00:10:244:1::5");
    assert.equal(inside.trace.decision, "keep");
    assert.equal(inside.agree, true);
    const out = await replayFlow(V6_DUMP, flow("fd00:10:244:1::5->[fd00:20::30:40]:5432"), {
      nodeIp: "fd00:172:16:1::10",
    });
    assert.equal(out.kernelSource, "fd00:172:16:1::10");
    assert.equal(out.trace.decision, "masquerade");
    assert.equal(out.agree, true);
    const udp = await replayFlow(V6_DUMP, flow("fd00:10:244:1::5->[fd00:20::30:40]:53", "udp"));
    assert.equal(udp.kernelSource, "fd00:128::2");
    assert.equal(udp.agree, true);
    const ping = await replayFlow(V6_DUMP, flow("fd00:10:244:1::5->fd00:20::30:40"));
    assert.equal(ping.kernelSource, "fd00:128::2");
    assert.equal(ping.agree, true);
  });

  it("refuses an IPv4 table for an IPv6 flow before loading it, naming the first line", async () => {
    await assert.rejects(replayFlow(EXAMPLE, flow("fd00::5->fd00::1")), {
      code: "ERR_REPLAY_INPUT",
      message: /^line \d+: /,
    });
  });

  it("reads a table naming no address as ip6tables rules for an IPv6 flow", async () => {
    const r = await replayFlow(
      "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n",
      flow("fd00:10:244:1::5->fd00:20::30:40"),
    );
    assert.equal(r.trace.decision, "masquerade");
    assert.equal(r.kernelSource, "fd00:128::2");
    assert.equal(r.agree, true);
  });
});

describe("reader robustness", () => {
  it("natSection and parseConntrackLine never throw on arbitrary text", async () => {
    const fc = (await import("fast-check")).default;
    const linesArb = fc.array(
      fc.oneof(
        fc.string(),
        fc.constantFrom(
          "*nat",
          "COMMIT",
          "*filter",
          ":POSTROUTING ACCEPT [0:0]",
          "src=1 dst=2 sport=x",
        ),
      ),
      { maxLength: 30 },
    );
    fc.assert(
      fc.property(linesArb, (lines) => {
        const text = lines.join("\n");
        const section = natSection(text);
        if (section !== undefined) {
          assert.ok(section.startsWith("*nat\n") || section.startsWith("*nat"));
          assert.match(section, /COMMIT\n$/);
        }
        for (const l of lines) parseConntrackLine(l);
        return true;
      }),
    );
  });
});
