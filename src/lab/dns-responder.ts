/**
 * @module lab/dns-responder — a tiny authoritative DNS responder for lab namespaces: answers A
 * queries from a fixed table, NXDOMAIN for other names, and SERVFAIL for everything when asked.
 *
 * Written here rather than installing dnsmasq: the lab needs three behaviours (answer, NXDOMAIN,
 * SERVFAIL) on one UDP port inside a namespace, which is about 80 lines of RFC 1035 framing, and
 * it keeps CI free of another system package. Run as a script:
 * `node dns-responder.ts <bindIp> <port> <mode ok|servfail> name=ip ...`.
 */
import { createSocket } from "node:dgram";

/** RFC 1035 §4.1.1 response codes used here. */
const RCODE = { noError: 0, serverFailure: 2, nameError: 3 } as const;

/** Reads the question name starting at byte 12; undefined when the packet is malformed. */
export function readQuestion(
  msg: Buffer,
): { name: string; qtype: number; end: number } | undefined {
  if (msg.length < 12) return undefined;
  const labels: string[] = [];
  let i = 12;
  for (;;) {
    const len = msg[i];
    if (len === undefined || len > 63) return undefined;
    i++;
    if (len === 0) break;
    if (i + len > msg.length) return undefined;
    labels.push(msg.subarray(i, i + len).toString("latin1"));
    i += len;
  }
  if (i + 4 > msg.length) return undefined;
  return { name: labels.join(".").toLowerCase(), qtype: msg.readUInt16BE(i), end: i + 4 };
}

/** Builds the answer to one query packet. */
export function answer(
  msg: Buffer,
  table: ReadonlyMap<string, string>,
  mode: "ok" | "servfail",
): Buffer | undefined {
  const q = readQuestion(msg);
  if (q === undefined) return undefined;
  const header = Buffer.alloc(12);
  msg.copy(header, 0, 0, 2); // id
  const rd = (msg[2] ?? 0) & 0x01;
  const ip = table.get(q.name.replace(/\.$/, ""));
  const rcode =
    mode === "servfail" ? RCODE.serverFailure : ip === undefined ? RCODE.nameError : RCODE.noError;
  const withAnswer = rcode === RCODE.noError && q.qtype === 1 && ip !== undefined;
  header[2] = 0x84 | rd; // QR=1, AA=1
  header[3] = rcode;
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(withAnswer ? 1 : 0, 6);
  const question = msg.subarray(12, q.end);
  if (!withAnswer) return Buffer.concat([header, question]);
  const rr = Buffer.alloc(16);
  rr.writeUInt16BE(0xc00c, 0); // pointer to the question name
  rr.writeUInt16BE(1, 2); // A
  rr.writeUInt16BE(1, 4); // IN
  rr.writeUInt32BE(30, 6); // TTL
  rr.writeUInt16BE(4, 10);
  ip.split(".").forEach((o, k) => {
    rr[12 + k] = Number(o);
  });
  return Buffer.concat([header, question, rr]);
}

const isMain =
  process.argv[1]?.endsWith("dns-responder.ts") || process.argv[1]?.endsWith("dns-responder.js");
if (isMain) {
  const [bind = "127.0.0.1", port = "53", mode = "ok", ...pairs] = process.argv.slice(2);
  const table = new Map(pairs.map((p) => p.split("=") as [string, string]));
  const sock = createSocket("udp4");
  sock.on("message", (msg, rinfo) => {
    const out = answer(msg, table, mode === "servfail" ? "servfail" : "ok");
    if (out !== undefined) sock.send(out, rinfo.port, rinfo.address);
  });
  sock.bind(Number(port), bind, () => process.stdout.write("ready\n"));
}
