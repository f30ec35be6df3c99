/**
 * @module agents/ip-masq-agent/go-json — a JSON reader that accepts and rejects exactly what Go's
 * encoding/json does and words its syntax errors the same way, keeping every value's byte offset.
 *
 * Hand-written rather than JSON.parse: the agent's error text is part of what podpath reports
 * (`invalid character '*' looking for beginning of object key string`), duplicate keys must stay
 * in document order (Go applies each one in turn), and SourceRefs need the position of each value.
 */

/** A decoded JSON value as Go's decoder sees it: numbers stay as their literal text. */
export type GoValue =
  | { readonly kind: "null"; readonly offset: number }
  | { readonly kind: "bool"; readonly value: boolean; readonly offset: number }
  | { readonly kind: "number"; readonly text: string; readonly offset: number }
  | { readonly kind: "string"; readonly value: string; readonly offset: number }
  | { readonly kind: "array"; readonly items: readonly GoValue[]; readonly offset: number }
  | {
      readonly kind: "object";
      readonly entries: readonly GoEntry[];
      readonly offset: number;
    };

export interface GoEntry {
  readonly key: string;
  readonly keyOffset: number;
  readonly value: GoValue;
}

/** A syntax error with Go's exact message and the byte offset where the scanner stopped. */
export interface GoJsonSyntaxError {
  readonly message: string;
  readonly offset: number;
}

/** Go's `quoteChar`: how encoding/json names an unexpected byte. */
export function goQuoteChar(c: number): string {
  if (c === 0x27) return "'\\''";
  if (c === 0x22) return "'\"'";
  return `'${goQuoteRune(c)}'`;
}

/** strconv.Quote of one rune, without the surrounding quotes. */
function goQuoteRune(r: number): string {
  switch (r) {
    case 0x07:
      return "\\a";
    case 0x08:
      return "\\b";
    case 0x0c:
      return "\\f";
    case 0x0a:
      return "\\n";
    case 0x0d:
      return "\\r";
    case 0x09:
      return "\\t";
    case 0x0b:
      return "\\v";
    case 0x5c:
      return "\\\\";
  }
  if (r < 0x20 || r === 0x7f) return `\\x${r.toString(16).padStart(2, "0")}`;
  // strconv.IsPrint is false for the C1 controls, NBSP and the soft hyphen
  if ((r >= 0x80 && r <= 0xa0) || r === 0xad) return `\\u${r.toString(16).padStart(4, "0")}`;
  return String.fromCodePoint(r);
}

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);
/** encoding/json's scanner refuses deeper nesting (maxNestingDepth). */
const MAX_NESTING = 10000;

class Fail {
  readonly error: GoJsonSyntaxError;
  constructor(error: GoJsonSyntaxError) {
    this.error = error;
  }
}

/**
 * Parses `bytes` as one JSON document the way `json.Unmarshal` checks it (the whole input is
 * validated before decoding, so the first syntax error anywhere wins).
 */
export function parseGoJson(bytes: Uint8Array): { value: GoValue } | { error: GoJsonSyntaxError } {
  let pos = 0;
  const n = bytes.length;
  const utf8 = new TextDecoder("utf-8");

  const fail = (context: string): never => {
    if (pos >= n) throw new Fail({ message: "unexpected end of JSON input", offset: n });
    throw new Fail({
      message: `invalid character ${goQuoteChar(bytes[pos]!)} ${context}`,
      offset: pos,
    });
  };
  const skipWs = () => {
    while (pos < n && WS.has(bytes[pos]!)) pos++;
  };

  const literal = (word: string, context: string): void => {
    // the first byte was checked by the caller
    for (let i = 1; i < word.length; i++) {
      pos++;
      if (pos >= n || bytes[pos] !== word.charCodeAt(i)) {
        fail(`in literal ${context} (expecting '${word[i]}')`);
      }
    }
    pos++;
  };

  const isDigit = (c: number | undefined) => c !== undefined && c >= 0x30 && c <= 0x39;

  const number = (): GoValue => {
    const start = pos;
    if (bytes[pos] === 0x2d) {
      pos++;
      if (!isDigit(bytes[pos])) fail("in numeric literal");
    }
    if (bytes[pos] === 0x30) pos++;
    else while (isDigit(bytes[pos])) pos++;
    if (bytes[pos] === 0x2e) {
      pos++;
      if (!isDigit(bytes[pos])) fail("after decimal point in numeric literal");
      while (isDigit(bytes[pos])) pos++;
    }
    if (bytes[pos] === 0x65 || bytes[pos] === 0x45) {
      pos++;
      if (bytes[pos] === 0x2b || bytes[pos] === 0x2d) pos++;
      if (!isDigit(bytes[pos])) fail("in exponent of numeric literal");
      while (isDigit(bytes[pos])) pos++;
    }
    const text = String.fromCharCode(...bytes.subarray(start, pos));
    return { kind: "number", text, offset: start };
  };

  const hex = (c: number | undefined): number => {
    if (c === undefined) return -1;
    if (c >= 0x30 && c <= 0x39) return c - 0x30;
    if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
    if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
    return -1;
  };

  const string = (): { value: string; offset: number } => {
    const offset = pos;
    pos++; // opening quote
    let out = "";
    let runStart = pos;
    const flush = () => {
      out += utf8.decode(bytes.subarray(runStart, pos));
    };
    for (;;) {
      if (pos >= n) fail("in string literal");
      const c = bytes[pos]!;
      if (c === 0x22) {
        flush();
        pos++;
        return { value: out, offset };
      }
      if (c < 0x20) fail("in string literal");
      if (c !== 0x5c) {
        pos++;
        continue;
      }
      flush();
      pos++;
      if (pos >= n) fail("in string escape code");
      const e = bytes[pos]!;
      const simple: Record<number, string> = {
        34: '"',
        92: "\\",
        47: "/",
        98: "\b",
        102: "\f",
        110: "\n",
        114: "\r",
        116: "\t",
      };
      if (simple[e] !== undefined) {
        out += simple[e];
        pos++;
      } else if (e === 0x75) {
        let code = 0;
        for (let i = 0; i < 4; i++) {
          pos++;
          const h = hex(bytes[pos]);
          if (h < 0) fail("in \\u hexadecimal character escape");
          code = code * 16 + h;
        }
        pos++;
        // Go pairs surrogates when a second \u escape follows; a lone one becomes U+FFFD
        if (code >= 0xd800 && code < 0xdc00 && bytes[pos] === 0x5c && bytes[pos + 1] === 0x75) {
          let low = 0;
          let ok = true;
          for (let i = 0; i < 4; i++) {
            const h = hex(bytes[pos + 2 + i]);
            if (h < 0) ok = false;
            low = low * 16 + Math.max(h, 0);
          }
          if (ok && low >= 0xdc00 && low < 0xe000) {
            out += String.fromCharCode(code, low);
            pos += 6;
            runStart = pos;
            continue;
          }
        }
        out += code >= 0xd800 && code < 0xe000 ? "\ufffd" : String.fromCharCode(code);
      } else {
        fail("in string escape code");
      }
      runStart = pos;
    }
  };

  type Frame =
    | { kind: "array"; items: GoValue[]; offset: number }
    | {
        kind: "object";
        entries: GoEntry[];
        offset: number;
        key: { value: string; offset: number };
      };

  const scalar = (context: string): GoValue => {
    const c = bytes[pos]!;
    const offset = pos;
    switch (c) {
      case 0x22: {
        const s = string();
        return { kind: "string", value: s.value, offset: s.offset };
      }
      case 0x74:
        literal("true", "true");
        return { kind: "bool", value: true, offset };
      case 0x66:
        literal("false", "false");
        return { kind: "bool", value: false, offset };
      case 0x6e:
        literal("null", "null");
        return { kind: "null", offset };
      default:
        if (c === 0x2d || isDigit(c)) return number();
        return fail(context);
    }
  };

  /** Reads `"key" :` inside an object; the caller has skipped whitespace. */
  const objectKey = (): { value: string; offset: number } => {
    if (bytes[pos] !== 0x22) fail("looking for beginning of object key string");
    const key = string();
    skipWs();
    if (bytes[pos] !== 0x3a) fail("after object key");
    pos++;
    return key;
  };

  // An explicit stack instead of recursion: Go accepts nesting up to 10000 levels, deeper than
  // the JS call stack allows.
  const parse = (): GoValue => {
    const stack: Frame[] = [];
    for (;;) {
      // expecting a value
      skipWs();
      if (pos >= n) fail("looking for beginning of value");
      const c = bytes[pos]!;
      let done: GoValue | undefined;
      if (c === 0x7b || c === 0x5b) {
        if (stack.length >= MAX_NESTING) fail("exceeded max depth");
        const offset = pos;
        pos++;
        skipWs();
        if (c === 0x7b) {
          if (bytes[pos] === 0x7d) {
            pos++;
            done = { kind: "object", entries: [], offset };
          } else {
            stack.push({ kind: "object", entries: [], offset, key: objectKey() });
            continue;
          }
        } else if (bytes[pos] === 0x5d) {
          pos++;
          done = { kind: "array", items: [], offset };
        } else {
          stack.push({ kind: "array", items: [], offset });
          continue;
        }
      } else {
        done = scalar("looking for beginning of value");
      }
      // a value is complete: attach it and close finished containers
      for (;;) {
        const top = stack.at(-1);
        if (!top) return done;
        skipWs();
        if (top.kind === "array") {
          top.items.push(done);
          if (bytes[pos] === 0x2c) {
            pos++;
            break;
          }
          if (bytes[pos] !== 0x5d) fail("after array element");
          pos++;
          stack.pop();
          done = { kind: "array", items: top.items, offset: top.offset };
        } else {
          top.entries.push({ key: top.key.value, keyOffset: top.key.offset, value: done });
          if (bytes[pos] === 0x2c) {
            pos++;
            skipWs();
            top.key = objectKey();
            break;
          }
          if (bytes[pos] !== 0x7d) fail("after object key:value pair");
          pos++;
          stack.pop();
          done = { kind: "object", entries: top.entries, offset: top.offset };
        }
      }
    }
  };

  try {
    const v = parse();
    skipWs();
    if (pos < n) fail("after top-level value");
    return { value: v };
  } catch (e) {
    if (e instanceof Fail) return { error: e.error };
    throw e;
  }
}

/** How Go's UnmarshalTypeError names a JSON value's kind. */
export function goKindName(v: GoValue): string {
  return v.kind === "bool" ? "bool" : v.kind;
}
