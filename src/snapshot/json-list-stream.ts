/**
 * @module snapshot/json-list-stream — a `kubectl get -o json` List of any size, read as a stream: the
 * file passes through one fixed buffer, a byte scanner finds where each of the List's items begins
 * and ends (with its line and column), and each item alone is decoded and given to `JSON.parse`,
 * then handed to the caller, which keeps what it needs. The whole text is never one string (a
 * JavaScript string holds at most about 2^29 characters; a 500k-pod cluster's List is 1-2 GB), never
 * parsed whole, never held twice.
 *
 * Written here rather than taken from npm: the streaming JSON parsers there (`@streamparser/json`
 * 0.0.x, `jsonparse`, `clarinet`, `JSONStream`, `stream-json`) tokenize every character in
 * JavaScript and build each value themselves, several times slower than the engine's own
 * `JSON.parse`, and none gives the line and column a finding cites. Here JavaScript only looks at
 * the bytes between strings (`indexOf` jumps over string contents; JSON strings hold no raw
 * newline, so lines are counted there too), and every value is built by `JSON.parse`. UTF-8
 * multi-byte sequences hold no byte below 0x80, so the structure is found on bytes safely.
 */

/** Where the bytes come from: a file descriptor or an archive entry in memory. */
export interface ByteSource {
  readonly size: number;
  /** Copies bytes from position `pos` into `into` (from its start); the count copied, 0 at the end. */
  read(into: Buffer, pos: number): number;
}

/** One item of the List, parsed, with where its text lies. */
export interface StreamedItem {
  readonly value: unknown;
  readonly index: number;
  /** Byte offsets of the item's text in the file: [start, end). */
  readonly start: number;
  readonly end: number;
  /** 1-based line and column (in bytes) of the item's first character. */
  readonly line: number;
  readonly col: number;
}

/** A place in the file where the List is not what it should be. */
export interface StreamProblem {
  readonly message: string;
  readonly offset: number;
  readonly line: number;
  readonly col: number;
}

export interface StreamedList {
  /** The root object's other members (apiVersion, kind, metadata), parsed. */
  readonly members: Map<string, unknown>;
  /** How many items were seen (parsed or not). */
  readonly count: number;
  /** The first problem; what came before it was read. */
  readonly problem?: StreamProblem;
  /** False when the root is not an object: the caller reads the file another way. */
  readonly isList: boolean;
}

const CHUNK = 4 << 20;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const NL = 0x0a;
const isWs = (c: number) => c === 0x20 || c === NL || c === 0x0d || c === 0x09;

/** A byte source over a file descriptor (read with pread, so the position is ours). */
export function fdSource(fd: number, size: number, readSync: FdRead): ByteSource {
  return { size, read: (into, pos) => readSync(fd, into, 0, into.length, pos) };
}
type FdRead = (fd: number, b: Buffer, off: number, len: number, pos: number) => number;

/** A byte source over bytes in memory. */
export function bytesSource(bytes: Uint8Array): ByteSource {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return {
    size: b.length,
    read: (into, pos) => b.copy(into, 0, pos, Math.min(b.length, pos + into.length)),
  };
}

/**
 * Streams the items of the JSON List in `src` to `onItem`, one at a time, in order. A root that
 * is an object without `items` gives no items and its members; a root that is not an object
 * gives `isList: false` and nothing else read. A syntax error inside an item skips that item with
 * a problem; damage to the structure itself stops the reading there (the items before it are kept).
 */
export function streamJsonList(
  src: ByteSource,
  onItem: (item: StreamedItem) => void,
  onItemError?: (problem: StreamProblem, index: number) => void,
): StreamedList {
  const buf = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(src.size, 1)));
  const members = new Map<string, unknown>();
  let count = 0;
  let problem: StreamProblem | undefined;

  // position
  let base = 0; // file offset of buf[0]
  let len = 0; // bytes in buf
  let line = 1;
  let lineStart = 0; // file offset where the current line begins

  // structure
  let depth = 0; // containers open
  let inString = false;
  let rootSeen = false;
  let isList = true;
  /** In the root object: whether the next value at depth 1 is a key. */
  let expectKey = true;
  let key: string | undefined;
  let inItems = false;
  let itemsDone = false;

  // the value being captured (a root member's key or value, or an item)
  let capturing = false;
  let capLevel = 0; // depth at which the captured value started
  let capStart = 0;
  let capLine = 0;
  let capCol = 0;
  let capScalar = false; // a number, true, false or null: ends at a delimiter
  let pieces: Buffer[] = [];
  let pieceFrom = 0; // index in buf where the current piece begins

  const fail = (message: string, at: number): void => {
    problem ??= { message, offset: at, line, col: at - lineStart + 1 };
  };

  const startCapture = (i: number, scalar: boolean): void => {
    capturing = true;
    capLevel = depth;
    capStart = base + i;
    capLine = line;
    capCol = base + i - lineStart + 1;
    capScalar = scalar;
    pieces = [];
    pieceFrom = i;
  };

  /** The captured value ends just before buf[i]. */
  const endCapture = (i: number): void => {
    capturing = false;
    pieces.push(buf.subarray(pieceFrom, i));
    const bytes = pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
    pieces = [];
    const end = base + i;
    const text = bytes.toString("utf8");
    if (inItems) {
      const index = count++;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (e) {
        onItemError?.(
          {
            message: `items[${index}] is not valid JSON (${(e as Error).message.slice(0, 120)}); this item was skipped`,
            offset: capStart,
            line: capLine,
            col: capCol,
          },
          index,
        );
        return;
      }
      onItem({ value, index, start: capStart, end, line: capLine, col: capCol });
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      fail(
        `invalid JSON at line ${capLine}; expected the List as kubectl get -o json prints it`,
        capStart,
      );
      return;
    }
    if (expectKey) {
      if (typeof value !== "string") fail("expected a member name in quotes", capStart);
      key = String(value);
    } else if (key !== undefined) {
      members.set(key, value);
    }
  };

  for (;;) {
    if (capturing && len > 0) {
      // keep what the captured value has in this buffer before it is reused
      pieces.push(Buffer.from(buf.subarray(pieceFrom, len)));
      pieceFrom = 0;
    }
    base += len;
    len = base >= src.size ? 0 : src.read(buf, base);
    if (len <= 0) break;
    let i = 0;
    // a UTF-8 byte-order mark before the root is skipped
    if (base === 0 && len >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) i = 3;
    while (i < len && problem === undefined) {
      if (inString) {
        // jump to the closing quote: the string's contents are not structure
        const q = buf.indexOf(QUOTE, i);
        if (q < 0 || q >= len) {
          i = len;
          break;
        }
        // a quote after an odd number of backslashes is escaped (they may lie in the last buffer)
        let back = 0;
        for (let k = q - 1; k >= 0 && buf[k] === BACKSLASH; k--) back++;
        if (q - back === 0 && capturing) {
          // the run of backslashes may go on in the previous buffer: count it in the pieces
          back += trailingBackslashes(pieces);
        }
        i = q + 1;
        if (back % 2 === 1) continue;
        inString = false;
        if (capturing && !capScalar && depth === capLevel) endCapture(i);
        continue;
      }
      let c = buf[i]!;
      if (c <= 0x20) {
        // a run of whitespace (indentation is most of a pretty-printed List), in locals
        let j = i;
        let ln = 0;
        let ls = -1;
        while (j < len) {
          c = buf[j]!;
          if (c === 0x20 || c === 0x0d || c === 0x09) j++;
          else if (c === NL) {
            ln++;
            ls = j + 1;
            j++;
          } else break;
        }
        if (ln > 0) {
          line += ln;
          lineStart = base + ls;
        }
        if (j === i) {
          // a control character outside a string: not JSON
          fail("a control character outside a string; expected JSON", base + i);
          break;
        }
        if (capturing && capScalar) endCapture(i);
        i = j;
        continue;
      }
      if (!rootSeen) {
        rootSeen = true;
        if (c !== 0x7b) {
          isList = false;
          return { members, count, isList, ...(problem ? { problem } : {}) };
        }
        depth = 1;
        i++;
        continue;
      }
      if (capturing && capScalar) {
        if (c === 0x2c || c === 0x5d || c === 0x7d) endCapture(i);
        else {
          i++;
          continue;
        }
      }
      // a value begins where its level expects one
      const level = inItems ? 2 : 1;
      if (!capturing && depth === level && c !== 0x2c && c !== 0x3a && c !== 0x5d && c !== 0x7d) {
        if (!inItems && !expectKey && key === "items" && c === 0x5b && !itemsDone) {
          inItems = true;
          depth = 2;
          i++;
          continue;
        }
        startCapture(i, c !== QUOTE && c !== 0x7b && c !== 0x5b);
        if (capScalar) {
          i++;
          continue;
        }
      }
      switch (c) {
        case QUOTE:
          inString = true;
          break;
        case 0x7b:
        case 0x5b:
          depth++;
          break;
        case 0x7d:
        case 0x5d:
          depth--;
          if (capturing && depth === capLevel) endCapture(i + 1);
          else if (inItems && depth === 1) {
            inItems = false;
            itemsDone = true;
          } else if (depth === 0) {
            // the root closed: anything after it but whitespace is not read
            return finish(i + 1);
          } else if (depth < 0) fail("a closing bracket with nothing open", base + i);
          break;
        case 0x3a:
          if (depth === 1 && !inItems) expectKey = false;
          break;
        case 0x2c:
          if (depth === 1 && !inItems) expectKey = true;
          break;
      }
      i++;
    }
    if (problem !== undefined) break;
  }
  if (problem === undefined && rootSeen && depth > 0) {
    fail(
      `the List ends at byte ${src.size} with ${depth} bracket(s) still open; the file is cut short, the items before were read`,
      src.size,
    );
  }
  if (!rootSeen) isList = false;
  return { members, count, isList, ...(problem ? { problem } : {}) };

  function finish(at: number): StreamedList {
    // only whitespace may follow the root value (several values one after another are read whole)
    let j = at;
    for (;;) {
      while (j < len && isWs(buf[j]!)) j++;
      if (j < len) {
        fail("more JSON after the List; read as several documents instead", base + j);
        break;
      }
      base += len;
      len = base >= src.size ? 0 : src.read(buf, base);
      if (len <= 0) break;
      j = 0;
    }
    return { members, count, isList, ...(problem ? { problem } : {}) };
  }
}

/** Backslashes at the end of the captured pieces so far. */
function trailingBackslashes(pieces: readonly Buffer[]): number {
  let n = 0;
  for (let p = pieces.length - 1; p >= 0; p--) {
    const b = pieces[p]!;
    for (let k = b.length - 1; k >= 0; k--) {
      if (b[k] !== BACKSLASH) return n;
      n++;
    }
  }
  return n;
}
