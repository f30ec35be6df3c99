/**
 * @module report/render — one door from an answer to its output: `-o json` writes the envelope
 * (model/envelope), `text`, `md` and `html` render the answer's document (report/document);
 * diagnose's Answer has its own renderers, behind the same door (renderAnswer).
 */
import type { Answer } from "../model/answer.ts";
import { toJson } from "../model/envelope.ts";
import type { Document } from "./document.ts";
import { renderDocumentHtml } from "./document-html.ts";
import { renderDocumentMarkdown } from "./document-markdown.ts";
import { renderDocumentText } from "./document-text.ts";
import { renderHtml } from "./html.ts";
import { renderJson } from "./json.ts";
import { renderMarkdown } from "./markdown.ts";
import { type Paint, PLAIN, renderText } from "./text.ts";
import { PIPE_WIDTH } from "./wrap.ts";

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

/**
 * The answer in `format`; `paint` colours text (PLAIN: none); `width` is the text's (report/wrap
 * textWidth: the terminal's, 100 in files and pipes).
 */
export function renderReport(
  report: Report,
  format: Format,
  paint: Paint = PLAIN,
  width = PIPE_WIDTH,
): string {
  switch (format) {
    case "json":
      return toJson(report.json);
    case "md":
      return renderDocumentMarkdown(report.document);
    case "html":
      return renderDocumentHtml(report.document);
    case "text":
      return renderDocumentText(report.document, paint, width);
  }
}

/**
 * diagnose's answer in `format`. Its renderers (report/text, markdown, html, json) draw the
 * verdict, findings and paths as they always have; the JSON is the same envelope.
 */
export function renderAnswer(
  answer: Answer,
  format: Format,
  paint: Paint = PLAIN,
  width = PIPE_WIDTH,
): string {
  switch (format) {
    case "json":
      return renderJson(answer);
    case "md":
      return renderMarkdown(answer);
    case "html":
      return renderHtml(answer);
    case "text":
      return renderText(answer, paint, width);
  }
}
