/**
 * End-to-end lifecycle of lab replicas: `lab up` keeps one running until `lab down`; a `lab run`
 * interrupted with SIGINT removes its replica; one killed with SIGKILL leaves it behind, and the
 * next start removes it. The root namespace's fingerprint is the same after each.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { kernelSkip } from "../../src/lab/kernel-guard.ts";
import { createLab } from "../../src/lab/netns.ts";
import { rootNamespaceHash } from "../../src/lab/root-state.ts";

const ROOT = join(import.meta.dirname, "../..");
const ARGV = ["--import", "tsx", join(ROOT, "src/cli/main.ts")];
const base = mkdtempSync(join(tmpdir(), "podpath-lifecycle-"));

function podpath(args: readonly string[]) {
  return spawnSync(process.execPath, [...ARGV, ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 120_000,
  });
}

const namespacesOf = (id: string) => {
  try {
    return readdirSync("/run/netns").filter((n) => n.startsWith(`${id}-`));
  } catch {
    return [];
  }
};

/** Starts `lab run` and resolves with its lab id once its namespaces exist. */
function startRun(out: string): Promise<{ child: ChildProcess; id: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...ARGV, "lab", "run", "masquerade", "--out", out], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    child.stderr.on("data", (d) => {
      err += String(d);
      const id = /replica (\w+)/.exec(err)?.[1];
      if (!id) return;
      const poll = setInterval(() => {
        if (namespacesOf(id).length >= 3) {
          clearInterval(poll);
          resolve({ child, id });
        }
      }, 20);
    });
    child.on("exit", (code) => reject(new Error(`lab run exited ${code} early: ${err}`)));
  });
}

const exited = (c: ChildProcess) =>
  new Promise<number | null>((r) => {
    if (c.exitCode !== null || c.signalCode !== null) r(c.exitCode);
    else c.on("exit", (code) => r(code));
  });

describe("lab replica lifecycle", { skip: kernelSkip() }, () => {
  after(() => rmSync(base, { recursive: true, force: true }));

  it("lab up keeps a replica (surviving other runs' stale cleanup) until lab down", async () => {
    const before = await rootNamespaceHash();
    const up = podpath(["lab", "up", "masquerade", "--pools", "a:agent"]);
    assert.equal(up.status, 0, up.stderr);
    const id = /^lab (\w+) is up/.exec(up.stdout)?.[1];
    assert.ok(id, up.stdout);
    assert.ok(namespacesOf(id).length >= 4);
    // the replica answers: the on-prem listener survived the command's exit
    const ping = spawnSync("ip", [
      "netns",
      "exec",
      `${id}-node0`,
      "ping",
      "-c",
      "1",
      "-W",
      "2",
      "10.20.30.40",
    ]);
    assert.equal(ping.status, 0);
    const other = await createLab();
    await other.destroy();
    assert.ok(namespacesOf(id).length >= 4, "a kept lab was removed as stale");
    const list = podpath(["lab", "down"]);
    assert.equal(list.status, 2);
    assert.match(list.stdout, new RegExp(`^${id}  kept  `, "m"));
    const down = podpath(["lab", "down", id]);
    assert.equal(down.status, 0, down.stderr);
    assert.deepEqual(namespacesOf(id), []);
    assert.equal(podpath(["lab", "down", id]).status, 2);
    assert.equal(await rootNamespaceHash(), before);
  });

  it("without root: a clear message naming the privilege, exit 2, no stack trace", () => {
    const asRoot = process.getuid?.() === 0;
    const r = spawnSync(
      process.execPath,
      [...ARGV, "lab", "run", "masquerade", "--out", join(base, "unprivileged")],
      {
        cwd: ROOT,
        encoding: "utf8",
        timeout: 60_000,
        env: { ...process.env, HOME: tmpdir() },
        ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
      },
    );
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /needs root \(CAP_NET_ADMIN/);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  });

  it("SIGINT during lab run removes the replica", async () => {
    const before = await rootNamespaceHash();
    const { child, id } = await startRun(join(base, "interrupted"));
    child.kill("SIGINT");
    const code = await exited(child);
    assert.notEqual(code, 0);
    assert.deepEqual(namespacesOf(id), []);
    assert.ok(!existsSync(`/run/podpath-lab/${id}.pid`));
    assert.equal(await rootNamespaceHash(), before);
  });

  it("a SIGKILLed lab run leaves its replica, and the next start removes it", async () => {
    const before = await rootNamespaceHash();
    const { child, id } = await startRun(join(base, "killed"));
    child.kill("SIGKILL");
    await exited(child);
    assert.ok(namespacesOf(id).length > 0, "expected leftovers after SIGKILL");
    const lab = await createLab();
    await lab.destroy();
    assert.deepEqual(namespacesOf(id), []);
    assert.equal(await rootNamespaceHash(), before);
  });
});
