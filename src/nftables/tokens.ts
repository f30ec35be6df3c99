/**
 * @module nftables/tokens — splits one line of nft's listing into words: quoted strings stay
 * whole, and `{`, `}`, `,` and `;` are words of their own (nft prints `established,related` and
 * `{ 22, 80 }` alike). A concatenation's ` . ` and a map's ` : ` are already spaced by nft.
 */

/** The words of `text`; a quoted string keeps its quotes (`"cbr0"`). */
export function tokenizeNft(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    if (c === " " || c === "\t" || c === "\r" || c === "\n") {
      i++;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      while (j < n && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      out.push(text.slice(i, Math.min(j + 1, n)));
      i = j + 1;
      continue;
    }
    if (c === "{" || c === "}" || c === "," || c === ";") {
      out.push(c);
      i++;
      continue;
    }
    let j = i;
    while (j < n && !' \t\r\n{},;"'.includes(text[j]!)) j++;
    out.push(text.slice(i, j));
    i = j;
  }
  return out;
}

/** Splits off nft -a's trailing `# handle N`; a `#` inside quotes is kept. */
export function splitHandle(text: string): { body: string; handle?: number } {
  const m = /\s#\s*handle\s+(\d+)\s*$/.exec(text);
  if (!m) return { body: text };
  return { body: text.slice(0, m.index), handle: Number(m[1]) };
}

/** Net `{` minus `}` outside quotes: a listing line whose braces do not close continues. */
export function braceDepth(text: string): number {
  let d = 0;
  let quoted = false;
  for (const c of text) {
    if (c === '"') quoted = !quoted;
    else if (!quoted && c === "{") d++;
    else if (!quoted && c === "}") d--;
  }
  return d;
}
