/**
 * @module evidence/yaml-source — YAML (and JSON, which YAML reads) with positions: parses every
 * document with the `yaml` package, turns its errors into diagnostics, and maps a path inside a
 * document (or a line inside a string field) back to a file line. Lines are counted here rather
 * than with the package's LineCounter so that text refused before parsing can still be cited.
 */
import type { Document, Node, Scalar } from "yaml";
import type { Diagnostic, SourceRef } from "../model/types.ts";
import { yamlLib } from "./lazy-yaml.ts";
import { lineAt } from "./text-lines.ts";

export type YamlPath = readonly (string | number)[];

/** One parsed document of a YAML stream, with its plain JS value when it could be built. */
export interface YamlDocument {
  readonly doc: Document.Parsed;
  /** False when the document has syntax errors: its value is then not trusted. */
  readonly ok: boolean;
  readonly value: unknown;
  /** 1-based line where the document's content starts. */
  readonly line: number;
}

/** A parsed YAML stream and the means to cite positions in it. */
export interface YamlSource {
  readonly file: string;
  readonly documents: readonly YamlDocument[];
  /** A SourceRef for a byte offset into the text. */
  refAt(offset: number): SourceRef;
  /** The node at `path` inside `root` (a document's contents or a node below it). */
  nodeAt(root: unknown, path: YamlPath): { node: Node; key?: Node } | undefined;
  /** Where the field at `path` below `root` is written: the key's line for collections, the value's otherwise. */
  locate(root: unknown, path: YamlPath): SourceRef | undefined;
  /** The file line of line `lineWithinString` (1-based) of the string scalar at `path` below `root`. */
  locateInString(root: unknown, path: YamlPath, lineWithinString: number): SourceRef | undefined;
}

/** Nesting deeper than this is refused before parsing: no Kubernetes object comes close. */
const MAX_DEPTH = 200;

/** Documents whose JS value is built at most this many nodes large (alias expansion guard). */
const MAX_ALIAS_COUNT = 100;

/**
 * Parses every document of `text` with YAML 1.2 core scalars. The API server decodes through
 * sigs.k8s.io/yaml, which resolves YAML 1.1 scalars (`yes`, `n`) but hands a string field the
 * original text; 1.2 gives those string fields (names, labels, data) the same strings, and
 * kubectl quotes every ambiguous string when it prints. Duplicate keys are errors.
 */
export function readYamlSource(
  text: string,
  file: string,
): { source: YamlSource; diagnostics: Diagnostic[] } {
  const diagnostics: Diagnostic[] = [];
  const lines = textLines(text, file);
  const { refAt } = lines;
  const documents = readDocuments(text, lines, diagnostics);

  const locate = (root: unknown, path: YamlPath): SourceRef | undefined => {
    const found = nodeAt(root, path);
    if (!found) return undefined;
    // Collections and empty values are cited at their key; scalars where the value is written.
    const atKey = !yamlLib().isScalar(found.node) || found.node.value === null;
    const at = atKey && found.key?.range ? found.key : found.node;
    return at.range ? refAt(at.range[0]) : undefined;
  };
  const locateInString = (
    root: unknown,
    path: YamlPath,
    lineWithinString: number,
  ): SourceRef | undefined => lineInString(text, lines, nodeAt(root, path), lineWithinString);

  return {
    source: { file, documents, refAt, nodeAt, locate, locateInString },
    diagnostics,
  };
}

/** The lines of a YAML text, cited by offset. */
interface TextLines {
  readonly lineStarts: readonly number[];
  /** Line `line` (1-based) without its end. */
  lineText(line: number): string;
  /** The 1-based line holding `offset`. */
  lineOf(offset: number): number;
  /** `offset` cited with line, column and (when not too long) the line's text. */
  refAt(offset: number): SourceRef;
}

function textLines(text: string, file: string): TextLines {
  const lineStarts = lineStartsOf(text);
  let lineTexts: string[] | undefined;
  const lineText = (line: number): string => {
    lineTexts ??= text.split(/\r?\n/);
    return (lineTexts[line - 1] ?? "").trimEnd();
  };
  const lineOf = (offset: number): number => lineAt(lineStarts, offset);
  const refAt = (offset: number): SourceRef => {
    const line = lineOf(offset);
    const col = offset - (lineStarts[line - 1] ?? 0) + 1;
    const t = lineText(line);
    return t.length > 500 ? { file, line, col } : { file, line, col, text: t };
  };
  return { lineStarts, lineText, lineOf, refAt };
}

/** Every document of `text`, parsed; syntax errors and warnings become diagnostics. */
function readDocuments(text: string, lines: TextLines, diagnostics: Diagnostic[]): YamlDocument[] {
  const { refAt } = lines;
  const documents: YamlDocument[] = [];
  const tooDeep = nestingTooDeep(text);
  if (tooDeep !== undefined) {
    diagnostics.push({
      code: "YAML_SYNTAX",
      severity: "error",
      message: `brackets nested deeper than ${MAX_DEPTH} levels; expected a Kubernetes object or podpath file, nothing was read`,
      source: refAt(tooDeep),
    });
    return documents;
  }
  const parsed = yamlLib().parseAllDocuments(text, {
    uniqueKeys: true,
    prettyErrors: false,
    keepSourceTokens: false,
  });
  for (const doc of Array.isArray(parsed) ? parsed : []) {
    for (const e of doc.errors) {
      diagnostics.push({
        code: "YAML_SYNTAX",
        severity: "error",
        message: `${firstLine(e.message)} (${e.code}); expected valid YAML or JSON, this document was skipped`,
        source: refAt(e.pos[0]),
      });
    }
    for (const w of doc.warnings) {
      diagnostics.push({
        code: "YAML_WARNING",
        severity: "warning",
        message: `${firstLine(w.message)} (${w.code})`,
        source: refAt(w.pos[0]),
      });
    }
    documents.push(documentOf(doc, lines, diagnostics));
  }
  return documents;
}

/** One parsed document with its JS value, unless it has errors or its aliases make a cycle. */
function documentOf(
  doc: Document.Parsed,
  lines: TextLines,
  diagnostics: Diagnostic[],
): YamlDocument {
  const start = (doc.contents as Node | null)?.range?.[0] ?? doc.range[0];
  const line = lines.lineOf(start);
  let value: unknown;
  let ok = doc.errors.length === 0;
  if (ok) {
    try {
      value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
      if (!isAcyclic(value)) {
        ok = false;
        diagnostics.push({
          code: "YAML_SYNTAX",
          severity: "error",
          message:
            "an alias refers to a collection that contains it, or nesting is too deep; expected a tree, this document was skipped",
          source: lines.refAt(start),
        });
      }
    } catch (e) {
      ok = false;
      diagnostics.push({
        code: "YAML_SYNTAX",
        severity: "error",
        message: `${firstLine(e instanceof Error ? e.message : String(e))}; this document was skipped`,
        source: lines.refAt(start),
      });
    }
  }
  return { doc, ok, value: ok ? value : undefined, line };
}

/** The node at `path` below `root`, with its key when it is a map value. */
function nodeAt(root: unknown, path: YamlPath): { node: Node; key?: Node } | undefined {
  let node = root as Node | undefined;
  let key: Node | undefined;
  for (const seg of path) {
    if (yamlLib().isMap(node)) {
      const pair = node.items.find(
        (p) =>
          yamlLib().isPair(p) && yamlLib().isScalar(p.key) && String(p.key.value) === String(seg),
      );
      if (!pair) return undefined;
      key = pair.key as Node;
      node = (pair.value ?? undefined) as Node | undefined;
    } else if (yamlLib().isSeq(node) && typeof seg === "number") {
      key = undefined;
      node = node.items[seg] as Node | undefined;
    } else {
      return undefined;
    }
    if (node === undefined || node === null) return undefined;
  }
  if (!node?.range) return undefined;
  return key ? { node, key } : { node };
}

/** Where line `lineWithinString` (1-based) of the string scalar `found` is written. */
function lineInString(
  text: string,
  { lineStarts, lineText, lineOf, refAt }: TextLines,
  found: { node: Node } | undefined,
  lineWithinString: number,
): SourceRef | undefined {
  if (!found || !yamlLib().isScalar(found.node) || typeof found.node.value !== "string")
    return undefined;
  const scalar = found.node as Scalar<string>;
  const lines = scalar.value.split("\n");
  if (!Number.isInteger(lineWithinString) || lineWithinString < 1) return undefined;
  if (lineWithinString > lines.length) return undefined;
  const [from, valueEnd] = scalar.range ?? [0, 0];
  const startLine = lineOf(from);
  if (scalar.type === "BLOCK_LITERAL") {
    // YAML 1.2 §8.1.2: a literal scalar's content lines are the source lines after the header,
    // one for one (the indentation removed).
    const line = startLine + lineWithinString;
    return refAt(firstNonSpace(text, lineStarts[line - 1] ?? from));
  }
  if (scalar.type === "QUOTE_DOUBLE" && lineOf(valueEnd) === startLine) {
    // A JSON-style "a\nb" string on one source line: find the escape that starts the line.
    const at = offsetAfterEscapedNewlines(text, from + 1, valueEnd, lineWithinString - 1);
    return at === undefined ? refAt(from) : refAt(at);
  }
  // Folded, plain or multi-line quoted scalars: find the line's text in the source, in order.
  const line = sourceLineOf(lines, lineWithinString, startLine, lineOf(valueEnd), lineText);
  return refAt(firstNonSpace(text, lineStarts[line - 1] ?? from));
}

function firstLine(s: string): string {
  const nl = s.indexOf("\n");
  return nl < 0 ? s : s.slice(0, nl);
}

function firstNonSpace(text: string, at: number): number {
  let i = at;
  while (text[i] === " " || text[i] === "\t") i++;
  return text[i] === "\n" || text[i] === undefined ? at : i;
}

/**
 * The source line (1-based) on which the `n`-th line of a folded, plain or multi-line quoted
 * scalar stands: each of its first `n` lines is looked for, in order, between `startLine` and
 * `endLine` (by its first 40 characters, the way the parser folded it).
 */
export function sourceLineOf(
  lines: readonly string[],
  n: number,
  startLine: number,
  endLine: number,
  lineText: (line: number) => string,
): number {
  let cursor = startLine;
  for (let i = 0; i < n; i++) {
    const want = lines[i]!.trim();
    if (want === "") continue;
    for (let l = cursor; l <= endLine; l++) {
      if (lineText(l).includes(want.slice(0, 40))) {
        cursor = l;
        break;
      }
    }
  }
  return cursor;
}

/**
 * The offset just after the `n`-th `\n` escape in a double-quoted string written between
 * `from` and `to` (`from` itself when `n` is 0), or undefined when there are fewer.
 */
export function offsetAfterEscapedNewlines(
  text: string,
  from: number,
  to: number,
  n: number,
): number | undefined {
  if (n === 0) return from;
  let seen = 0;
  for (let i = from; i < to - 1; i++) {
    if (text[i] !== "\\") continue;
    if (text[i + 1] === "n" && ++seen === n) return i + 2;
    i++;
  }
  return undefined;
}

/** The offset where flow or block nesting first exceeds MAX_DEPTH, if it does (a cheap pre-scan). */
function nestingTooDeep(text: string): number | undefined {
  let depth = 0;
  let quote = "";
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (quote) {
      if (ch === 92 && quote === '"') i++;
      else if (text[i] === quote) quote = "";
      continue;
    }
    if (ch === 34 || ch === 39) {
      // only a quote at a token start opens a quoted scalar
      const prev = text[i - 1];
      if (prev === undefined || " \t\n[{,:-".includes(prev)) quote = text[i]!;
    } else if (ch === 91 || ch === 123) {
      if (++depth > MAX_DEPTH) return i;
    } else if (ch === 93 || ch === 125) {
      if (depth > 0) depth--;
    } else if (ch === 35) {
      const nl = text.indexOf("\n", i);
      i = nl < 0 ? text.length : nl;
    }
  }
  return undefined;
}

/** True when the value is a tree (no object reachable from itself). */
function isAcyclic(value: unknown): boolean {
  const onPath = new Set<object>();
  const visit = (v: unknown, depth: number): boolean => {
    if (v === null || typeof v !== "object") return true;
    if (onPath.has(v) || depth > MAX_DEPTH * 2) return false;
    onPath.add(v);
    const children = v instanceof Map ? [...v.values()] : Object.values(v);
    const ok = children.every((c) => visit(c, depth + 1));
    onPath.delete(v);
    return ok;
  };
  return visit(value, 0);
}

function lineStartsOf(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  return starts;
}
