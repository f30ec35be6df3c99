/**
 * @module snapshot/sites — the far sides a snapshot describes (`remote/*.yaml`), read once per
 * snapshot for every question that asks (the masquerade question, plans, verify, the VPN checks).
 */
import { type RemoteSite, readRemoteSites } from "../evidence/remote-site.ts";
import type { Diagnostic } from "../model/types.ts";
import { readSnapshotText, type Snapshot } from "./load.ts";

interface Sites {
  readonly sites: RemoteSite[];
  /** Problems met reading the files: whoever reports the snapshot's far sides reports these. */
  readonly diagnostics: Diagnostic[];
}

const read = new WeakMap<Snapshot, Sites>();

export function readSites(snap: Snapshot): Sites {
  let r = read.get(snap);
  if (r === undefined) {
    const sites: RemoteSite[] = [];
    const diagnostics: Diagnostic[] = [];
    for (const f of snap.remoteFiles) {
      const text = readSnapshotText(snap.source, f, diagnostics);
      if (text === undefined) continue;
      const s = readRemoteSites(text, f);
      sites.push(...s.value);
      diagnostics.push(...s.diagnostics);
    }
    r = { sites, diagnostics };
    read.set(snap, r);
  }
  return r;
}
