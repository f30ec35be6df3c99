/**
 * @module report/document — what a question's answer looks like to a person, before it is
 * rendered: a small document of headings, paragraphs, lists, tables, key/value rows, code blocks,
 * traced paths and findings, in sections. Cases and commands build one; report/ renders it as
 * text (report/document-text), Markdown (report/document-markdown) and HTML (report/document-html).
 */
import type { PathView } from "../model/answer.ts";
import type { Finding, Missing } from "../model/types.ts";

/** How a span reads in colour: good (green), bad (red), warn (yellow), dim. */
export type Tone = "good" | "bad" | "warn" | "dim";

/** A run of text: code (a command, an address, a file:line), strong, or toned. */
export interface Span {
  readonly text: string;
  readonly code?: boolean;
  readonly strong?: boolean;
  readonly tone?: Tone;
}

/** Plain words, one span, or spans one after the other. */
export type Inline = string | Span;
export type Text = Inline | readonly Inline[];

export interface ListItem {
  readonly text: Text;
  /** Items under this one. */
  readonly items?: readonly ListItem[];
}

export interface Field {
  /** Empty: a second line of the row above. */
  readonly key: string;
  readonly value: Text;
}

export type Block =
  | { readonly kind: "heading"; readonly text: string }
  | { readonly kind: "paragraph"; readonly text: Text }
  /** bullets false: text draws no bullet (the items still indent); Markdown and HTML always do. */
  | { readonly kind: "list"; readonly items: readonly ListItem[]; readonly bullets?: boolean }
  | { readonly kind: "fields"; readonly rows: readonly Field[] }
  /** Column names are podpath's own words; cells may hold input. */
  | {
      readonly kind: "table";
      readonly columns: readonly string[];
      readonly rows: readonly (readonly Text[])[];
    }
  /** Lines shown as they are: rules, a diff, a config file, a transcript. */
  | { readonly kind: "code"; readonly text: string; readonly lang?: string }
  | { readonly kind: "path"; readonly path: PathView }
  | { readonly kind: "finding"; readonly finding: Finding }
  /** collapsed: shown folded where the format can fold (Markdown and HTML `<details>`). */
  | {
      readonly kind: "section";
      readonly title: string;
      readonly blocks: readonly Block[];
      readonly collapsed?: boolean;
    };

export interface Document {
  /** The question, for the HTML page's title when the document has none. */
  readonly question: string;
  /** The first line (text), `#` heading (Markdown), `<h1>` (HTML); none: the body starts at once. */
  readonly title?: string;
  readonly blocks: readonly Block[];
}

/** A code span: a command, an address, a file:line. */
export const code = (text: string): Span => ({ text, code: true });
export const strong = (text: string): Span => ({ text, strong: true });
export const toned = (tone: Tone, text: string): Span => ({ text, tone });

export const paragraph = (text: Text): Block => ({ kind: "paragraph", text });
export const section = (title: string, blocks: readonly Block[]): Block => ({
  kind: "section",
  title,
  blocks,
});
/** A list; an item with sub-items is `item(text, subItems)`. */
export const list = (items: readonly (Text | ListItem)[], bullets = true): Block => ({
  kind: "list",
  items: items.map((i) =>
    typeof i === "string" || Array.isArray(i) ? { text: i } : (i as ListItem),
  ),
  bullets,
});
export const item = (text: Text, items: readonly (Text | ListItem)[]): ListItem => ({
  text,
  items: items.map((i) => (isListItem(i) ? i : { text: i })),
});
export const codeBlock = (text: string, lang?: string): Block => ({
  kind: "code",
  text,
  ...(lang === undefined ? {} : { lang }),
});
export const fields = (rows: readonly (readonly [string, Text])[]): Block => ({
  kind: "fields",
  rows: rows.map(([key, value]) => ({ key, value })),
});
export const table = (columns: readonly string[], rows: readonly (readonly Text[])[]): Block => ({
  kind: "table",
  columns,
  rows,
});

/** A list item is an object with sub-items; anything else is the item's text. */
function isListItem(i: Text | ListItem): i is ListItem {
  return typeof i === "object" && !Array.isArray(i) && Array.isArray((i as ListItem).items);
}

/** The spans of a text. */
/** A file that would decide more, as one list item: the file, what it decides, its command. */
export const missingItem = (m: Missing): Text => [
  code(m.file),
  `: ${m.would_decide}`,
  ...(m.command ? [" (", code(m.command), ")"] : []),
];

export function spansOf(t: Text): readonly Span[] {
  if (typeof t === "string") return [{ text: t }];
  if (!Array.isArray(t)) return [t as Span];
  return (t as readonly Inline[]).map((s) => (typeof s === "string" ? { text: s } : s));
}

/** A text's words without styling. */
export function plainOf(t: Text): string {
  return spansOf(t)
    .map((s) => s.text)
    .join("");
}
