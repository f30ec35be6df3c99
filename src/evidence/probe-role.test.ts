/** @module evidence/probe-role.test — which hop a probe tests, from its target and the known addresses. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Cidr, parseIp } from "../net/cidr.ts";
import { type ProbeRoleContext, probeRole } from "./probe-role.ts";
import { parseProbeTranscript } from "./probes.ts";

const TRANSCRIPT = `# client: laptop vpn-address: 10.8.0.2
$ ping -c 1 -W 1 10.8.0.1
PING 10.8.0.1 (10.8.0.1) 56(84) bytes of data.
64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=0.307 ms
$ ping -c 1 -W 1 10.244.2.20
PING 10.244.2.20 (10.244.2.20) 56(84) bytes of data.

--- 10.244.2.20 ping statistics ---
1 packets transmitted, 0 received, 100% packet loss, time 0ms
$ curl -sS -m 3 -o /dev/null http://10.96.0.20/
$ ping -c 1 -W 1 198.51.100.7
PING 198.51.100.7 (198.51.100.7) 56(84) bytes of data.
64 bytes from 198.51.100.7: icmp_seq=1 ttl=62 time=0.405 ms
$ ping -c 1 -W 1 10.250.9.9
PING 10.250.9.9 (10.250.9.9) 56(84) bytes of data.
$ ping -c 1 -W 1 172.16.0.9   # service-ip
PING 172.16.0.9 (172.16.0.9) 56(84) bytes of data.
$ dig @10.96.0.10 web.demo.svc.cluster.local +time=2 +tries=1
;; no servers could be reached
$ ip route
10.8.0.0/24 dev tun0 proto kernel scope link src 10.8.0.2
`;

const cidr = (family: 4, start: number, prefix: number): Cidr => ({
  family,
  start: BigInt(start),
  end: BigInt(start) + (1n << BigInt(32 - prefix)) - 1n,
  prefix,
});
const source = { file: "cluster/nodes.yaml", line: 1 };

describe("probeRole", () => {
  const cmds = parseProbeTranscript(TRANSCRIPT, "probes/laptop.txt").value.commands;
  const ctx: ProbeRoleContext = {
    peer: parseIp("10.8.0.1"),
    podRanges: [{ value: cidr(4, 0x0af40200, 24), source }], // 10.244.2.0/24
    serviceIps: [parseIp("10.96.0.20")],
    pushed: [],
  };
  const roles = (c: ProbeRoleContext) => cmds.map((x) => probeRole(x, c));

  it("places each target: peer, pod range, Service IP, public; a role comment wins; ip route tests nothing", () => {
    assert.deepEqual(roles(ctx), [
      "peer",
      "pod-ip",
      "service-ip",
      "public",
      undefined, // a private address nothing places
      "service-ip",
      "name",
      undefined,
    ]);
  });

  it("a pushed route that covers the pod network makes its other addresses in-cluster", () => {
    const pushed = [cidr(4, 0x0a000000, 8)]; // 10.0.0.0/8 covers 10.244.2.0/24 and 10.250.9.9
    assert.equal(roles({ ...ctx, pushed })[4], "pod-ip");
  });

  it("without the VPN pod's evidence the peer is a private address it cannot place", () => {
    const { peer: _peer, ...noPeer } = ctx;
    assert.equal(roles(noPeer)[0], undefined);
  });
});
