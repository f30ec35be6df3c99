/**
 * @module agents/ip-masq-agent/go-duration — Go's time.ParseDuration and Duration.String, which
 * the agent uses for `resyncInterval` (metav1.Duration). Durations are int64 nanoseconds (bigint).
 *
 * Hand-written: the accepted syntax (`1h2m3.5s`, `µs`, a bare `0`) and the error texts
 * (`time: missing unit in duration "60"`) must be Go's, which no npm duration parser reproduces.
 */

const UNITS: ReadonlyMap<string, bigint> = new Map([
  ["ns", 1n],
  ["us", 1_000n],
  ["µs", 1_000n], // U+00B5
  ["μs", 1_000n], // U+03BC
  ["ms", 1_000_000n],
  ["s", 1_000_000_000n],
  ["m", 60_000_000_000n],
  ["h", 3_600_000_000_000n],
]);

const MAX_U = 1n << 63n; // the magnitude may reach 1<<63 only for a negative duration

/** Go's `quote` in package time: double quotes, and \xNN for every byte of a control or non-ASCII character. */
function goTimeQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (c < 0x20 || c >= 0x80) {
      for (const b of Buffer.from(ch, "utf8")) out += `\\x${b.toString(16).padStart(2, "0")}`;
    } else if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else out += ch;
  }
  return `${out}"`;
}

/** time.ParseDuration: nanoseconds, or Go's exact error text. */
export function parseGoDuration(text: string): { ns: bigint } | { error: string } {
  const orig = text;
  const invalid = { error: `time: invalid duration ${goTimeQuote(orig)}` };
  let s = text;
  let neg = false;
  if (s !== "" && (s[0] === "-" || s[0] === "+")) {
    neg = s[0] === "-";
    s = s.slice(1);
  }
  if (s === "0") return { ns: 0n };
  if (s === "") return invalid;
  let d = 0n;
  while (s !== "") {
    if (!(s[0] === "." || (s[0]! >= "0" && s[0]! <= "9"))) return invalid;
    // the integer part
    const intMatch = /^[0-9]*/.exec(s)![0];
    const pl = s.length;
    let v = 0n;
    for (const c of intMatch) {
      v = v * 10n + BigInt(c);
      if (v > MAX_U) return invalid;
    }
    s = s.slice(intMatch.length);
    const pre = pl !== s.length;
    // the fraction
    let post = false;
    let f = 0n;
    let scale = 1n;
    if (s.startsWith(".")) {
      s = s.slice(1);
      const fracMatch = /^[0-9]*/.exec(s)![0];
      let overflow = false;
      for (const c of fracMatch) {
        if (overflow) continue;
        // Go stops accumulating once the fraction would overflow, keeping the precision it has
        if (f > (MAX_U - 1n) / 10n) {
          overflow = true;
          continue;
        }
        f = f * 10n + BigInt(c);
        scale *= 10n;
      }
      post = fracMatch.length > 0;
      s = s.slice(fracMatch.length);
    }
    if (!pre && !post) return invalid;
    // the unit
    const unitMatch = /^[^0-9.]*/.exec(s)![0];
    if (unitMatch === "") return { error: `time: missing unit in duration ${goTimeQuote(orig)}` };
    const unit = UNITS.get(unitMatch);
    if (unit === undefined) {
      return {
        error: `time: unknown unit ${goTimeQuote(unitMatch)} in duration ${goTimeQuote(orig)}`,
      };
    }
    s = s.slice(unitMatch.length);
    if (v > MAX_U / unit) return invalid;
    v *= unit;
    if (f > 0n) {
      // float64(f) * (float64(unit) / scale), truncated, as Go computes it
      v += BigInt(Math.trunc(Number(f) * (Number(unit) / Number(scale))));
      if (v > MAX_U) return invalid;
    }
    d += v;
    if (d > MAX_U) return invalid;
  }
  if (neg) return { ns: -d };
  if (d > MAX_U - 1n) return invalid;
  return { ns: d };
}

/** time.Duration.String: `1m0s`, `1.5s`, `250ms`, `0s`. */
export function formatGoDuration(ns: bigint): string {
  if (ns === 0n) return "0s";
  const neg = ns < 0n;
  const u = neg ? -ns : ns;
  let out: string;
  if (u < 1_000_000_000n) {
    // sub-second: one unit with a fraction
    let unit: string;
    let div: bigint;
    if (u < 1_000n) return `${neg ? "-" : ""}${u}ns`;
    if (u < 1_000_000n) {
      unit = "µs";
      div = 1_000n;
    } else {
      unit = "ms";
      div = 1_000_000n;
    }
    out = `${fraction(u, div)}${unit}`;
  } else {
    const h = u / 3_600_000_000_000n;
    const rem = u % 3_600_000_000_000n;
    const m = rem / 60_000_000_000n;
    const sNs = rem % 60_000_000_000n;
    out = `${fraction(sNs, 1_000_000_000n)}s`;
    if (h > 0n) out = `${h}h${m}m${out}`;
    else if (m > 0n) out = `${m}m${out}`;
  }
  return `${neg ? "-" : ""}${out}`;
}

function fraction(v: bigint, div: bigint): string {
  const whole = v / div;
  const frac = v % div;
  if (frac === 0n) return String(whole);
  const digits = String(div).length - 1;
  return `${whole}.${String(frac).padStart(digits, "0").replace(/0+$/, "")}`;
}
