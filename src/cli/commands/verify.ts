/**
 * @module cli/commands/verify — `podpath verify <before> <after>`: the change record of every case
 * that has something to compare (`questions/verify`). One record is written as it is (`-o json`:
 * the record in its envelope; text, md, html: its document rendered by report/); several follow
 * one another (`-o json`: an array; html: one page, a section per record).
 */
import type { CaseProof } from "../../cases/case.ts";
import { parseDestination } from "../../cases/endpoints.ts";
import { envelope, toJson } from "../../model/envelope.ts";
import { allIntended, verifySnapshots } from "../../questions/verify.ts";
import { type Document, section } from "../../report/document.ts";
import { renderDocumentHtml } from "../../report/document-html.ts";
import { renderDocumentMarkdown } from "../../report/document-markdown.ts";
import { renderDocumentText } from "../../report/document-text.ts";
import { LAYOUT_HELP } from "../../snapshot/layout.ts";
import { isEmptySnapshot, loadSnapshot, type Snapshot } from "../../snapshot/load.ts";
import { openSnapshot, SnapshotOpenError } from "../../snapshot/source.ts";
import { EXIT, type Io, UsageError } from "../io.ts";

function load(path: string): Snapshot {
  try {
    const snap = loadSnapshot(openSnapshot(path));
    if (isEmptySnapshot(snap))
      throw new UsageError(`${path}: nothing in it is part of a snapshot.\n${LAYOUT_HELP}`);
    return snap;
  } catch (e) {
    if (e instanceof SnapshotOpenError) throw new UsageError(`${e.message}\n${LAYOUT_HELP}`);
    throw e;
  }
}

/** Several records on one page: a section per record. */
function onePage(records: readonly CaseProof[]): Document {
  if (records.length === 1) return records[0]!.document;
  return {
    question: "verify",
    title: "Change records",
    blocks: records.map((r) => section(r.document.title ?? r.case, r.document.blocks)),
  };
}

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const [b, a] = args;
  if (!b || !a)
    throw new UsageError("verify: name the snapshot before the change and the one after it");
  const dest = typeof opts["dest"] === "string" ? parseDestination(opts["dest"]) : undefined;
  if (dest && "error" in dest) throw new UsageError(dest.error);
  const records = await verifySnapshots(load(b), load(a), dest ? { dest } : {});
  if (records.length === 0)
    throw new UsageError(
      `verify: neither ${b} nor ${a} holds anything a case compares (an ip-masq-agent ConfigMap, agent or chain, a far side; a VPN pod)\n${LAYOUT_HELP}`,
    );
  const format = opts["output"] ?? "text";
  if (format === "json") {
    const json = records.map((r) => envelope("verify", r.record));
    io.out(toJson(json.length === 1 ? json[0] : json));
  } else if (format === "html") io.out(renderDocumentHtml(onePage(records)));
  else if (format === "md")
    io.out(
      records.map((r) => (r.document ? renderDocumentMarkdown(r.document) : r.markdown)).join("\n"),
    );
  else io.out(records.map((r) => renderDocumentText(r.document, io.colors)).join("\n"));
  return allIntended(records) ? EXIT.ok : EXIT.findings;
}
