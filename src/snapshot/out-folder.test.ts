/**
 * @module snapshot/out-folder.test — claiming a snapshot folder (created, empty, locked, stale lock of
 * a killed run) and writing beneath it while a helper process plants symbolic links in it.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
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
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { claimOutFolder, LOCK_FILE, OutFolderError, writeBeneath } from "./out-folder.ts";

const scratch = mkdtempSync(join(tmpdir(), "podpath-out-folder-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let seq = 0;
const fresh = () => join(scratch, `case-${++seq}`);

function refusal(f: () => unknown): OutFolderError {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof OutFolderError, String(e));
    return e;
  }
  assert.fail("expected an OutFolderError");
}

/** The pid of a process that has ended (a killed run's). */
async function deadPid(): Promise<number> {
  const c = spawn(process.execPath, ["-e", ""]);
  await new Promise((r) => c.on("exit", r));
  return c.pid as number;
}

describe("claimOutFolder", () => {
  it("creates the folder (and its parents), locks it, and leaves no lock when released", () => {
    const dir = join(fresh(), "a", "snap");
    const f = claimOutFolder(dir);
    assert.deepEqual(readdirSync(dir), [LOCK_FILE]);
    assert.match(
      readFileSync(join(dir, LOCK_FILE), "utf8"),
      new RegExp(`^${process.pid} \\d+\\n$`),
    );
    writeBeneath(dir, "cluster/nodes.yaml", "items: []\n");
    f.release();
    assert.deepEqual(readdirSync(dir), ["cluster"]);
  });

  it("refuses a file, a symlink, a folder with anything in it, and a folder another run holds", () => {
    const base = fresh();
    mkdirSync(base);
    writeFileSync(join(base, "file"), "x");
    assert.equal(refusal(() => claimOutFolder(join(base, "file"))).code, "ERR_OUT_IS_FILE");
    mkdirSync(join(base, "real"));
    symlinkSync(join(base, "real"), join(base, "link"));
    assert.equal(refusal(() => claimOutFolder(join(base, "link"))).code, "ERR_OUT_UNSAFE");
    mkdirSync(join(base, "full"));
    writeFileSync(join(base, "full", "README.md"), "a snapshot");
    assert.match(
      refusal(() => claimOutFolder(join(base, "full"))).message,
      /is not empty; name a new/,
    );
    const first = claimOutFolder(join(base, "busy"));
    const second = refusal(() => claimOutFolder(join(base, "busy")));
    assert.equal(second.code, "ERR_OUT_LOCKED");
    assert.match(
      second.message,
      new RegExp(`being written by another podpath run \\(pid ${process.pid}\\)`),
    );
    first.release();
  });

  it("takes over the lock of a killed run when nothing else is there; refuses its partial snapshot", async () => {
    const dir = fresh();
    mkdirSync(dir);
    writeFileSync(join(dir, LOCK_FILE), `${await deadPid()} 1\n`);
    claimOutFolder(dir).release();
    assert.deepEqual(readdirSync(dir), []);
    // the pid is alive (ours) but its start time differs: the pid was reused, the lock is stale
    writeFileSync(join(dir, LOCK_FILE), `${process.pid} 1\n`);
    claimOutFolder(dir).release();
    writeFileSync(join(dir, LOCK_FILE), `${await deadPid()} 1\n`);
    mkdirSync(join(dir, "cluster"));
    assert.match(
      refusal(() => claimOutFolder(dir)).message,
      /is not empty \(a run that was killed left it\)/,
    );
  });
});

describe("writeBeneath", () => {
  it("refuses paths that leave the folder and never overwrites", () => {
    const dir = fresh();
    claimOutFolder(dir);
    for (const rel of ["../x", "/etc/passwd", "a/../../x", "a//b", "./a"]) {
      assert.equal(refusal(() => writeBeneath(dir, rel, "x")).code, "ERR_OUT_UNSAFE", rel);
    }
    writeBeneath(dir, "nodes/n1/sysctl.txt", "a");
    assert.match(
      refusal(() => writeBeneath(dir, "nodes/n1/sysctl.txt", "b")).message,
      /already exists/,
    );
    assert.equal(readFileSync(join(dir, "nodes/n1/sysctl.txt"), "utf8"), "a");
  });

  it("never writes through a link planted by a helper process while it writes", async () => {
    const dir = fresh();
    const outside = fresh();
    mkdirSync(outside);
    writeFileSync(join(outside, "victim"), "untouched");
    claimOutFolder(dir);
    // the helper plants links where folders and files will be, and swaps folders for links
    const helper: ChildProcess = spawn(
      process.execPath,
      [
        "-e",
        `const fs = require("fs"), path = require("path");
         const [dir, outside] = process.argv.slice(1);
         let planted = 0;
         let ticks = 0;
         process.stdin.on("close", () => { console.log(planted); process.exit(0); });
         process.stdin.resume();
         setInterval(() => {
           ticks++;
           for (let k = 0; k < 8; k++) {
             const sub = path.join(dir, "nodes", "n" + k);
             // swap the folder (or link) aside under one of four names, so the folder stays small
             const aside = sub + ".moved" + (ticks % 4);
             try { fs.rmSync(aside, { recursive: true, force: true }); } catch {}
             try { fs.renameSync(sub, aside); } catch {}
             try { fs.symlinkSync(outside, sub); planted++; } catch {}
             try { fs.symlinkSync(path.join(outside, "victim"), path.join(sub, "f.txt")); planted++; } catch {}
             try { fs.symlinkSync(path.join(outside, "victim"), path.join(dir, "top" + k + ".txt")); planted++; } catch {}
           }
           process.stdout.write("");
           if (!fs.existsSync(path.join(dir, ".ready"))) fs.writeFileSync(path.join(dir, ".ready"), "");
         }, 0);`,
        dir,
        outside,
      ],
      { stdio: ["pipe", "pipe", "inherit"] },
    );
    let said = "";
    helper.stdout?.on("data", (d) => {
      said += d;
    });
    // wait for the helper to be at work (a condition, not a time)
    while (!existsSync(join(dir, ".ready"))) await new Promise((r) => setImmediate(r));
    let written = 0;
    let refused = 0;
    for (let i = 0; i < 20_000 && (refused < 20 || written < 20); i++) {
      const k = i % 8;
      const rel =
        i % 3 === 0 ? `top${k}.txt` : `nodes/n${k}/${i % 2 === 0 ? "f.txt" : `g${i}.txt`}`;
      try {
        writeBeneath(dir, rel, `written ${i}\n`);
        written++;
      } catch (e) {
        assert.ok(e instanceof OutFolderError, String(e));
        assert.equal(e.code, "ERR_OUT_UNSAFE");
        refused++;
      }
      if (i % 64 === 0) await new Promise((r) => setImmediate(r));
    }
    const exited = new Promise((r) =>
      helper.exitCode !== null || helper.signalCode !== null
        ? r(undefined)
        : helper.once("exit", r),
    );
    helper.stdin?.end();
    await exited;
    assert.ok(Number(said) > 0, "the helper planted links");
    assert.ok(refused >= 20 && written >= 20, `refused ${refused}, written ${written}`);
    // the helper's own links may land outside (through its links); no file of podpath's does
    const regular = readdirSync(outside).filter(
      (n) => !lstatSync(join(outside, n)).isSymbolicLink(),
    );
    assert.deepEqual(regular, ["victim"]);
    assert.equal(readFileSync(join(outside, "victim"), "utf8"), "untouched");
  });
});
