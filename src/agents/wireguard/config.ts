/**
 * @module agents/wireguard/config — a WireGuard config as wg-quick reads it (`wg0.conf`) and as
 * `wg showconf` prints it: `[Interface]` Address, ListenPort, DNS, PostUp/PostDown (PreUp/PreDown)
 * commands, and each `[Peer]`'s PublicKey, AllowedIPs and Endpoint. The PrivateKey (and a peer's
 * PresharedKey) is only noted as present, with its line: its value is never kept or printed.
 */

import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, type Ip, tryParseCidr, tryParseIp } from "../../net/cidr.ts";

/** An `Address =` entry: the interface's own address and the network it is on. */
export interface WgAddress {
  readonly ip: Ip;
  /** The network the address is written in (`10.8.0.1/24` → 10.8.0.0/24): the client pool. */
  readonly network: Cidr;
}

export interface WgPeer {
  readonly publicKey?: Located<string>;
  readonly allowedIps: readonly Located<Cidr>[];
  readonly endpoint?: Located<string>;
  readonly source: SourceRef;
}

/** A wg-quick hook command (`PostUp = iptables …`), one per `;`-separated command. */
export interface WgHook {
  readonly hook: "PreUp" | "PostUp" | "PreDown" | "PostDown";
  readonly command: string;
  readonly source: SourceRef;
}

export interface WgConfig {
  readonly file: string;
  readonly addresses: readonly Located<WgAddress>[];
  readonly listenPort?: Located<number>;
  readonly dns: readonly Located<Ip>[];
  /** The line of `PrivateKey =`; its value is never read into the model. */
  readonly privateKeyAt?: SourceRef;
  readonly hooks: readonly WgHook[];
  readonly peers: readonly WgPeer[];
  /** `Table = off` and friends: routes wg-quick would not add. */
  readonly table?: Located<string>;
}

const SECRET_KEYS = new Set(["privatekey", "presharedkey"]);
const HOOKS = {
  preup: "PreUp",
  postup: "PostUp",
  predown: "PreDown",
  postdown: "PostDown",
} as const;

/**
 * A line as diagnostics may quote it: the value of any `PrivateKey`/`PresharedKey` (or
 * `private key:`) in it replaced by `(hidden)`, as `wg show` itself prints it.
 */
export function redactKeys(line: string): string {
  return line.replace(/((?:private|preshared)\s*key\s*[=:]\s*)[^\s;,]+/gi, "$1(hidden)");
}

/** Splits a value list as wg-quick does: commas, with spaces around them. */
function list(value: string): string[] {
  return value
    .split(",")
    .map((v) => v.trim())
    .filter((v) => v !== "");
}

/** `10.8.0.1/24` → address 10.8.0.1 on 10.8.0.0/24; a bare address is a host route (/32, /128). */
function addressOf(text: string): WgAddress | undefined {
  const ip = tryParseIp(text.split("/", 1)[0] ?? "");
  const r = tryParseCidr(text);
  return ip && "cidr" in r ? { ip, network: r.cidr } : undefined;
}

/**
 * Reads a wg-quick config or `wg showconf` output. `#` starts a comment (wg-quick strips it);
 * keys are case-insensitive; unknown keys are left alone (wg-quick passes them to `wg`); a
 * malformed value of a key read here becomes a warning with its line.
 *
 * @example parseWgConfig("[Interface]\nAddress = 10.8.0.1/24\n", "wg0.conf").value.addresses[0]
 */
export function parseWgConfig(text: string, file: string, lineOffset = 0): Parsed<WgConfig> {
  const diagnostics: Diagnostic[] = [];
  const addresses: Located<WgAddress>[] = [];
  const dns: Located<Ip>[] = [];
  const hooks: WgHook[] = [];
  const peers: { -readonly [K in keyof WgPeer]: WgPeer[K] }[] = [];
  const cfg: { listenPort?: Located<number>; privateKeyAt?: SourceRef; table?: Located<string> } =
    {};
  let section: "interface" | "peer" | "other" | undefined;
  text.split(/\r?\n/).forEach((raw, idx) => {
    const line = idx + 1 + lineOffset;
    const t = raw.replace(/#.*$/, "").trim();
    if (t === "") return;
    const bad = (expected: string, shown = redactKeys(raw.trim())) =>
      diagnostics.push({
        code: "WIREGUARD_SYNTAX",
        severity: "warning",
        message: `"${shown}": expected ${expected}`,
        source: { file, line, text: shown },
      });
    const head = /^\[(\w+)\]$/.exec(t);
    if (head) {
      const name = head[1]!.toLowerCase();
      section = name === "interface" ? "interface" : name === "peer" ? "peer" : "other";
      if (section === "peer") {
        peers.push({ allowedIps: [], source: { file, line, text: t } });
      } else if (section === "other") {
        bad("a section [Interface] or [Peer]");
      }
      return;
    }
    const eq = t.indexOf("=");
    if (eq <= 0) {
      bad("KEY = VALUE inside [Interface] or [Peer]");
      return;
    }
    const key = t.slice(0, eq).trim().toLowerCase();
    const value = t.slice(eq + 1).trim();
    // a secret's line is cited without its value
    const shown = SECRET_KEYS.has(key) ? `${t.slice(0, eq).trim()} = (hidden)` : redactKeys(t);
    const source: SourceRef = { file, line, text: shown };
    if (section === undefined) {
      bad("[Interface] or [Peer] before the first key", shown);
      return;
    }
    if (section === "interface") {
      if (key === "address") {
        for (const a of list(value)) {
          const addr = addressOf(a);
          if (addr) addresses.push({ value: addr, source });
          else bad("Address = ADDRESS/LEN[, …], e.g. Address = 10.8.0.1/24");
        }
      } else if (key === "listenport") {
        const n = Number(value);
        if (/^\d+$/.test(value) && n <= 65535) cfg.listenPort = { value: n, source };
        else bad("ListenPort = a port number 0-65535");
      } else if (key === "dns") {
        for (const d of list(value)) {
          const ip = tryParseIp(d);
          // wg-quick takes non-address entries as search domains
          if (ip) dns.push({ value: ip, source });
        }
      } else if (key === "privatekey") {
        cfg.privateKeyAt = source;
      } else if (key === "table") {
        cfg.table = { value, source };
      } else if (key in HOOKS) {
        for (const command of value.split(";")) {
          const c = command.trim();
          if (c !== "") hooks.push({ hook: HOOKS[key as keyof typeof HOOKS], command: c, source });
        }
      }
      return;
    }
    if (section === "peer") {
      const peer = peers.at(-1)!;
      if (key === "publickey") peer.publicKey = { value, source };
      else if (key === "endpoint") peer.endpoint = { value, source };
      else if (key === "allowedips") {
        const ips = [...peer.allowedIps];
        for (const a of list(value)) {
          const c = tryParseCidr(a);
          if ("cidr" in c) ips.push({ value: c.cidr, source });
          else bad("AllowedIPs = PREFIX/LEN[, …], e.g. AllowedIPs = 10.8.0.2/32");
        }
        peer.allowedIps = ips;
      }
    }
  });
  return {
    value: {
      file,
      addresses,
      ...(cfg.listenPort ? { listenPort: cfg.listenPort } : {}),
      dns,
      ...(cfg.privateKeyAt ? { privateKeyAt: cfg.privateKeyAt } : {}),
      hooks,
      peers,
      ...(cfg.table ? { table: cfg.table } : {}),
    },
    diagnostics,
  };
}

/** Does this text look like a WireGuard config (an `[Interface]` or `[Peer]` section)? */
export function looksLikeWgConfig(text: string): boolean {
  return /^\s*\[(Interface|Peer)\]\s*$/im.test(text);
}
