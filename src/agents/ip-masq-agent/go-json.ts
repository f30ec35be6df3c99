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

const isDigit = (c: number | undefined) => c !== undefined && c >= 0x30 && c <= 0x39;

/** The value of a hexadecimal digit, -1 for anything else. */
function hexValue(c: number | undefined): number {
  if (c === undefined) return -1;
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/** The one-character escapes of a JSON string, by the byte after the backslash. */
const SIMPLE_ESCAPES: Record<number, string> = {
  34: '"',
  92: "\\",
  47: "/",
  98: "\b",
  102: "\f",
  110: "\n",
  114: "\r",
  116: "\t",
};

type Key = { value: string; offset: number };

/** An array or object still open while the values inside it are read. */
type Frame =
  | { kind: "array"; items: GoValue[]; offset: number }
  | { kind: "object"; entries: GoEntry[]; offset: number; key: Key };

/**
 * Parses `bytes` as one JSON document the way `json.Unmarshal` checks it (the whole input is
 * validated before decoding, so the first syntax error anywhere wins).
 */
export function parseGoJson(bytes: Uint8Array): { value: GoValue } | { error: GoJsonSyntaxError } {
  const scan = new GoJsonScanner(bytes);
  try {
    const v = scan.parse();
    scan.skipWs();
    if (scan.pos < scan.n) scan.fail("after top-level value");
    return { value: v };
  } catch (e) {
    if (e instanceof Fail) return { error: e.error };
    throw e;
  }
}

/** encoding/json's scanner over one document; a syntax error throws {@link Fail}. */
class GoJsonScanner {
  pos = 0;
  readonly n: number;
  private readonly bytes: Uint8Array;
  private readonly utf8 = new TextDecoder("utf-8");

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
    this.n = bytes.length;
  }

  fail(context: string): never {
    if (this.pos >= this.n)
      throw new Fail({ message: "unexpected end of JSON input", offset: this.n });
    throw new Fail({
      message: `invalid character ${goQuoteChar(this.bytes[this.pos]!)} ${context}`,
      offset: this.pos,
    });
  }

  skipWs(): void {
    while (this.pos < this.n && WS.has(this.bytes[this.pos]!)) this.pos++;
  }

  private literal(word: string, context: string): void {
    // the first byte was checked by the caller
    for (let i = 1; i < word.length; i++) {
      this.pos++;
      if (this.pos >= this.n || this.bytes[this.pos] !== word.charCodeAt(i)) {
        this.fail(`in literal ${context} (expecting '${word[i]}')`);
      }
    }
    this.pos++;
  }

  private number(): GoValue {
    const bytes = this.bytes;
    const start = this.pos;
    if (bytes[this.pos] === 0x2d) {
      this.pos++;
      if (!isDigit(bytes[this.pos])) this.fail("in numeric literal");
    }
    if (bytes[this.pos] === 0x30) this.pos++;
    else while (isDigit(bytes[this.pos])) this.pos++;
    if (bytes[this.pos] === 0x2e) {
      this.pos++;
      if (!isDigit(bytes[this.pos])) this.fail("after decimal point in numeric literal");
      while (isDigit(bytes[this.pos])) this.pos++;
    }
    if (bytes[this.pos] === 0x65 || bytes[this.pos] === 0x45) {
      this.pos++;
      if (bytes[this.pos] === 0x2b || bytes[this.pos] === 0x2d) this.pos++;
      if (!isDigit(bytes[this.pos])) this.fail("in exponent of numeric literal");
      while (isDigit(bytes[this.pos])) this.pos++;
    }
    const text = String.fromCharCode(...bytes.subarray(start, this.pos));
    return { kind: "number", text, offset: start };
  }

  private string(): Key {
    const bytes = this.bytes;
    const offset = this.pos;
    this.pos++; // opening quote
    let out = "";
    let runStart = this.pos;
    for (;;) {
      if (this.pos >= this.n) this.fail("in string literal");
      const c = bytes[this.pos]!;
      if (c === 0x22) {
        out += this.utf8.decode(bytes.subarray(runStart, this.pos));
        this.pos++;
        return { value: out, offset };
      }
      if (c < 0x20) this.fail("in string literal");
      if (c !== 0x5c) {
        this.pos++;
        continue;
      }
      out += this.utf8.decode(bytes.subarray(runStart, this.pos));
      out += this.escape();
      runStart = this.pos;
    }
  }

  /** The escape at `pos` (its backslash), read past: the text it stands for. */
  private escape(): string {
    const bytes = this.bytes;
    this.pos++;
    if (this.pos >= this.n) this.fail("in string escape code");
    const e = bytes[this.pos]!;
    if (SIMPLE_ESCAPES[e] !== undefined) {
      this.pos++;
      return SIMPLE_ESCAPES[e];
    }
    if (e !== 0x75) this.fail("in string escape code");
    let code = 0;
    for (let i = 0; i < 4; i++) {
      this.pos++;
      const h = hexValue(bytes[this.pos]);
      if (h < 0) this.fail("in \\u hexadecimal character escape");
      code = code * 16 + h;
    }
    this.pos++;
    // Go pairs surrogates when a second \u escape follows; a lone one becomes U+FFFD
    if (
      code >= 0xd800 &&
      code < 0xdc00 &&
      bytes[this.pos] === 0x5c &&
      bytes[this.pos + 1] === 0x75
    ) {
      let low = 0;
      let ok = true;
      for (let i = 0; i < 4; i++) {
        const h = hexValue(bytes[this.pos + 2 + i]);
        if (h < 0) ok = false;
        low = low * 16 + Math.max(h, 0);
      }
      if (ok && low >= 0xdc00 && low < 0xe000) {
        this.pos += 6;
        return String.fromCharCode(code, low);
      }
    }
    return code >= 0xd800 && code < 0xe000 ? "\ufffd" : String.fromCharCode(code);
  }

  private scalar(context: string): GoValue {
    const c = this.bytes[this.pos]!;
    const offset = this.pos;
    switch (c) {
      case 0x22: {
        const s = this.string();
        return { kind: "string", value: s.value, offset: s.offset };
      }
      case 0x74:
        this.literal("true", "true");
        return { kind: "bool", value: true, offset };
      case 0x66:
        this.literal("false", "false");
        return { kind: "bool", value: false, offset };
      case 0x6e:
        this.literal("null", "null");
        return { kind: "null", offset };
      default:
        if (c === 0x2d || isDigit(c)) return this.number();
        return this.fail(context);
    }
  }

  /** Reads `"key" :` inside an object; the caller has skipped whitespace. */
  private objectKey(): Key {
    if (this.bytes[this.pos] !== 0x22) this.fail("looking for beginning of object key string");
    const key = this.string();
    this.skipWs();
    if (this.bytes[this.pos] !== 0x3a) this.fail("after object key");
    this.pos++;
    return key;
  }

  /**
   * One value. An explicit stack instead of recursion: Go accepts nesting up to 10000 levels,
   * deeper than the JS call stack allows.
   */
  parse(): GoValue {
    const stack: Frame[] = [];
    for (;;) {
      const done = this.openValue(stack);
      if (done === undefined) continue;
      const whole = this.attach(stack, done);
      if (whole !== undefined) return whole;
    }
  }

  /**
   * Starts the value at `pos`: a scalar or an empty container is returned whole; a container
   * with contents is pushed on `stack` (undefined).
   */
  private openValue(stack: Frame[]): GoValue | undefined {
    const bytes = this.bytes;
    this.skipWs();
    if (this.pos >= this.n) this.fail("looking for beginning of value");
    const c = bytes[this.pos]!;
    if (c !== 0x7b && c !== 0x5b) return this.scalar("looking for beginning of value");
    if (stack.length >= MAX_NESTING) this.fail("exceeded max depth");
    const offset = this.pos;
    this.pos++;
    this.skipWs();
    if (c === 0x7b) {
      if (bytes[this.pos] === 0x7d) {
        this.pos++;
        return { kind: "object", entries: [], offset };
      }
      stack.push({ kind: "object", entries: [], offset, key: this.objectKey() });
      return undefined;
    }
    if (bytes[this.pos] === 0x5d) {
      this.pos++;
      return { kind: "array", items: [], offset };
    }
    stack.push({ kind: "array", items: [], offset });
    return undefined;
  }

  /**
   * A value is complete: attaches it to the open container and closes those it finishes. The
   * whole document's value when the stack empties; undefined when a further value is expected.
   */
  private attach(stack: Frame[], value: GoValue): GoValue | undefined {
    const bytes = this.bytes;
    let done = value;
    for (;;) {
      const top = stack.at(-1);
      if (!top) return done;
      this.skipWs();
      if (top.kind === "array") {
        top.items.push(done);
        if (bytes[this.pos] === 0x2c) {
          this.pos++;
          return undefined;
        }
        if (bytes[this.pos] !== 0x5d) this.fail("after array element");
        this.pos++;
        stack.pop();
        done = { kind: "array", items: top.items, offset: top.offset };
      } else {
        top.entries.push({ key: top.key.value, keyOffset: top.key.offset, value: done });
        if (bytes[this.pos] === 0x2c) {
          this.pos++;
          this.skipWs();
          top.key = this.objectKey();
          return undefined;
        }
        if (bytes[this.pos] !== 0x7d) this.fail("after object key:value pair");
        this.pos++;
        stack.pop();
        done = { kind: "object", entries: top.entries, offset: top.offset };
      }
    }
  }
}

/** How Go's UnmarshalTypeError names a JSON value's kind. */
export function goKindName(v: GoValue): string {
  return v.kind === "bool" ? "bool" : v.kind;
}
