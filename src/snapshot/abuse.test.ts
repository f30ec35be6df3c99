import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { writePodList } from "../../bench/gen-cluster.ts";
import { isEmptySnapshot, loadSnapshot, MAX_DIAGNOSTICS_PER_FILE } from "./load.ts";
import { openSnapshot, SnapshotOpenError } from "./source.ts";
import { ARCHIVE_LIMITS, readTar, unpackedBudget } from "./tar.ts";

const tmp = mkdtempSync(join(tmpdir(), "pp-abuse-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A snapshot folder with one file. */
function folder(rel: string, text: string): string {
  const root = mkdtempSync(join(tmp, "s-"));
  mkdirSync(join(root, rel, ".."), { recursive: true });
  writeFileSync(join(root, rel), text);
  return root;
}

describe("archives are unpacked within limits", () => {
  it("stops a gzip bomb at its budget, once, and says which limit", () => {
    // 64 MiB of zeros pack to about 64 KiB: far past 200 unpacked bytes per packed byte
    const zeros = gzipSync(Buffer.alloc(64 << 20), { level: 1 });
    const limits = { ...ARCHIVE_LIMITS, ratioFrom: 1 << 20 };
    const r = readTar(zeros, "b.tar.gz", limits);
    assert.deepEqual(r.entries, []);
    assert.equal(r.diagnostics.length, 1);
    assert.equal(r.diagnostics[0]?.code, "ARCHIVE_TOO_LARGE");
    assert.match(r.diagnostics[0]?.message ?? "", /unpacks to more than \d+ bytes from \d+/);
  });

  it("opening a bomb is a usage error naming the archive, and never a hang", () => {
    const path = join(tmp, "bomb.tar.gz");
    // past the 1 GiB total: 1.1 GiB of zeros pack to about 1 MiB (zlib level 9 on a stream)
    execFileSync("sh", ["-c", `head -c 1100M /dev/zero | gzip -9 > ${path}`]);
    assert.throws(
      () => openSnapshot(path),
      (e: unknown) =>
        e instanceof SnapshotOpenError && /bomb\.tar\.gz: unpacks to more than/.test(e.message),
    );
  });

  it("the budget is the ratio's, floored, and capped by the total", () => {
    assert.equal(unpackedBudget(1000), ARCHIVE_LIMITS.ratioFrom);
    assert.equal(unpackedBudget(1 << 20), Math.max(ARCHIVE_LIMITS.ratioFrom, 200 << 20));
    assert.equal(unpackedBudget(1 << 30), ARCHIVE_LIMITS.maxUnpackedBytes);
  });

  it("reads the first files of an archive with too many, and says so", () => {
    const dir = mkdtempSync(join(tmp, "many-"));
    mkdirSync(join(dir, "snap/probes"), { recursive: true });
    for (let i = 0; i < 12; i++) writeFileSync(join(dir, `snap/probes/p${i}.txt`), "x\n");
    execFileSync("tar", ["-czf", join(dir, "s.tar.gz"), "-C", dir, "snap"]);
    const r = readTar(readFileSync(join(dir, "s.tar.gz")), "s.tar.gz", {
      ...ARCHIVE_LIMITS,
      maxEntries: 5,
    });
    assert.equal(r.entries.length, 5);
    assert.equal(r.diagnostics.at(-1)?.code, "ARCHIVE_TOO_MANY_FILES");
  });

  it("refuses a FIFO named .tar.gz instead of blocking on it", () => {
    const fifo = join(tmp, "f.tar.gz");
    execFileSync("mkfifo", [fifo]);
    assert.throws(
      () => openSnapshot(fifo),
      (e: unknown) => e instanceof SnapshotOpenError && /not a regular file/.test(e.message),
    );
  });
});

describe("cluster-sized and hostile files are read without crashing", () => {
  it("a List of 130,000 objects is read whole (never spread onto the stack)", () => {
    const items = Array.from({ length: 130_000 }, (_, i) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: `c${i}`, namespace: "default" },
    }));
    const root = folder(
      "cluster/cms.json",
      JSON.stringify({ apiVersion: "v1", kind: "List", items }),
    );
    const snap = loadSnapshot(openSnapshot(root));
    assert.equal(snap.objects.length, 130_000);
    assert.equal(snap.objects.at(-1)?.name, "c129999");
  });

  it("a 50 MB kubectl pod List loads within the README's budget (a child with that much heap)", () => {
    const root = mkdtempSync(join(tmp, "pods-"));
    mkdirSync(join(root, "cluster"));
    const file = join(root, "cluster/pods.json");
    writePodList(file, 10_000);
    const bytes = statSync(file).size;
    // the budget: 1.5x the file, above podpath's own code and heap (64 MB)
    const heapMb = 64 + Math.ceil((1.5 * bytes) / 1048576);
    const child = join(import.meta.dirname, "../../bench/load-snapshot-child.ts");
    const r = spawnSync(
      process.execPath,
      [`--max-old-space-size=${heapMb}`, "--import", "tsx", child, root],
      { encoding: "utf8", timeout: 240_000, killSignal: "SIGKILL" },
    );
    // a timeout is a failure (the child is killed), never a wait
    assert.equal(r.error, undefined, `${r.error?.message}`);
    assert.equal(r.status, 0, `out of the ${heapMb} MB budget? ${r.stderr.slice(-800)}`);
    const out = JSON.parse(r.stdout.trim()) as { objects: number; errors: number };
    assert.equal(out.objects, 10_000);
    assert.equal(out.errors, 0);
  });

  it("200,000 bad lines in a dump give the first problems and a count of the rest", () => {
    const bad = Array.from({ length: 200_000 }, (_, i) => `garbage ${i} !!\n`).join("");
    const root = folder("nodes/n1/iptables-save.txt", `*nat\n${bad}COMMIT\n`);
    const snap = loadSnapshot(openSnapshot(root));
    const mine = snap.diagnostics.filter((d) => d.source?.file === "nodes/n1/iptables-save.txt");
    assert.equal(mine.length, MAX_DIAGNOSTICS_PER_FILE + 1);
    const last = mine.at(-1);
    assert.equal(last?.code, "TOO_MANY_DIAGNOSTICS");
    assert.match(last?.message ?? "", /199900 more problems like these/);
  });

  it("YAML nested 3,000 levels deep is a problem with its line, not a crash", () => {
    const deep = `a:\n${Array.from({ length: 3000 }, (_, i) => `${"  ".repeat(i + 1)}- \n`).join("")}`;
    const root = folder("cluster/deep.yaml", deep);
    const snap = loadSnapshot(openSnapshot(root));
    assert.equal(snap.objects.length, 0);
    const d = snap.diagnostics.find((x) => x.source?.file === "cluster/deep.yaml");
    assert.ok(d, "the file is named");
    assert.equal(d.severity, "error");
    assert.ok(!isEmptySnapshot(snap), "a layout file that failed is not 'nothing in it'");
  });
});

describe("owner files are read once, on load", () => {
  it("an unreadable ipset.txt is a problem named with its file and line; the sets read are kept", () => {
    const root = folder(
      "nodes/n1/ipset.txt",
      "create s hash:net family inet\nadd s 10.244.0.0/16\n{{{\nadd nope\n",
    );
    const snap = loadSnapshot(openSnapshot(root));
    const bad = snap.diagnostics.filter((d) => d.source?.file === "nodes/n1/ipset.txt");
    assert.deepEqual(
      bad.map((d) => d.source?.line),
      [3, 4],
    );
    assert.ok(snap.nodes.get("n1")?.ipsets, "the sets before the damage are kept");
  });
});
