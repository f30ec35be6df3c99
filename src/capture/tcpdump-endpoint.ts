/**
 * @module capture/tcpdump-endpoint — one end of a packet as tcpdump prints it: `10.0.0.1`,
 * `10.0.0.1.5432`, `fd00::2.53`, and without `-n` host and service names: `db.corp.postgresql`,
 * `gw.http`, `10.0.0.4.ssh`, `node-a.internal`. A host name stays a name (the printing machine's
 * resolver chose it; its address is unknown here); a service name becomes its port where
 * capture/tcpdump-services.ts knows it.
 */
import { type Family, type Ip, tryParseIp } from "../net/cidr.ts";
import { servicePort } from "./tcpdump-services.ts";

export interface PrintedEnd {
  /** Set when the host was printed as an address. */
  readonly ip?: { readonly family: Family; readonly value: bigint };
  /** Set when the host was printed as a name. */
  readonly name?: string;
  /** The port, printed or mapped from its service name; 0 when `service` is set. */
  readonly port?: number;
  /** A service name the table does not know: the port is unknown. */
  readonly service?: string;
}

/** A host name as resolvers print them (letters, digits, `-`, `_`, dots). */
const HOST_NAME = /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?$/;
const SERVICE_NAME = /^[A-Za-z0-9][A-Za-z0-9_+.-]*$/;
const DIGITS = /^\d{1,5}$/;

/**
 * Reads one printed end. `hasPorts` says whether the protocol carries ports (true: TCP, UDP;
 * false: ICMP, ESP, ...); undefined when the text does not say, and then a last label is taken
 * as a port only when it is a number or a known service name.
 */
export function readEnd(text: string, hasPorts: boolean | undefined): PrintedEnd | undefined {
  if (hasPorts !== true) {
    const whole = addressOf(text);
    if (whole !== undefined) return { ip: whole };
  }
  if (hasPorts !== false) {
    const dot = text.lastIndexOf(".");
    if (dot > 0) {
      const withPort = splitPort(text.slice(0, dot), text.slice(dot + 1), hasPorts === true);
      if (withPort !== undefined) return withPort;
    }
    if (hasPorts === true) return undefined;
  }
  return isHostName(text) ? { name: text } : undefined;
}

/**
 * An address, or undefined. Text without a colon is tried as IPv4 only when it has the shape
 * (three dots, digits): most texts seen here are `addr.port` or names, and the IPv6 test is dear.
 */
function addressOf(text: string): Ip | undefined {
  if (text.includes(":")) return tryParseIp(text);
  let dots = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 46) dots++;
    else if (c < 48 || c > 57) return undefined;
  }
  return dots === 3 ? tryParseIp(text) : undefined;
}

function splitPort(host: string, port: string, sure: boolean): PrintedEnd | undefined {
  const p = readPort(port);
  if (p === undefined || (p.service !== undefined && !sure)) return undefined;
  const ip = addressOf(host);
  if (ip === undefined && !isHostName(host)) return undefined;
  if (p.service !== undefined) return ip !== undefined ? { ip, ...p } : { name: host, ...p };
  return ip !== undefined ? { ip, port: p.port } : { name: host, port: p.port };
}

/** A printed port: its number, or a service name's (0 and the name when the table lacks it). */
export function readPort(text: string): { port: number; service?: string } | undefined {
  if (DIGITS.test(text)) return { port: Number(text) };
  const num = servicePort(text);
  if (num !== undefined) return { port: num };
  return SERVICE_NAME.test(text) ? { port: 0, service: text } : undefined;
}

/** A name, not a mangled number: at least one letter. */
function isHostName(s: string): boolean {
  return HOST_NAME.test(s) && /[A-Za-z_]/.test(s);
}

/** Whether the end is only partly known: a host name, or a port named by an unknown service. */
export function isNamed(e: PrintedEnd): boolean {
  return e.name !== undefined || e.service !== undefined;
}
