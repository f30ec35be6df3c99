/**
 * @module cli/commands/verify — `podpath verify <before> <after>`: the change record of every case
 * that has something to compare (`questions/verify`). One record is written as it is (`-o json`:
 * the record; md and text: its rendering); several follow one another (`-o json`: an array).
 */
import { parseDestination } from "../../cases/endpoints.ts";
import { allIntended, verifySnapshots } from "../../questions/verify.ts";
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
  const format = opts["output"] ?? "md";
  if (format === "json") {
    const json = records.length === 1 ? records[0]!.record : records.map((r) => r.record);
    io.out(`${JSON.stringify(json, (_k, v) => (typeof v === "bigint" ? v.toString() : v), 2)}\n`);
  } else if (format === "text") io.out(records.map((r) => r.text).join("\n"));
  else io.out(records.map((r) => r.markdown).join("\n"));
  return allIntended(records) ? EXIT.ok : EXIT.findings;
}
