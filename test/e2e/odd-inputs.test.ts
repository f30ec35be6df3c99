/**
 * @module test/e2e/odd-inputs — the built CLI (`node dist/cli/main.js`) handed files as Windows and
 * unlucky users hand them: text saved by PowerShell's `>` (UTF-16 with a byte-order mark), UTF-8
 * with a byte-order mark, FIFOs, sockets and devices where a file belongs, a directory where a
 * file belongs, a name too long, a path through a file, a sparse file over 2 GiB. The contract: an
 * encoded file is read as its UTF-8 twin is (the same findings); a special file is refused without
 * being opened for reading (no hang: every run has a timeout, and a timeout fails); a path that
 * cannot be read exits 2 with one line naming it, never an internal error (exit 70) or a stack.
 * Needs `npm run build` first (npm test does it).
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const EXAMPLE = join(ROOT, "examples/snat-exception-list");
const IPTABLES = "nodes/gke-lab-default-0/iptables-save.txt";
const CONFIGMAP = "cluster/ip-masq-agent.yaml";

/** A hang is a failure: spawnSync kills the run at the timeout and the test says so. */
const TIMEOUT_MS = 30_000;

interface Run {
  readonly args: readonly string[];
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function podpath(...args: string[]): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    timeout: TIMEOUT_MS,
    killSignal: "SIGKILL",
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NO_COLOR: "1" },
  });
  const what = `podpath ${args.join(" ")}`;
  assert.equal(r.error, undefined, `${what}: ${r.error?.message} (a hang or a spawn failure)`);
  assert.equal(r.signal, null, `${what}: killed by ${r.signal}`);
  return { args, code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Exit 2, one clear line naming `name` (and matching `why`), no stack, no internal error. */
function assertRefused(r: Run, name: string, why: RegExp): void {
  const what = `podpath ${r.args.join(" ")}`;
  assert.doesNotMatch(r.stderr, /\n\s+at /, `${what}: stack trace:\n${r.stderr}`);
  assert.doesNotMatch(r.stderr, /internal error/i, `${what}: ${r.stderr}`);
  assert.equal(r.code, 2, `${what}: exit ${r.code}\nstderr: ${r.stderr.slice(0, 2000)}`);
  assert.ok(r.stderr.includes(name), `${what}: stderr does not name ${name}:\n${r.stderr}`);
  assert.match(r.stderr, why, what);
}

const tmp = mkdtempSync(join(tmpdir(), "pp-e2e-odd-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** UTF-16 with its byte-order mark, as PowerShell 5's `>` writes text. */
function utf16(text: string, order: "le" | "be"): Buffer {
  const le = Buffer.from(text, "utf16le");
  if (order === "be") le.swap16();
  return Buffer.concat([Buffer.from(order === "le" ? [0xff, 0xfe] : [0xfe, 0xff]), le]);
}

/** The finding ids and their cited files and lines of a diagnose run, for comparing two runs. */
function findings(r: Run): string[] {
  const doc = JSON.parse(r.stdout) as {
    findings?: { id: string; evidence?: { source?: { file?: string; line?: number } }[] }[];
  };
  return (doc.findings ?? [])
    .map(
      (f) =>
        `${f.id} ${(f.evidence ?? []).map((e) => `${e.source?.file}:${e.source?.line}`).join(",")}`,
    )
    .sort();
}

describe("text saved in another encoding is read as its UTF-8 twin", () => {
  const plain = () => podpath("diagnose", EXAMPLE, "-o", "json");

  for (const [name, encode] of [
    ["UTF-16 LE with BOM (PowerShell >)", (t: string) => utf16(t, "le")],
    ["UTF-16 BE with BOM", (t: string) => utf16(t, "be")],
    [
      "UTF-8 with BOM",
      (t: string) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(t)]),
    ],
  ] as const) {
    it(`${name}: the node's dump and the ConfigMap give the same findings`, () => {
      const snap = mkdtempSync(join(tmp, "enc-"));
      cpSync(EXAMPLE, snap, { recursive: true });
      for (const rel of [IPTABLES, CONFIGMAP]) {
        writeFileSync(join(snap, rel), encode(readFileSync(join(EXAMPLE, rel), "utf8")));
      }
      const want = plain();
      const got = podpath("diagnose", snap, "-o", "json");
      assert.equal(got.code, want.code, got.stderr);
      assert.ok(findings(want).length > 0, "the example has findings to compare");
      assert.deepEqual(findings(got), findings(want));
      assert.doesNotMatch(
        got.stdout,
        /\\ufeff|\\u0000/i,
        "no byte-order mark or NUL reaches output",
      );
    });
  }

  it("ipmasq config reads a UTF-16 ConfigMap as the UTF-8 one", () => {
    const file = join(tmp, "cm-utf16.yaml");
    writeFileSync(file, utf16(readFileSync(join(EXAMPLE, CONFIGMAP), "utf8"), "le"));
    const want = podpath("ipmasq", "config", join(EXAMPLE, CONFIGMAP));
    const got = podpath("ipmasq", "config", file);
    assert.equal(got.code, want.code, got.stderr);
    assert.equal(got.stdout, want.stdout);
  });
});

describe("special files are refused, never opened for reading", () => {
  let fifo = "";
  let sock = "";
  let server: ReturnType<typeof createServer> | undefined;
  before(async () => {
    fifo = join(tmp, "dump.fifo");
    execFileSync("mkfifo", [fifo]);
    sock = join(tmp, "s.sock");
    server = createServer();
    await new Promise<void>((ok) => server?.listen(sock, ok));
  });
  after(() => server?.close());

  const cases = (): [string, string[], string][] => [
    ["ipmasq config FIFO", ["ipmasq", "config", fifo], fifo],
    ["ipmasq rules socket", ["ipmasq", "rules", sock], sock],
    ["ipmasq config /dev/zero", ["ipmasq", "config", "/dev/zero"], "/dev/zero"],
    ["admission check FIFO", ["admission", "check", fifo], fifo],
    ["admission check /dev/zero", ["admission", "check", "/dev/zero"], "/dev/zero"],
    ["capture read FIFO", ["capture", "read", fifo], fifo],
    [
      "lab replay --iptables FIFO",
      ["lab", "replay", "--iptables", fifo, "--flow", "10.4.0.5,8.8.8.8"],
      fifo,
    ],
  ];

  it("a FIFO, a socket or a device named as an input file: exit 2 naming it", () => {
    for (const [, argv, name] of cases()) {
      assertRefused(podpath(...argv), name, /FIFO|socket|device|not a regular file/);
    }
  });

  it("a FIFO named .tar.gz, and a device, given as a snapshot: exit 2 naming it", () => {
    const tgz = join(tmp, "snap.tar.gz");
    execFileSync("mkfifo", [tgz]);
    assertRefused(podpath("diagnose", tgz), tgz, /not a regular file/);
    assertRefused(podpath("diagnose", "/dev/null"), "/dev/null", /not a snapshot/);
  });

  it("a FIFO inside a snapshot folder is skipped; the rest answers", () => {
    const snap = mkdtempSync(join(tmp, "fifo-snap-"));
    cpSync(EXAMPLE, snap, { recursive: true });
    mkdirSync(join(snap, "nodes/n2"), { recursive: true });
    execFileSync("mkfifo", [join(snap, "nodes/n2/iptables-save.txt")]);
    const r = podpath("diagnose", snap, "-o", "json");
    assert.ok(r.code === 0 || r.code === 1, r.stderr);
  });
});

describe("odd paths exit 2 with one line, never an internal error", () => {
  const long = join(tmp, "x".repeat(300), "y");
  const through = join(EXAMPLE, CONFIGMAP, "inside");

  it("a name too long, a path through a file, a directory where a file belongs", () => {
    for (const argv of [
      ["ipmasq", "config"],
      ["ipmasq", "rules"],
      ["admission", "check"],
      ["capture", "read"],
    ]) {
      assertRefused(podpath(...argv, long), "x".repeat(300), /too long|no such file/);
      assertRefused(podpath(...argv, through), through, /not a directory|no such file/);
    }
    assertRefused(podpath("ipmasq", "config", tmp), tmp, /directory/);
    assertRefused(
      podpath("lab", "replay", "--iptables", tmp, "--flow", "10.4.0.5,8.8.8.8"),
      tmp,
      /directory/,
    );
    assertRefused(podpath("diagnose", long), "x".repeat(300), /too long/);
    assertRefused(podpath("diagnose", through), through, /not a directory|no such file/);
  });

  it("a sparse file over 2 GiB: refused by its size at once, not read", () => {
    const big = join(tmp, "big.yaml");
    execFileSync("truncate", ["-s", "2200M", big]);
    for (const argv of [
      ["ipmasq", "config", big],
      ["admission", "check", big],
      ["lab", "replay", "--iptables", big, "--flow", "10.4.0.5,8.8.8.8"],
    ]) {
      assertRefused(podpath(...argv), big, /bytes, over the \d+-byte limit/);
    }
    const tgz = join(tmp, "big.tar.gz");
    execFileSync("truncate", ["-s", "2200M", tgz]);
    assertRefused(podpath("diagnose", tgz), tgz, /archives over \d+ bytes are not read/);
  });
});
