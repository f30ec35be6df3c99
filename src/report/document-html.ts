/**
 * @module report/document-html — a document (report/document) as one self-contained HTML page:
 * inline CSS, no script, no network; sections as headings (folded ones as `<details>`), tables,
 * `<pre>` code, paths as SVG diagrams and findings as report/html draws them. Every text goes
 * through the `html` tag, which escapes it.
 */
import type { Block, Document, ListItem, Text } from "./document.ts";
import { spansOf } from "./document.ts";
import { CSS, findingHtml, html, pathHtml, raw, type SafeHtml } from "./html.ts";
import { guardCommand } from "./shell-quote.ts";
import { terminalSafeDeep } from "./terminal-safe.ts";

const MORE_CSS = `pre{background:#f4f4f4;padding:.5rem .8rem;overflow-x:auto}
.good{color:#2f7d32}.bad{color:#c62828}.warn{color:#b26a00}.dim{color:#666}
dl.fields{display:grid;grid-template-columns:max-content auto;gap:.1rem 1rem}dl.fields dt{font-weight:600}dl.fields dd{margin:0}`;

function inline(t: Text): SafeHtml {
  return html`${spansOf(t).map((s) => {
    let part: SafeHtml = s.code ? html`<code>${s.text}</code>` : html`${s.text}`;
    if (s.strong) part = html`<strong>${part}</strong>`;
    return s.tone ? html`<span class="${s.tone}">${part}</span>` : part;
  })}`;
}

function listHtml(items: readonly ListItem[]): SafeHtml {
  return html`<ul>${items.map(
    (i) => html`<li>${inline(i.text)}${i.items ? listHtml(i.items) : ""}</li>`,
  )}</ul>`;
}

function blockHtml(b: Block, level: number): SafeHtml {
  const h = Math.min(6, level);
  switch (b.kind) {
    case "heading":
      return html`${raw(`<h${h}>`)}${b.text}${raw(`</h${h}>`)}`;
    case "paragraph":
      return html`<p>${inline(b.text)}</p>`;
    case "list":
      return listHtml(b.items);
    case "fields":
      return html`<dl class="fields">${b.rows.map(
        (r) => html`<dt>${r.key}</dt><dd>${inline(r.value)}</dd>`,
      )}</dl>`;
    case "table":
      return html`<table><thead><tr>${b.columns.map((c) => html`<th>${c}</th>`)}</tr></thead><tbody>${b.rows.map(
        (r) => html`<tr>${b.columns.map((_, i) => html`<td>${inline(r[i] ?? "")}</td>`)}</tr>`,
      )}</tbody></table>`;
    case "code":
      return html`<pre><code${b.lang ? html` class="language-${b.lang}"` : ""}>${b.text.replace(/\n$/, "")}</code></pre>`;
    case "path":
      return pathHtml(b.path);
    case "finding":
      return findingHtml(b.finding);
    case "section": {
      const body = blocksHtml(b.blocks, level + 1);
      if (b.collapsed)
        return html`<details><summary>${b.title}</summary>
${body}
</details>`;
      return html`<section>${raw(`<h${h}>`)}${b.title}${raw(`</h${h}>`)}
${body}
</section>`;
    }
  }
}

function blocksHtml(blocks: readonly Block[], level: number): SafeHtml {
  return html`${blocks.map(
    (b) => html`${blockHtml(b, level)}
`,
  )}`;
}

/** The document as one standalone HTML page. */
export function renderDocumentHtml(input: Document): string {
  // control characters shown visibly and unsafe commands refused, as in text and Markdown
  const doc = terminalSafeDeep(input, { command: guardCommand });
  const title = doc.title ?? `podpath ${doc.question}`;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title}</title>
<style>${raw(CSS)}
${raw(MORE_CSS)}</style></head><body>
${doc.title === undefined ? "" : html`<h1>${doc.title}</h1>`}
${blocksHtml(doc.blocks, 2)}</body></html>
`.value;
}
