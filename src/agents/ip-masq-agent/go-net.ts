/**
 * @module agents/ip-masq-agent/go-net — Go's net.ParseCIDR as the agent's validation uses it:
 * what it accepts (`/08` is a valid prefix, a bare address is not), how it prints the address and
 * the network (`ip.String()`, `ipnet.String()`), and which family the agent files a CIDR under.
 */
import { type Cidr, formatIp, tryParseIp } from "../../net/cidr.ts";

/** A CIDR as Go parsed it. */
export interface GoCidr {
  /** The block, with host bits cleared (the network). */
  readonly cidr: Cidr;
  /** `ip.String()` of the address as written. */
  readonly ipText: string;
  /** `ipnet.String()` of the network. */
  readonly networkText: string;
  /** The written address equals the network address. */
  readonly aligned: boolean;
  /**
   * The family the agent files it under (`isIPv6CIDR`): an IPv4-mapped IPv6 block
   * (`::ffff:10.0.0.0/104`) counts as IPv4 there, and goes to iptables, not ip6tables.
   */
  readonly agentFamily: 4 | 6;
}

const V4_MAPPED_START = 0xffffn << 32n;
const BIG = 0xffffff;

function isV4Mapped(family: 4 | 6, value: bigint): boolean {
  return family === 6 && value >> 32n === 0xffffn;
}

/** Go's `IP.String()`: IPv4-mapped IPv6 addresses print as dotted quads. */
function goIpString(family: 4 | 6, value: bigint): string {
  if (isV4Mapped(family, value)) return formatIp({ family: 4, value: value - V4_MAPPED_START });
  return formatIp({ family, value });
}

/** net.ParseCIDR: the parsed block, or Go's error text (`invalid CIDR address: abc`). */
export function goParseCidr(text: string): { ok: GoCidr } | { error: string } {
  const invalid = { error: `invalid CIDR address: ${text}` };
  const slash = text.indexOf("/");
  if (slash < 0) return invalid;
  const addrText = text.slice(0, slash);
  const maskText = text.slice(slash + 1);
  const ip = tryParseIp(addrText);
  if (!ip) return invalid;
  // dtoi: decimal digits only, leading zeros allowed, capped at 0xFFFFFF
  let n = 0;
  let i = 0;
  for (; i < maskText.length; i++) {
    const c = maskText.charCodeAt(i);
    if (c < 0x30 || c > 0x39) break;
    n = n * 10 + (c - 0x30);
    if (n >= BIG) return invalid;
  }
  const bits = ip.family === 4 ? 32 : 128;
  if (i === 0 || i !== maskText.length || n > bits) return invalid;
  const all = (1n << BigInt(bits)) - 1n;
  const host = (1n << BigInt(bits - n)) - 1n;
  const start = ip.value & (all ^ host);
  const cidr: Cidr = { family: ip.family, start, end: start | host, prefix: n };
  const mapped = isV4Mapped(ip.family, ip.value);
  return {
    ok: {
      cidr,
      ipText: goIpString(ip.family, ip.value),
      networkText: `${goIpString(ip.family, start)}/${n}`,
      aligned: start === ip.value,
      agentFamily: ip.family === 4 || mapped ? 4 : 6,
    },
  };
}
