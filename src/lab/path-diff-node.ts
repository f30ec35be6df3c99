/**
 * @module lab/path-diff-node — podpath's side of a whole-path differential run (IPv4 or IPv6,
 * iptables or nftables): the sandbox node's files written as a snapshot's node `n1`, and a
 * generated flow as the packet podpath's whole-path evaluator is asked about. An explicit I/O
 * module (it writes the snapshot).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseIp } from "../net/cidr.ts";
import type { PathPacket } from "../path/path-types.ts";
import type { PathFlow } from "./path-gen.ts";

/** Writes the node's files (by their snapshot file names) as node `n1` of the snapshot `dir`. */
export function writeNodeSnapshot(dir: string, files: Readonly<Record<string, string>>): void {
  const n = join(dir, "nodes", "n1");
  mkdirSync(n, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(n, name), text);
}

/** The packet podpath evaluates for a flow (a later packet of a connection: ESTABLISHED). */
export function pathPacketOf(f: PathFlow): PathPacket {
  return {
    src: parseIp(f.src),
    dst: parseIp(f.dst),
    proto: f.proto,
    ...(f.sport !== undefined ? { sport: f.sport } : {}),
    ...(f.dport !== undefined ? { dport: f.dport } : {}),
    origin: f.origin,
    ...(f.established ? { ctstate: "ESTABLISHED" as const } : {}),
  };
}
