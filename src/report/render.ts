/**
 * @module report/render — one door from an answer to its output: `-o json` writes the envelope
 * (model/envelope), `text`, `md` and `html` render the answer's document (report/document).
 */
import { toJson } from "../model/envelope.ts";
import type { Document } from "./document.ts";
import { renderDocumentHtml } from "./document-html.ts";
import { renderDocumentMarkdown } from "./document-markdown.ts";
import { renderDocumentText } from "./document-text.ts";
import { type Paint, PLAIN } from "./text.ts";

/** The formats every question answers in (some add their own: yaml, jsonl). */
export const FORMATS = ["text", "json", "md", "html"] as const;
export type Format = (typeof FORMATS)[number];

export function isFormat(s: unknown): s is Format {
  return typeof s === "string" && (FORMATS as readonly string[]).includes(s);
}

/** An answer ready to render: its JSON (an envelope) and its document. */
export interface Report {
  readonly json: unknown;
  readonly document: Document;
}

/** The answer in `format`; `paint` colours text (PLAIN: none). */
export function renderReport(report: Report, format: Format, paint: Paint = PLAIN): string {
  switch (format) {
    case "json":
      return toJson(report.json);
    case "md":
      return renderDocumentMarkdown(report.document);
    case "html":
      return renderDocumentHtml(report.document);
    case "text":
      return renderDocumentText(report.document, paint);
  }
}
