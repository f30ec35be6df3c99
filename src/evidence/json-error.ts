/**
 * @module evidence/json-error — where JSON text first goes wrong. Node 20's `JSON.parse` errors
 * name no position ("Unexpected token '}' ... is not valid JSON"); a report must name the line,
 * so this small validator (RFC 8259 grammar, no values built) finds the offset.
 */

/** The offset of the first byte that breaks the JSON grammar, or undefined when `text` is valid. */
export function jsonErrorOffset(text: string): number | undefined {
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++;
  };
  // Containers are tracked on an explicit stack: deep nesting cannot overflow the call stack.
  const stack: ("[" | "{")[] = [];
  const value = (): boolean => {
    ws();
    const c = text[i];
    if (c === "{" || c === "[") {
      stack.push(c);
      i++;
      return true;
    }
    if (c === '"') return string();
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) {
      const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
      if (!m) return false;
      i += m[0].length;
      return true;
    }
    for (const word of ["true", "false", "null"]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return true;
      }
    }
    return false;
  };
  const string = (): boolean => {
    i++;
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 34) {
        i++;
        return true;
      }
      if (c < 0x20) return false;
      if (c === 92) {
        const e = text[i + 1];
        if (e === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) return false;
          i += 6;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) i += 2;
        else return false;
      } else i++;
    }
    return false;
  };
  // After a value: close containers, or expect `,` and the next member.
  const afterValue = (): boolean => {
    for (;;) {
      ws();
      const top = stack.at(-1);
      if (top === undefined) return true;
      const c = text[i];
      if ((top === "[" && c === "]") || (top === "{" && c === "}")) {
        stack.pop();
        i++;
        continue;
      }
      if (c !== ",") return false;
      i++;
      return top === "{" ? member() : true;
    }
  };
  const member = (): boolean => {
    ws();
    if (text[i] !== '"' || !string()) return false;
    ws();
    if (text[i] !== ":") return false;
    i++;
    return true;
  };
  // An opened container may close at once (`[]`, `{}`) or start with a member.
  const opened = (): boolean | "closed" => {
    ws();
    const top = stack.at(-1)!;
    if (text[i] === (top === "[" ? "]" : "}")) {
      stack.pop();
      i++;
      return "closed";
    }
    return top === "{" ? member() : true;
  };
  for (;;) {
    const depth = stack.length;
    if (!value()) return i;
    if (stack.length > depth) {
      const o = opened();
      if (o === false) return i;
      if (o === true) continue;
    }
    if (!afterValue()) return i;
    if (stack.length === 0) break;
  }
  ws();
  return i < text.length ? i : undefined;
}

/** 1-based line and column of an offset. */
export function lineColAt(text: string, offset: number): { line: number; col: number } {
  let line = 1;
  let start = 0;
  for (let i = text.indexOf("\n"); i >= 0 && i < offset; i = text.indexOf("\n", i + 1)) {
    line++;
    start = i + 1;
  }
  return { line, col: offset - start + 1 };
}
