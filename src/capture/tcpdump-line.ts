/**
 * @module capture/tcpdump-line — what one line of pasted tcpdump output is: a packet's first line
 * (its `-#` number and time column: clock, `-tt` epoch, `-tttt` date, `-ttt`/`-ttttt` relative,
 * or `-t` none), tcpdump's own messages (`listening on …`, `N packets captured`, …), or the
 * start of a packet printed without a time. Used by capture/tcpdump-text.ts.
 */
import { MAC } from "./tcpdump-frame.ts";

/** How a packet line gives its time. */
export type TimeKind = "clock" | "date" | "epoch" | "relative" | "none";

export interface Head {
  readonly number?: number;
  /** ns since the epoch (date, epoch), since midnight (clock), as printed (relative), or 0. */
  readonly timeNs: bigint;
  readonly kind: TimeKind;
  /** The line after the number and time. */
  readonly rest: string;
}

const NUMBERED = /^ *(\d+) {2}(?= {0,2}\S)/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))? /;
const TIME_OF_DAY = /^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))? /;
/** `-ttt` (delta) and `-ttttt` (since the first packet): hours may pass 99, a space leads. */
const RELATIVE = /^ (\d{2,}):(\d{2}):(\d{2})\.(\d{6}|\d{9}) /;
const EPOCH = /^(\d{1,12})\.(\d{6}|\d{9}) /;

/** tcpdump's own lines around the packets (stderr when pasted from a terminal). */
export const NOISE =
  /^(?:reading from file |listening on |tcpdump: |Warning: |\d+ packets? (?:captured|received by filter|dropped by (?:kernel|interface))|dropped privs|\s*$)/;

/** Parses a packet line's `-#` number and time column; undefined when the line has neither. */
export function parseHead(text: string): Head | undefined {
  let rest = text;
  let number: number | undefined;
  const n = NUMBERED.exec(rest);
  if (n) {
    number = Number(n[1]);
    rest = rest.slice(n[0].length);
  }
  const num = number === undefined ? {} : { number };
  let m = DATE_TIME.exec(rest);
  if (m) {
    const ms = Date.UTC(
      Number(m[1]),
      Number(m[2]) - 1,
      Number(m[3]),
      Number(m[4]),
      Number(m[5]),
      Number(m[6]),
    );
    if (Number.isNaN(ms)) return undefined;
    const timeNs = BigInt(ms) * 1_000_000n + fracNs(m[7]);
    return { ...num, timeNs, kind: "date", rest: rest.slice(m[0].length) };
  }
  m = TIME_OF_DAY.exec(rest);
  if (m) return { ...num, timeNs: clockNs(m), kind: "clock", rest: rest.slice(m[0].length) };
  m = RELATIVE.exec(rest);
  if (m) return { ...num, timeNs: clockNs(m), kind: "relative", rest: rest.slice(m[0].length) };
  m = EPOCH.exec(rest);
  if (m) {
    const timeNs = BigInt(m[1]!) * 1_000_000_000n + fracNs(m[2]);
    return { ...num, timeNs, kind: "epoch", rest: rest.slice(m[0].length) };
  }
  if (number !== undefined) return { ...num, timeNs: 0n, kind: "none", rest };
  return undefined;
}

function clockNs(m: RegExpExecArray): bigint {
  const s = Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]);
  return BigInt(s) * 1_000_000_000n + fracNs(m[4]);
}

function fracNs(digits: string | undefined): bigint {
  if (digits === undefined) return 0n;
  return BigInt(digits.padEnd(9, "0"));
}

/**
 * A line with no time that starts a packet (`-t`): `IP `, `IP6 `, `ARP, `, an Ethernet header
 * (`-e`), LINUX_SLL's direction (`-e`, right-aligned: ` In`, `  B`), LINUX_SLL2's interface
 * and direction (`eth0  Out IP …`, `eth0  Out ifindex 2 …`), RAW's `ip: ` and NFLOG's header.
 */
const UNTIMED_HEAD = new RegExp(
  `^(?:IP6? |ARP, |RARP, |ip: |version \\d+, resource ID \\d+, |${MAC}(?: \\(oui [^)]*\\))? > | {0,2}(?:In|Out|B|M|P) (?:\\S+(?: \\(oui [^)]*\\))? )?ethertype |\\S+ +(?:In|Out|B|M|P) +(?:IP6? |ARP, |ifindex \\d+ ))`,
);

/** Whether a line without a time starts a packet (tcpdump -t). */
export function isUntimedHead(text: string): boolean {
  return UNTIMED_HEAD.test(text);
}

/**
 * Whether an unindented line without a time still reads as a packet line of some protocol
 * podpath does not decode: `a > b: …` or `…, length N`.
 */
export function looksLikePacket(text: string): boolean {
  return /^\S+(?: \S+)* > \S+: |, length \d+/.test(text);
}
