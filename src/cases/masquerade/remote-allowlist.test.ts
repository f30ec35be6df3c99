/** @module cases/masquerade/remote-allowlist.test — the far side's allowlists toward a flow. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readRemoteSites } from "../../evidence/remote-site.ts";
import { parseIp } from "../../net/cidr.ts";
import type { TracedDestination } from "./destinations.ts";
import { allowlistRejectsFinding, allowlistVerdict, answeredOnWire } from "./remote-allowlist.ts";

const SITE = `kind: RemoteSite
name: onprem-dc1
prefixes: [10.20.0.0/16]
allowlists:
  - name: db-firewall
    sources:
      - 10.4.0.0/14
    destinations:
      - 10.20.30.40/32
    ports:
      - tcp/5432
`;

const site = () => {
  const r = readRemoteSites(SITE, "remote/onprem-dc1.yaml");
  assert.deepEqual(r.diagnostics, []);
  return r.value![0]!;
};
const db: TracedDestination = { ip: parseIp("10.20.30.40"), port: 5432, protocol: "tcp", why: "" };

describe("allowlistVerdict", () => {
  it("admits the pod range, rejects the node address, cited to the allowlist's lines", () => {
    assert.equal(allowlistVerdict(site(), db, parseIp("10.4.1.9")).kind, "admits");
    const v = allowlistVerdict(site(), db, parseIp("10.128.0.2"));
    assert.equal(v.kind, "rejects");
    if (v.kind !== "rejects") return;
    const f = allowlistRejectsFinding(site(), db, parseIp("10.4.0.5"), parseIp("10.128.0.2"), v);
    assert.equal(f.id, "masq/remote-allowlist-rejects");
    assert.equal(f.severity, "error");
    assert.match(f.explanation, /admits only 10\.4\.0\.0\/14/);
    assert.deepEqual(
      f.evidence.map((e) => e.line),
      [5, 7],
    );
  });

  it("says nothing for another port or destination (no allowlist applies)", () => {
    const node = parseIp("10.128.0.2");
    assert.equal(allowlistVerdict(site(), { ...db, port: 22 }, node).kind, "none");
    assert.equal(
      allowlistVerdict(site(), { ...db, ip: parseIp("10.20.30.41") }, node).kind,
      "none",
    );
    assert.equal(allowlistVerdict(site(), { ...db, protocol: "udp" }, node).kind, "none");
  });
});

describe("answeredOnWire", () => {
  const node = parseIp("10.128.0.2");
  const conversation = (synAcks: number, port = 5432) => ({
    protocol: "tcp",
    initiator: { ip: node, port: 40000 },
    responder: { ip: db.ip, port },
    replied: synAcks > 0,
    tcp: { synAckCount: synAcks },
    firstReply: { ref: { file: "captures/remote.pcap", line: 3 } },
  });
  const captures = (c: ReturnType<typeof conversation>) =>
    [{ file: "captures/remote.pcap", conversations: [c] }] as unknown as Parameters<
      typeof answeredOnWire
    >[0];

  it("finds the far side's SYN-ACK to the arriving source, and turns the finding into a warning", () => {
    const answered = answeredOnWire(captures(conversation(1)), db, node);
    assert.equal(answered?.ref.line, 3);
    const v = allowlistVerdict(site(), db, node);
    if (v.kind !== "rejects") throw new Error(v.kind);
    const f = allowlistRejectsFinding(site(), db, parseIp("10.4.0.5"), node, v, answered);
    assert.equal(f.severity, "warning");
    assert.equal(f.evidence[0]?.file, "captures/remote.pcap");
    assert.match(f.explanation, /The wire decides/);
  });

  it("takes no SYN-ACK, another port or another source as an answer", () => {
    assert.equal(answeredOnWire(captures(conversation(0)), db, node), undefined);
    assert.equal(answeredOnWire(captures(conversation(1, 22)), db, node), undefined);
    assert.equal(answeredOnWire(captures(conversation(1)), db, parseIp("10.128.0.3")), undefined);
  });
});
