/**
 * @module questions/masquerade/sites — the far sides a snapshot describes (`remote/*.yaml`).
 */
import { type RemoteSite, readRemoteSites } from "../../evidence/remote-site.ts";
import type { Diagnostic } from "../../model/types.ts";
import type { Snapshot } from "../../snapshot/load.ts";

export function readSites(snap: Snapshot): { sites: RemoteSite[]; diagnostics: Diagnostic[] } {
  const sites: RemoteSite[] = [];
  const diagnostics: Diagnostic[] = [];
  for (const f of snap.remoteFiles) {
    const r = readRemoteSites(snap.source.readText(f), f);
    sites.push(...r.value);
    diagnostics.push(...r.diagnostics);
  }
  return { sites, diagnostics };
}
