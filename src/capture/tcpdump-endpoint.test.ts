import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseIp } from "../net/cidr.ts";
import { readEnd } from "./tcpdump-endpoint.ts";

const ip = (s: string) => parseIp(s);

describe("readEnd", () => {
  it("reads addresses with and without ports, IPv4 and IPv6", () => {
    assert.deepEqual(readEnd("10.0.0.1", undefined), { ip: ip("10.0.0.1") });
    assert.deepEqual(readEnd("10.0.0.1.5432", true), { ip: ip("10.0.0.1"), port: 5432 });
    assert.deepEqual(readEnd("10.0.0.1.5432", undefined), { ip: ip("10.0.0.1"), port: 5432 });
    assert.deepEqual(readEnd("fd00::2.53", undefined), { ip: ip("fd00::2"), port: 53 });
    assert.deepEqual(readEnd("ff02::16", undefined), { ip: ip("ff02::16") });
  });

  it("keeps host names as names and maps known service names to their ports", () => {
    assert.deepEqual(readEnd("gke-node.internal.ssh", true), {
      name: "gke-node.internal",
      port: 22,
    });
    assert.deepEqual(readEnd("dns.google.domain", undefined), { name: "dns.google", port: 53 });
    assert.deepEqual(readEnd("10.0.0.4.https", undefined), { ip: ip("10.0.0.4"), port: 443 });
    assert.deepEqual(readEnd("fd00::2.postgresql", undefined), { ip: ip("fd00::2"), port: 5432 });
    assert.deepEqual(readEnd("gw.http", true), { name: "gw", port: 80 });
    assert.deepEqual(readEnd("db.corp.example", false), { name: "db.corp.example" });
  });

  it("keeps a service name it does not know only where the protocol has ports", () => {
    assert.deepEqual(readEnd("db.corp.sun-sr-https", true), {
      name: "db.corp",
      port: 0,
      service: "sun-sr-https",
    });
    // Without the protocol saying so, an unknown last label is part of the host name.
    assert.deepEqual(readEnd("db.corp.example", undefined), { name: "db.corp.example" });
    assert.deepEqual(readEnd("node-a.internal.37116", undefined), {
      name: "node-a.internal",
      port: 37116,
    });
  });

  it("refuses what is neither an address nor a name", () => {
    assert.equal(readEnd("10.0.0", undefined), undefined);
    assert.equal(readEnd("10.0.0.1.5432", false), undefined);
    assert.equal(readEnd("a>b", undefined), undefined);
    assert.equal(readEnd("10.0.0.1", true), undefined);
  });
});
