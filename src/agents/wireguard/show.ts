/**
 * @module agents/wireguard/show — `wg show [IFACE]` output as wireguard-tools prints it: per
 * interface its listening port, per peer its endpoint, allowed ips, latest handshake and transfer
 * counters. Is the tunnel up at all? A peer without a `latest handshake` line never completed one;
 * `transfer` says whether anything crossed. (`wg showconf` output is a config: agents/wireguard/config.)
 */

import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";
import { redactKeys } from "./config.ts";

export interface WgShowPeer {
  readonly publicKey: string;
  readonly source: SourceRef;
  readonly endpoint?: Located<string>;
  readonly allowedIps: readonly Located<Cidr>[];
  /** Seconds since the latest handshake (`Now` is 0); undefined: the line is absent (none yet). */
  readonly handshakeAgoSeconds?: Located<number>;
  readonly receivedBytes?: Located<number>;
  readonly sentBytes?: Located<number>;
}

export interface WgShowInterface {
  readonly name: string;
  readonly source: SourceRef;
  readonly listeningPort?: Located<number>;
  readonly peers: readonly WgShowPeer[];
}

export interface WgShow {
  readonly file: string;
  readonly interfaces: readonly WgShowInterface[];
}

const UNIT_SECONDS: Readonly<Record<string, number>> = {
  year: 365 * 86400,
  day: 86400,
  hour: 3600,
  minute: 60,
  second: 1,
};
const UNIT_BYTES: Readonly<Record<string, number>> = {
  B: 1,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
  TiB: 1024 ** 4,
};

/** `1 minute, 3 seconds ago` → 63; `Now` → 0 (wireguard-tools' ago()). */
function agoSeconds(text: string): number | undefined {
  if (/^now$/i.test(text)) return 0;
  const body = text.replace(/\s+ago$/, "");
  let total = 0;
  for (const part of body.split(",")) {
    const m = /^\s*(\d+)\s+(year|day|hour|minute|second)s?\s*$/.exec(part);
    if (!m) return undefined;
    total += Number(m[1]) * UNIT_SECONDS[m[2]!]!;
  }
  return total;
}

/** `1.21 KiB` → 1239 (rounded); wireguard-tools prints B, KiB, MiB, GiB, TiB. */
function bytesOf(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s+(B|KiB|MiB|GiB|TiB)$/.exec(text.trim());
  return m ? Math.round(Number(m[1]) * UNIT_BYTES[m[2]!]!) : undefined;
}

/**
 * Reads `wg show` (one or all interfaces). Lines it does not know (`preshared key`, `persistent
 * keepalive`, `fwmark`) are skipped; a known line with a value it cannot read is a warning.
 *
 * @example readWgShow("interface: wg0\n  listening port: 51820\n", "wg-show.txt").value.interfaces[0]?.name
 */
export function readWgShow(text: string, file: string): Parsed<WgShow> {
  const diagnostics: Diagnostic[] = [];
  const interfaces: { -readonly [K in keyof WgShowInterface]: WgShowInterface[K] }[] = [];
  let peer: { -readonly [K in keyof WgShowPeer]: WgShowPeer[K] } | undefined;
  let peers: WgShowPeer[] = [];
  const flushPeer = () => {
    if (peer) peers.push(peer);
    peer = undefined;
  };
  text.split(/\r?\n/).forEach((raw, idx) => {
    const line = idx + 1;
    const t = redactKeys(raw.trim());
    if (t === "") return;
    const source: SourceRef = { file, line, text: t };
    const bad = (expected: string) =>
      diagnostics.push({
        code: "WIREGUARD_SHOW",
        severity: "warning",
        message: `"${t}": expected ${expected}`,
        source,
      });
    const colon = t.indexOf(":");
    if (colon <= 0) {
      bad("KEY: VALUE as wg show prints it (interface:, peer:, latest handshake: …)");
      return;
    }
    const key = t.slice(0, colon).trim();
    const value = t.slice(colon + 1).trim();
    if (key === "interface") {
      flushPeer();
      peers = [];
      interfaces.push({ name: value, source, peers });
      return;
    }
    const iface = interfaces.at(-1);
    if (!iface) {
      bad('"interface: NAME" first');
      return;
    }
    if (key === "peer") {
      flushPeer();
      peer = { publicKey: value, source, allowedIps: [] };
      return;
    }
    if (!peer) {
      if (key === "listening port") {
        if (/^\d+$/.test(value)) iface.listeningPort = { value: Number(value), source };
        else bad("listening port: a port number");
      }
      return; // public key, private key (hidden), fwmark
    }
    switch (key) {
      case "endpoint":
        peer.endpoint = { value, source };
        return;
      case "allowed ips": {
        if (value === "(none)") return;
        const ips: Located<Cidr>[] = [];
        for (const a of value.split(",")) {
          const c = tryParseCidr(a.trim());
          if ("cidr" in c) ips.push({ value: c.cidr, source });
          else bad("allowed ips: PREFIX/LEN, …");
        }
        peer.allowedIps = ips;
        return;
      }
      case "latest handshake": {
        const s = agoSeconds(value);
        if (s === undefined) bad("latest handshake: N unit(s), … ago, or Now");
        else peer.handshakeAgoSeconds = { value: s, source };
        return;
      }
      case "transfer": {
        const m = /^(.+?) received, (.+?) sent$/.exec(value);
        const rx = m ? bytesOf(m[1]!) : undefined;
        const tx = m ? bytesOf(m[2]!) : undefined;
        if (rx === undefined || tx === undefined) bad("transfer: N UNIT received, N UNIT sent");
        else {
          peer.receivedBytes = { value: rx, source };
          peer.sentBytes = { value: tx, source };
        }
        return;
      }
      default:
        return;
    }
  });
  flushPeer();
  return { value: { file, interfaces }, diagnostics };
}

/** Does this text look like `wg show` output? */
export function looksLikeWgShow(text: string): boolean {
  return /^interface: \S+/m.test(text);
}
