/**
 * End-to-end: the snapshot folder of `collect --out` and `lab run --out` (the built CLI). A second
 * run on a folder in use is refused (exit 2) and the first run's snapshot is whole; a link planted
 * inside the folder while collect works is never written through; `--out` naming a file is a usage
 * error, not a stack trace. The first run is held mid-collection by a gate in front of the fake
 * API server (its requests wait until the test opens it), so nothing here waits for time.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { claimOutFolder, LOCK_FILE } from "../../src/snapshot/out-folder.ts";
import { kubeconfigFor, startFakeApi } from "../k8s-api/server.ts";
import { smallCluster } from "../k8s-api/small-cluster.ts";

const CLI = join(import.meta.dirname, "../../dist/cli/main.js");
const scratch = mkdtempSync(join(tmpdir(), "podpath-out-e2e-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function podpath(args: readonly string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, NO_COLOR: "1", ...env },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => {
    stdout += d;
  });
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  const done = new Promise<Ran>((r) => child.on("close", (code) => r({ code, stdout, stderr })));
  return { child, done };
}

/** The fake API behind a gate: requests wait until `open()`; `first` resolves at the first one. */
async function gatedApi() {
  const api = await startFakeApi(smallCluster(), { gkeCrds: true });
  let open: () => void = () => {};
  const opened = new Promise<void>((r) => {
    open = r;
  });
  let arrived: () => void = () => {};
  const first = new Promise<void>((r) => {
    arrived = r;
  });
  const gate = createServer((req, res) => {
    arrived();
    void opened.then(() => {
      const up = request(
        `${api.url}${req.url}`,
        { method: req.method, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        },
      );
      req.pipe(up);
    });
  });
  await new Promise<void>((r) => gate.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(gate.address() as AddressInfo).port}`;
  const kc = join(scratch, `kc-${url.split(":").at(-1)}`);
  writeFileSync(kc, kubeconfigFor(url, { token: "t" }));
  after(async () => {
    open();
    gate.closeAllConnections();
    await new Promise<void>((r) => gate.close(() => r()));
    await api.close();
  });
  return { kc, first, open };
}

const collect = (out: string, kc: string) =>
  podpath(["collect", "--allow-plaintext-credentials", "--out", out, "--kubeconfig", kc]);

const noStack = (s: string) => assert.doesNotMatch(s, /\n\s+at |internal error/, s);

describe("collect --out", () => {
  it("a second run on a folder in use exits 2 naming the first; the first's snapshot is whole", async () => {
    const g = await gatedApi();
    const out = join(scratch, "busy");
    const first = collect(out, g.kc);
    await g.first;
    const second = await collect(out, g.kc).done;
    assert.equal(second.code, 2, second.stderr);
    assert.match(
      second.stderr,
      new RegExp(`is being written by another podpath run \\(pid ${first.child.pid}\\)`),
    );
    noStack(second.stderr);
    g.open();
    const r = await first.done;
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), out);
    const files = readdirSync(out, { recursive: true, encoding: "utf8" });
    assert.ok(files.includes("README.md") && files.includes(join("cluster", "nodes.yaml")));
    assert.ok(!files.includes(LOCK_FILE), "the lock is gone");
    // a later run is refused too: the folder holds a snapshot
    const third = await collect(out, g.kc).done;
    assert.equal(third.code, 2);
    assert.match(third.stderr, /is not empty; name a new or empty folder/);
  });

  it("a link planted inside the folder while collect works is never written through", async () => {
    const g = await gatedApi();
    const out = join(scratch, "planted");
    const outside = join(scratch, "outside");
    mkdirSync(outside);
    const run = collect(out, g.kc);
    await g.first;
    // the folder was checked and locked; now its cluster/ becomes a link to a folder outside
    symlinkSync(outside, join(out, "cluster"));
    g.open();
    const r = await run.done;
    // the folder was tampered with: the run stops there (exit 2), saying where
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /cluster in the snapshot folder is not a folder \(a link or a file/);
    noStack(r.stderr);
    assert.deepEqual(readdirSync(outside), []);
    assert.ok(lstatSync(join(out, "cluster")).isSymbolicLink());
  });

  it("--out naming a file is a usage error (exit 2), not a stack trace", async () => {
    const file = join(scratch, "a-file");
    writeFileSync(file, "keep me");
    const r = await podpath(["collect", "--out", file, "--kubeconfig", join(scratch, "none")]).done;
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /a-file is a file, not a folder/);
    noStack(r.stderr);
    assert.equal(readFileSync(file, "utf8"), "keep me");
  });
});

describe("lab run --out", () => {
  it("refuses a folder another run holds, and a file, with exit 2", async (t) => {
    if (process.getuid?.() !== 0) return t.skip("lab run needs root");
    const dir = join(scratch, "lab-busy");
    const held = claimOutFolder(dir);
    try {
      const r = await podpath(["lab", "run", "masquerade", "--out", dir]).done;
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /being written by another podpath run \(pid \d+\)/);
      noStack(r.stderr);
    } finally {
      held.release();
    }
    const file = join(scratch, "lab-file");
    writeFileSync(file, "x");
    const f = await podpath(["lab", "run", "masquerade", "--out", file]).done;
    assert.equal(f.code, 2, f.stderr);
    assert.match(f.stderr, /is a file, not a folder/);
    assert.ok(existsSync(dir));
  });
});
