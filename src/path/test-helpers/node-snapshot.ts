/**
 * @module path/test-helpers/node-snapshot — the whole-path tests' snapshot in a temporary folder
 * (a copy of `base` when given, with `files` written over it, relative to the snapshot's root),
 * loaded as diagnose loads one; and one pod packet's answer from a node of it (tcp from source
 * port 40000). The folders are removed when the test (or test file) that made them ends.
 */
import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after } from "node:test";
import { parseIp } from "../../net/cidr.ts";
import { loadSnapshot, type Snapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { nodePathEvaluator } from "../node-path.ts";
import type { PathResult } from "../path-types.ts";

let root: string | undefined;

export function snapshotWith(files: Readonly<Record<string, string>>, base?: string): Snapshot {
  if (root === undefined) {
    const made = mkdtempSync(join(tmpdir(), "podpath-path-test-"));
    root = made;
    // called inside a test, the hook runs when that test ends: the next call makes a new folder
    after(() => {
      rmSync(made, { recursive: true, force: true });
      if (root === made) root = undefined;
    });
  }
  const dir = mkdtempSync(join(root, "s-"));
  if (base !== undefined) cpSync(base, dir, { recursive: true });
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return loadSnapshot(openSnapshot(dir));
}

/** The answer of node `node`'s rules for a tcp packet a pod sends from source port 40000. */
export function podPacketAnswer(
  snap: Snapshot,
  node: string,
  p: {
    readonly src: string;
    readonly dst: string;
    readonly dport: number;
    readonly inIface: string;
  },
): PathResult {
  const n = snap.nodes.get(node);
  assert.ok(n, `node ${node} in the snapshot`);
  const ev = nodePathEvaluator(n);
  assert.ok(ev, `node ${node} has rules to walk`);
  return ev.evaluate({
    src: parseIp(p.src),
    dst: parseIp(p.dst),
    proto: "tcp",
    sport: 40000,
    dport: p.dport,
    origin: "pod",
    inIface: p.inIface,
  });
}
