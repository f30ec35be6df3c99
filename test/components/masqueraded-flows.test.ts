/**
 * The conntrack reading of test/components/masqueraded-flows.ts on lines as `conntrack -L` prints
 * them (conntrack-tools 1.4): the original tuple and the reply tuple, TCP and UDP, other
 * protocols left out.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseConntrack } from "./masqueraded-flows.ts";

describe("parseConntrack", () => {
  it("reads each connection's original and reply tuples", () => {
    const text = [
      "tcp      6 118 SYN_SENT src=10.244.0.5 dst=192.168.10.2 sport=40003 dport=30080 [UNREPLIED] src=10.244.1.9 dst=192.168.10.2 sport=8080 dport=14626 mark=0 use=1",
      "udp      17 28 src=192.168.10.2 dst=10.96.0.10 sport=40012 dport=53 [UNREPLIED] src=10.244.2.7 dst=192.168.20.2 sport=5353 dport=61234 mark=0 use=1",
      "icmp     1 29 src=10.244.0.5 dst=10.20.30.40 type=8 code=0 id=7 [UNREPLIED] src=10.20.30.40 dst=10.244.0.5 type=0 code=0 id=7 mark=0 use=1",
      "",
    ].join("\n");
    assert.deepEqual(parseConntrack(text), [
      {
        proto: "tcp",
        orig: { src: "10.244.0.5", dst: "192.168.10.2", sport: 40003, dport: 30080 },
        reply: { src: "10.244.1.9", dst: "192.168.10.2", sport: 8080, dport: 14626 },
      },
      {
        proto: "udp",
        orig: { src: "192.168.10.2", dst: "10.96.0.10", sport: 40012, dport: 53 },
        reply: { src: "10.244.2.7", dst: "192.168.20.2", sport: 5353, dport: 61234 },
      },
    ]);
  });
});
