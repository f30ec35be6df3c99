/**
 * The source MASQUERADE gives the node's own packet on lo, from the evidence: `ip addr`'s first
 * interface with a global primary address of the family, else the node's addresses as candidates.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseCidr, parseIp } from "../net/cidr.ts";
import { loMasqueradeSource, settleCandidates } from "./lo-masquerade.ts";
import type { PathOutcome, PathVerdict } from "./path-types.ts";

const ref = { file: "nodes/n1/ip-addr.txt", line: 7 };

function outcome(verdict: PathVerdict): PathOutcome {
  return {
    steps: [],
    verdict,
    assumptions: [],
    probability: 1,
    dstOut: parseIp("192.168.10.2"),
    kind: "output",
  };
}

describe("loMasqueradeSource", () => {
  it("takes the first interface whose primary address is of the family, with its ip addr line", () => {
    const r = loMasqueradeSource(
      {
        interfaces: [
          { name: "lo", addresses: [{ ip: parseIp("127.0.0.1"), prefix: 8 }] },
          { name: "v6only", primary: parseIp("fd00::1") },
          { name: "eth0", primary: parseIp("192.168.10.2"), primarySource: ref },
          { name: "pod0", primary: parseIp("10.244.0.1") },
        ],
      },
      4,
    );
    assert.deepEqual(r, { kind: "known", ip: parseIp("192.168.10.2"), iface: "eth0", source: ref });
  });

  it("is unknown when ip addr lists no global address of the family", () => {
    const r = loMasqueradeSource(
      { interfaces: [{ name: "lo", addresses: [{ ip: parseIp("127.0.0.1"), prefix: 8 }] }] },
      4,
    );
    assert.deepEqual(r, { kind: "unknown" });
  });

  it("without ip addr, offers the node's global addresses, leaving out loopback and link-local", () => {
    const r = loMasqueradeSource(
      {
        localAddresses: [
          parseIp("127.0.0.1"),
          parseIp("169.254.1.1"),
          parseIp("10.244.0.1"),
          parseCidr("192.168.10.2/32"),
          parseIp("10.244.0.1"),
          parseIp("fd00::1"),
        ],
      },
      4,
    );
    assert.deepEqual(r, {
      kind: "candidates",
      ips: [parseIp("10.244.0.1"), parseIp("192.168.10.2")],
    });
  });

  it("offers IPv6's global addresses as candidates (source address selection is not followed)", () => {
    const r = loMasqueradeSource(
      {
        interfaces: [{ name: "eth0", primary: parseIp("fd00::2") }],
        localAddresses: [
          parseIp("::1"),
          parseIp("fe80::1"),
          parseIp("fd00::2"),
          parseIp("fd00::3"),
        ],
      },
      6,
    );
    assert.deepEqual(r, { kind: "candidates", ips: [parseIp("fd00::2"), parseIp("fd00::3")] });
  });

  it("is unknown when an address block does not say which address an interface holds", () => {
    const r = loMasqueradeSource({ localAddresses: [parseCidr("10.0.0.0/8")] }, 4);
    assert.deepEqual(r, { kind: "unknown" });
    assert.deepEqual(loMasqueradeSource({}, 4), { kind: "unknown" });
  });
});

describe("settleCandidates", () => {
  const delivered = outcome({ kind: "delivered", dst: parseIp("192.168.10.2"), port: 6443 });
  const dropped = outcome({
    kind: "dropped",
    by: { file: "nodes/n1/iptables-save.txt", line: 12 },
    table: "filter",
    chain: "INPUT",
  });

  it("keeps the first candidate's outcomes when every candidate ends the same way", () => {
    assert.deepEqual(settleCandidates([[delivered], [delivered]]), [delivered]);
  });

  it("settles nothing when the candidates end differently", () => {
    assert.equal(settleCandidates([[delivered], [dropped]]), undefined);
    assert.equal(settleCandidates([[delivered], [delivered, dropped]]), undefined);
  });
});
