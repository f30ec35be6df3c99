/**
 * @module test/e2e/bad-input — every command that reads files, driven through the built CLI
 * (`node dist/cli/main.js`) with input a user can really hand it: a missing path, a folder where a
 * file belongs and a file where a folder belongs, an empty file, random bytes, truncated real
 * inputs (the embedded example, the VPN lab snapshot and reader fixtures), a line of several MB,
 * YAML with a syntax error, half an `iptables-save` dump, a pcap cut inside a record and a
 * `.tar.gz` cut in half; then seeded random damage of the example snapshot's files.
 *
 * The contract checked on every run: the documented exit code (2 for unreadable input; 0 or 1
 * when an answer was produced), no stack trace and no internal error on stderr, the message names
 * the file (and its line or byte offset where the input has one), stdout still carries the
 * partial answer, and the run ends within its timeout (a hang fails the test). Needs
 * `npm run build` first (npm test does it).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, describe, it } from "node:test";
import { gzipSync } from "node:zlib";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const EXAMPLE = join(ROOT, "examples/snat-exception-list");
const FIXED = join(ROOT, "examples/snat-exception-list-allowlisted");
const VPN_LAB = join(ROOT, "src/cases/vpn/testdata/vpn-lab/baseline-ns");
const VPN_POD = "vpn/vpn-openvpn-6d9c7b5f4-x2x7k";
const PCAP = join(EXAMPLE, "captures/node-gke-lab-default-0.pcap");
const TCPDUMP_TEXT = join(ROOT, "src/capture/fixtures/captured/any-sll2.out");
const PCAPNG = join(ROOT, "src/capture/fixtures/tcpdump/dhcp-option-108.pcapng");
const CONFIGMAP = join(EXAMPLE, "cluster/ip-masq-agent.yaml");
const MANIFEST = join(
  ROOT,
  "src/agents/pod-security/fixtures/openvpn/openvpn-pod-sysctl-variant.yaml",
);
const IPTABLES = "nodes/gke-lab-default-0/iptables-save.txt";

/** Every run is bounded: a hang is a failure (spawnSync kills it and reports ETIMEDOUT). */
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

/** No stack trace, no internal error, and the exit code is one of `codes`. */
function assertClean(r: Run, codes: readonly number[]): void {
  const what = `podpath ${r.args.join(" ")}`;
  assert.doesNotMatch(r.stderr, /\n\s+at /, `${what}: stack trace on stderr:\n${r.stderr}`);
  assert.doesNotMatch(r.stderr, /internal error/i, `${what}: ${r.stderr}`);
  assert.doesNotMatch(r.stdout, /\n\s+at .+:\d+:\d+/, `${what}: stack trace on stdout`);
  assert.ok(
    r.code !== null && codes.includes(r.code),
    `${what}: exit ${r.code}, expected ${codes.join(" or ")}\nstderr: ${r.stderr.slice(0, 2000)}`,
  );
}

/** Unreadable input: exit 2, a message naming `name`, nothing on stdout. */
function assertUnreadable(r: Run, name: string, where?: RegExp): void {
  assertClean(r, [2]);
  assert.ok(r.stderr.includes(name), `stderr does not name ${name}:\n${r.stderr}`);
  if (where) assert.match(r.stderr, where);
}

const tmp = mkdtempSync(join(tmpdir(), "pp-e2e-bad-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** Deterministic bytes: mulberry32, so a failing run can be repeated from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomBytes(n: number, seed: number): Buffer {
  const next = prng(seed);
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(next() * 256);
  b[3] = 0; // binary for certain: a NUL within the first bytes
  return b;
}

/** The first half of a file's bytes. */
function half(path: string): Buffer {
  const b = readFileSync(path);
  return b.subarray(0, Math.floor(b.length / 2));
}

function write(name: string, data: string | Uint8Array): string {
  const p = join(tmp, name);
  mkdirSync(join(p, ".."), { recursive: true });
  writeFileSync(p, data);
  return p;
}

/** A copy of `snapshot` with `rel` replaced by `data` (a folder: `rel` becomes a folder). */
function damaged(snapshot: string, name: string, rel: string, data: Uint8Array | "folder"): string {
  const dir = join(tmp, name);
  rmSync(dir, { recursive: true, force: true });
  cpSync(snapshot, dir, { recursive: true });
  rmSync(join(dir, rel), { recursive: true, force: true });
  if (data === "folder") {
    mkdirSync(join(dir, rel), { recursive: true });
    writeFileSync(join(dir, rel, "stray.txt"), "not a dump\n");
  } else writeFileSync(join(dir, rel), data);
  return dir;
}

function filesOf(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name !== "README.md")
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

// --- the inputs --------------------------------------------------------------------------------

const MISSING = join(tmp, "does-not-exist");
const EMPTY_DIR = join(tmp, "empty-dir");
mkdirSync(EMPTY_DIR);
const EMPTY = write("empty.yaml", "");
const RANDOM = write("random.bin", randomBytes(64 * 1024, 7));
const HUGE_LINE = write("huge-line.txt", `${"A".repeat(3 * 1024 * 1024)}\n`);
const YAML_ERROR = write(
  "syntax-error.yaml",
  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ip-masq-agent\n  namespace: kube-system\ndata:\n  config: |\n    nonMasqueradeCIDRs: [10.0.0.0/8\n  oops: : : x\n   - y\n",
);
const CONFIG_YAML_ERROR = write(
  "agent-config-error.yaml",
  "nonMasqueradeCIDRs: [10.0.0.0/8\nmasqLinkLocal: true\n",
);
const HALF_IPTABLES = write("half-iptables-save.txt", half(join(EXAMPLE, IPTABLES)));
const PCAP_BYTES = readFileSync(PCAP);
// pcap: 24-byte file header, then records of a 16-byte header and the packet bytes; cut 7 bytes
// before the end, so the last record's packet is short.
const CUT_PCAP = write("cut.pcap", PCAP_BYTES.subarray(0, PCAP_BYTES.length - 7));
const PCAPNG_BYTES = readFileSync(PCAPNG);
const CUT_PCAPNG = write("cut.pcapng", PCAPNG_BYTES.subarray(0, PCAPNG_BYTES.length - 7));
const HALF_TEXT_CAPTURE = write("half-capture.txt", half(TCPDUMP_TEXT));
const HALF_CONFIGMAP = write("half-configmap.yaml", half(CONFIGMAP));
const HALF_MANIFEST = write("half-manifest.yaml", half(MANIFEST));

/** A gzipped tar of the example, written with tar itself so the archive is a real one. */
function tarGz(dir: string, name: string): string {
  const out = join(tmp, name);
  const r = spawnSync("tar", ["-czf", out, "-C", dir, "."], { timeout: TIMEOUT_MS });
  assert.equal(r.status, 0, String(r.stderr));
  return out;
}
const FULL_TGZ = tarGz(EXAMPLE, "example.tar.gz");
const HALF_TGZ = write("half.tar.gz", half(FULL_TGZ));
/** 100 bytes of gzip: the stream stops inside the first tar header. */
const EARLY_CUT_TGZ = write("early-cut.tar.gz", readFileSync(FULL_TGZ).subarray(0, 100));
const GZ_OF_NOTHING = write("not-a-tar.tar.gz", gzipSync(Buffer.from("hello\n")));

// --- commands that read a snapshot -------------------------------------------------------------

interface SnapshotCommand {
  readonly name: string;
  readonly snapshot: string;
  /** The command line for a snapshot path. */
  readonly argv: (snap: string) => string[];
  /** The exit codes an answer may have (0 or 1; plan may also refuse with 2, naming why). */
  readonly answered: readonly number[];
}

const SNAPSHOT_COMMANDS: readonly SnapshotCommand[] = [
  {
    name: "diagnose",
    snapshot: EXAMPLE,
    argv: (s) => ["diagnose", s, "-o", "json"],
    answered: [0, 1],
  },
  {
    name: "plan masquerade",
    snapshot: EXAMPLE,
    argv: (s) => ["plan", "masquerade", s],
    answered: [0, 1],
  },
  {
    name: "plan vpn",
    snapshot: VPN_LAB,
    argv: (s) => ["plan", "vpn", s, "--pod", VPN_POD],
    answered: [0, 1],
  },
  {
    name: "verify (before damaged)",
    snapshot: EXAMPLE,
    argv: (s) => ["verify", s, FIXED, "-o", "json"],
    answered: [0, 1],
  },
  {
    name: "verify (after damaged)",
    snapshot: FIXED,
    argv: (s) => ["verify", EXAMPLE, s, "-o", "json"],
    answered: [0, 1],
  },
];

for (const cmd of SNAPSHOT_COMMANDS) {
  describe(`podpath ${cmd.name}: unreadable snapshots exit 2 naming the path`, () => {
    it("a missing path", () => {
      assertUnreadable(podpath(...cmd.argv(MISSING)), MISSING, /no such file/);
    });
    it("an empty folder", () => {
      assertUnreadable(podpath(...cmd.argv(EMPTY_DIR)), EMPTY_DIR);
    });
    it("a file where the snapshot folder belongs (empty, random bytes, one huge line)", () => {
      for (const f of [EMPTY, RANDOM, HUGE_LINE]) {
        assertUnreadable(podpath(...cmd.argv(f)), f, /expected a folder/);
      }
    });
    it("a .tar.gz that holds no tar", () => {
      const r = podpath(...cmd.argv(GZ_OF_NOTHING));
      assertUnreadable(r, GZ_OF_NOTHING);
    });
  });
}

describe("podpath diagnose: a .tar.gz snapshot", () => {
  const whole = podpath("diagnose", FULL_TGZ, "-o", "json");
  const folder = podpath("diagnose", EXAMPLE, "-o", "json");

  it("whole, it answers as the folder does", () => {
    assertClean(whole, [1]);
    const ids = (s: string) =>
      (JSON.parse(s) as { findings: { id: string }[] }).findings.map((f) => f.id);
    assert.deepEqual(ids(whole.stdout), ids(folder.stdout));
  });

  it("cut in half: the damage is named with its byte offset, and the files before it are used", () => {
    const r = podpath("diagnose", HALF_TGZ, "-o", "json");
    assertClean(r, [0, 1]);
    const json = JSON.parse(r.stdout) as {
      diagnostics: { message: string; severity: string }[];
      findings: unknown[];
    };
    const damage = json.diagnostics.filter((d) => d.message.includes(HALF_TGZ));
    assert.ok(damage.length > 0, JSON.stringify(json.diagnostics));
    assert.ok(damage.some((d) => /byte \d+|gzip/.test(d.message)));
    assert.ok(damage.some((d) => d.severity === "error"));
  });

  it("cut inside its first file: nothing to read, exit 2 with the reason and byte offset", () => {
    for (const argv of [
      ["diagnose", EARLY_CUT_TGZ],
      ["plan", "masquerade", EARLY_CUT_TGZ],
      ["verify", EXAMPLE, EARLY_CUT_TGZ],
      ["plan", "vpn", EARLY_CUT_TGZ, "--pod", VPN_POD],
    ]) {
      const r = podpath(...argv);
      assertUnreadable(r, EARLY_CUT_TGZ, /byte \d+: the gzip stream is damaged/);
    }
  });

  it("cut in half, for every snapshot command: no stack, no hang, the archive named", () => {
    for (const argv of [
      ["plan", "masquerade", HALF_TGZ],
      ["verify", HALF_TGZ, FIXED],
      ["plan", "vpn", HALF_TGZ, "--pod", VPN_POD],
    ]) {
      const r = podpath(...argv);
      assertClean(r, [0, 1, 2]);
      assert.ok(`${r.stderr}${r.stdout}`.includes(HALF_TGZ), r.stderr);
    }
  });
});

// One damaged file inside an otherwise good snapshot: the command still answers (exit 0 or 1),
// and the damage is reported naming the file.
interface Damage {
  readonly name: string;
  readonly make: (orig: Buffer, rel: string) => Uint8Array;
  /** Whether a reader must name the file: a cut or empty file can be valid (sysctl, probes). */
  readonly noticed: boolean;
}
const DAMAGES: readonly Damage[] = [
  {
    name: "truncated to half",
    make: (b) => b.subarray(0, Math.floor(b.length / 2)),
    noticed: false,
  },
  { name: "empty", make: () => new Uint8Array(0), noticed: false },
  { name: "random bytes", make: (_b, rel) => randomBytes(4096, rel.length), noticed: true },
  {
    name: "a 3 MB line appended",
    make: (b) => Buffer.concat([b, Buffer.from(`${"x".repeat(3 * 1024 * 1024)}\n`)]),
    // a probe transcript is free text after each command: an extra output line is no error
    noticed: true,
  },
];

/** The destination the example is about, so damage to remote/ does not change the question. */
const DEST = "10.20.30.40:5432";
/**
 * The pod and node objects and the node's nat rules: every path finding rests on them (who
 * sends, and with which source address), cited or not.
 */
const ENDPOINT_FILES = new Set(["cluster/pods.yaml", "cluster/nodes.yaml", IPTABLES]);

interface AnswerJson {
  findings: { id: string; evidence: { file: string }[] }[];
  diagnostics: { message: string; source?: { file: string; line: number } }[];
}

describe("podpath diagnose: one damaged file, the rest still answers", () => {
  const base = JSON.parse(
    podpath("diagnose", EXAMPLE, "--dest", DEST, "-o", "json").stdout,
  ) as AnswerJson;
  for (const rel of filesOf(EXAMPLE)) {
    for (const damage of DAMAGES) {
      it(`${rel}: ${damage.name}`, () => {
        const tag = `${rel}-${damage.name}`.replace(/[^a-z0-9]+/gi, "-");
        const snap = damaged(
          EXAMPLE,
          `d-${tag}`,
          rel,
          damage.make(readFileSync(join(EXAMPLE, rel)), rel),
        );
        const r = podpath("diagnose", snap, "--dest", DEST, "-o", "json");
        assertClean(r, [0, 1]);
        const json = JSON.parse(r.stdout) as AnswerJson;
        if (damage.noticed && !(damage.name.includes("line") && rel.startsWith("probes/"))) {
          const named = json.diagnostics.filter(
            (d) => d.source?.file === rel || d.message.includes(rel),
          );
          assert.ok(
            named.length > 0,
            `no diagnostic names ${rel}: ${JSON.stringify(json.diagnostics)}`,
          );
        }
        // Findings whose evidence lies entirely in other files stay: the rest still supports them.
        if (ENDPOINT_FILES.has(rel)) return;
        const kept = new Set(json.findings.map((f) => f.id));
        for (const f of base.findings) {
          if (f.evidence.some((e) => e.file === rel)) continue;
          if (f.evidence.length === 0) continue;
          assert.ok(
            kept.has(f.id),
            `${f.id} (evidence: ${f.evidence.map((e) => e.file).join(", ")}) lost when ${rel} is ${damage.name}; now: ${[...kept].join(", ")}`,
          );
        }
      });
    }
  }

  it("a folder where iptables-save.txt belongs: the other findings stay", () => {
    const snap = damaged(EXAMPLE, "d-folder", IPTABLES, "folder");
    const r = podpath("diagnose", snap, "-o", "json");
    assertClean(r, [0, 1]);
    const ids = (JSON.parse(r.stdout) as AnswerJson).findings.map((f) => f.id);
    assert.ok(ids.includes("masq/wire-pod-source"), ids.join(", "));
  });

  it("a file where the cluster/ folder belongs: still an answer from the rest", () => {
    const snap = damaged(EXAMPLE, "d-cluster-file", "cluster", readFileSync(CONFIGMAP));
    const r = podpath("diagnose", snap, "-o", "json");
    assertClean(r, [0, 1]);
    assert.ok((JSON.parse(r.stdout) as AnswerJson).findings.length > 0);
  });

  it("half an iptables-save dump: the cut is named with its line", () => {
    const snap = damaged(EXAMPLE, "d-half-ipt", IPTABLES, readFileSync(HALF_IPTABLES));
    const r = podpath("diagnose", snap, "-o", "json");
    assertClean(r, [0, 1]);
    const json = JSON.parse(r.stdout) as AnswerJson;
    const cut = json.diagnostics.find(
      (d) => d.source?.file === IPTABLES && /COMMIT|truncated/.test(d.message),
    );
    assert.ok(cut, JSON.stringify(json.diagnostics));
    assert.ok((cut.source?.line ?? 0) > 0);
    // the wire evidence does not depend on the dump
    assert.ok(json.findings.some((f) => f.id === "masq/wire-pod-source"));
    // and the cut dump does not decide the source: the rules that would rewrite it may be missing
    assert.ok(!json.findings.some((f) => f.id === "masq/exempt-destination"));
    // nor is the cut taken for drift between the ConfigMap and the rules
    assert.ok(!json.findings.some((f) => f.id === "masq/intent-rules-drift"));
    const pod = (JSON.parse(r.stdout) as { paths: { from: string; verdict: string }[] }).paths.find(
      (p) => p.from.startsWith("pod/"),
    );
    assert.match(pod?.verdict ?? "", /not decided .*cut short/);
  });

  it("YAML with a syntax error in cluster/: named with its line, the rest answers", () => {
    const snap = damaged(EXAMPLE, "d-yaml", "cluster/ip-masq-agent.yaml", readFileSync(YAML_ERROR));
    const r = podpath("diagnose", snap, "-o", "json");
    assertClean(r, [0, 1]);
    const json = JSON.parse(r.stdout) as AnswerJson;
    const d = json.diagnostics.find((x) => x.source?.file === "cluster/ip-masq-agent.yaml");
    assert.ok(d, JSON.stringify(json.diagnostics));
    assert.equal(d.source?.line, 9);
    assert.ok(json.findings.some((f) => f.id === "masq/wire-pod-source"));
  });

  it("text output (the default) carries the reading problems too", () => {
    const snap = damaged(
      EXAMPLE,
      "d-yaml-text",
      "cluster/ip-masq-agent.yaml",
      readFileSync(YAML_ERROR),
    );
    const r = podpath("diagnose", snap);
    assertClean(r, [0, 1]);
    assert.match(r.stdout, /cluster\/ip-masq-agent\.yaml:9:/);
  });
});

describe("plan masquerade, plan vpn and verify: one damaged file", () => {
  for (const cmd of SNAPSHOT_COMMANDS.filter((c) => c.name !== "diagnose")) {
    for (const rel of filesOf(cmd.snapshot)) {
      it(`${cmd.name}: ${rel} truncated, random, or given a huge line`, () => {
        for (const damage of DAMAGES.filter((d) => d.name !== "empty")) {
          const orig = readFileSync(join(cmd.snapshot, rel));
          const tag = `${cmd.name}-${rel}-${damage.name}`.replace(/[^a-z0-9]+/gi, "-");
          const snap = damaged(cmd.snapshot, `p-${tag}`, rel, damage.make(orig, rel));
          const r = podpath(...cmd.argv(snap));
          // a plan may refuse when its input is gone (exit 2), but then it must say which file
          assertClean(r, [...cmd.answered, 2]);
          if (r.code === 2) {
            assert.ok(
              r.stderr.includes(rel) || r.stderr.includes(snap),
              `${cmd.name} refused without naming ${rel}: ${r.stderr}`,
            );
          } else assert.ok(r.stdout.length > 0, `${cmd.name}: no answer on stdout`);
        }
      });
    }
  }
});

// --- commands that read one file ---------------------------------------------------------------

describe("podpath capture read / capture flows", () => {
  for (const sub of ["read", "flows"] as const) {
    it(`${sub}: a missing path, a folder: exit 2 naming it`, () => {
      assertUnreadable(podpath("capture", sub, MISSING), MISSING, /no such file/);
      assertUnreadable(podpath("capture", sub, EMPTY_DIR), EMPTY_DIR, /not a regular file/);
    });

    it(`${sub}: random binary bytes: exit 2, the byte offset and what was expected`, () => {
      const r = podpath("capture", sub, RANDOM);
      assertUnreadable(r, RANDOM, /byte offset 0/);
      assert.match(r.stderr, /pcap|pcapng/);
    });

    it(`${sub}: a .tar.gz is not a capture: exit 2`, () => {
      assertUnreadable(podpath("capture", sub, HALF_TGZ), HALF_TGZ, /byte offset 0/);
    });

    it(`${sub}: a pcap cut mid-record: exit 2, the record's byte offset, every packet before it`, () => {
      const r = podpath(
        "capture",
        sub,
        CUT_PCAP,
        ...(sub === "read" ? ["-o", "jsonl"] : ["-o", "json"]),
      );
      assertUnreadable(r, CUT_PCAP, /byte offset \d+/);
      const whole = podpath("capture", "read", PCAP, "-o", "jsonl");
      const wholeCount = whole.stdout.trim().split("\n").length;
      if (sub === "read") {
        // every complete record is still printed: all but the cut one
        assert.equal(r.stdout.trim().split("\n").length, wholeCount - 1);
      } else {
        assert.equal((JSON.parse(r.stdout) as { packets: number }).packets, wholeCount - 1);
      }
    });

    it(`${sub}: a pcapng cut inside its last block: the damage named with its offset, packets before it kept`, () => {
      const r = podpath("capture", sub, CUT_PCAPNG);
      assertClean(r, [2]);
      assert.ok(r.stderr.includes(CUT_PCAPNG));
      assert.match(r.stderr, /byte offset \d+|offset \d+/);
      assert.ok(r.stdout.length > 0);
    });

    it(`${sub}: tcpdump text cut in half: exit 0, the packets read`, () => {
      const r = podpath("capture", sub, HALF_TEXT_CAPTURE);
      assertClean(r, [0, 2]);
      assert.ok(r.stdout.length > 0);
    });

    it(`${sub}: a 3 MB line of text: exit 2, file:line named, the message stays short`, () => {
      const r = podpath("capture", sub, HUGE_LINE);
      assertClean(r, [2]);
      assert.ok(r.stderr.includes(`${HUGE_LINE}:1`), r.stderr.slice(0, 500));
      // the warning quotes a short excerpt, not the 3 MB
      assert.ok(r.stderr.length < 10_000, `stderr is ${r.stderr.length} bytes`);
    });

    it(`${sub}: an empty file is an empty capture (tcpdump prints nothing when nothing passed)`, () => {
      const r = podpath("capture", sub, EMPTY);
      assertClean(r, [0]);
      assert.doesNotMatch(r.stderr, /empty file; expected `point:`/);
    });

    it(`${sub}: text that is not tcpdump output (YAML, base64): exit 2, file:line named`, () => {
      const base64 = write(
        "junk.txt",
        `${randomBytes(200_000, 11).toString("base64")}\n`.replace(/(.{76})/g, "$1\n"),
      );
      for (const f of [YAML_ERROR, base64]) {
        const r = podpath("capture", sub, f);
        assertUnreadable(r, `${f}:1`, /none of its \d+ lines is tcpdump output/);
        // one warning per line would flood the terminal: they are capped
        assert.ok(r.stderr.split("\n").length < 100, `${r.stderr.split("\n").length} lines`);
      }
    });
  }
});

describe("podpath ipmasq config / rules", () => {
  for (const sub of ["config", "rules"] as const) {
    it(`${sub}: a missing path, a folder: exit 2 naming it`, () => {
      assertUnreadable(podpath("ipmasq", sub, MISSING), MISSING, /no such file/);
      assertUnreadable(podpath("ipmasq", sub, EMPTY_DIR), EMPTY_DIR, /is a directory/);
    });

    it(`${sub}: random bytes, one huge line, a config with a YAML error: the agent's error, file:line, exit 2`, () => {
      for (const f of [RANDOM, HUGE_LINE, CONFIG_YAML_ERROR]) {
        const r = podpath("ipmasq", sub, f);
        assertUnreadable(r, f, new RegExp(`${f.replace(/[.]/g, "\\.")}:\\d+: the agent rejects`));
        assert.ok(r.stderr.length < 200_000, `stderr is ${r.stderr.length} bytes`);
      }
    });

    it(`${sub}: a ConfigMap whose YAML is broken is unreadable (exit 2, file:line), not the defaults`, () => {
      const r = podpath("ipmasq", sub, YAML_ERROR);
      assertUnreadable(r, YAML_ERROR, new RegExp(`${YAML_ERROR.replace(/[.]/g, "\\.")}:9:`));
      assert.equal(r.stdout, "");
    });

    it(`${sub}: a ConfigMap list cut in half is unreadable, not the defaults`, () => {
      const r = podpath("ipmasq", sub, HALF_CONFIGMAP);
      assertUnreadable(r, HALF_CONFIGMAP, /:\d+:/);
    });

    it(`${sub}: --daemonset with random bytes, YAML errors or a folder: exit 2 naming it`, () => {
      for (const ds of [RANDOM, YAML_ERROR, HUGE_LINE, EMPTY_DIR, MISSING]) {
        const r = podpath("ipmasq", sub, CONFIGMAP, "--daemonset", ds);
        assertUnreadable(r, ds);
        assert.equal(r.stdout, "");
      }
    });

    it(`${sub}: an empty file is the agent's empty config (its defaults), exit 0`, () => {
      const r = podpath("ipmasq", sub, EMPTY);
      assertClean(r, [0]);
      assert.ok(r.stdout.length > 0);
    });

    it(`${sub}: a .tar.gz is not a config: exit 2 naming it`, () => {
      assertUnreadable(podpath("ipmasq", sub, HALF_TGZ), HALF_TGZ);
    });
  }
});

describe("podpath admission check", () => {
  it("a missing path: exit 2 naming it", () => {
    assertUnreadable(podpath("admission", "check", MISSING), MISSING, /no such file/);
  });
  it("an empty folder, an empty file: exit 2 naming them", () => {
    assertUnreadable(podpath("admission", "check", EMPTY_DIR), EMPTY_DIR);
    assertUnreadable(podpath("admission", "check", EMPTY), EMPTY);
  });
  it("random bytes, a huge line, YAML with a syntax error, a .tar.gz: exit 2 with file:line", () => {
    for (const f of [RANDOM, HUGE_LINE, YAML_ERROR, HALF_TGZ]) {
      const r = podpath("admission", "check", f);
      assertUnreadable(r, f);
      assert.ok(r.stderr.length < 200_000, `stderr is ${r.stderr.length} bytes`);
    }
    assert.match(podpath("admission", "check", YAML_ERROR).stderr, /syntax-error\.yaml:9:/);
  });
  it("a manifest cut in half: the pod that remains is still judged (exit 0 or 1)", () => {
    const r = podpath("admission", "check", HALF_MANIFEST);
    assertClean(r, [0, 1]);
    assert.match(r.stdout, /half-manifest\.yaml:\d+/);
  });
  it("a folder holding one good and one broken manifest: the good one is judged", () => {
    const dir = join(tmp, "manifests");
    mkdirSync(dir, { recursive: true });
    cpSync(MANIFEST, join(dir, "good.yaml"));
    cpSync(YAML_ERROR, join(dir, "broken.yaml"));
    const r = podpath("admission", "check", dir);
    assertClean(r, [0, 1, 2]);
    assert.match(r.stdout, /good\.yaml:\d+/);
    assert.match(r.stderr, /broken\.yaml:9:/);
  });
});

// --- options -----------------------------------------------------------------------------------

describe("bad options exit 2 with one line, no stack, nothing on stdout", () => {
  const cases: readonly (readonly string[])[] = [
    ["diagnose", EXAMPLE, "--dest", "1.2.3"],
    ["diagnose", EXAMPLE, "--from", "pods/x"],
    ["diagnose", EXAMPLE, "-o", "xml"],
    ["diagnose", EXAMPLE, "--no-such-option"],
    ["plan", "masquerade", EXAMPLE, "--strategy", "x"],
    ["plan", "masquerade", EXAMPLE, "--dest", "1.2.3"],
    ["plan", "masquerade", EXAMPLE, "--pod-range", "10.0.0/8"],
    ["plan", "masquerade", EXAMPLE, "-o", "xml"],
    ["plan", "vpn", VPN_LAB, "--pod", VPN_POD, "--strategy", "x"],
    ["plan", "vpn", EXAMPLE], // no VPN pod there: --pod is needed
    ["plan", "vpn", VPN_LAB, "--write", ROOT], // --write refuses a folder that is not empty
    ["verify", EXAMPLE, FIXED, "--dest", "1.2.3"],
    ["verify", EXAMPLE, FIXED, "-o", "xml"],
    ["verify", EXAMPLE],
    ["capture", "read", PCAP, "-o", "xml"],
    ["capture", "flows", PCAP, "--host", "1.2.3"],
    ["capture", "flows", PCAP, "--talkers"],
    ["ipmasq", "rules", CONFIGMAP, "--family", "5"],
    ["ipmasq", "config", CONFIGMAP, "-o", "xml"],
    ["admission", "check", MANIFEST, "--level", "foo"],
    ["admission", "check", MANIFEST, "--version", "vx"],
    ["no-such-command"],
  ];
  for (const argv of cases) {
    it(argv.map((a) => a.replace(ROOT, ".")).join(" "), () => {
      const r = podpath(...argv);
      assertClean(r, [2]);
      assert.equal(r.stdout, "");
      // commander adds its "(add --help for usage)" hint; the error itself is one line
      const lines = r.stderr.split("\n").filter((l) => l !== "" && !/add --help/.test(l));
      assert.equal(lines.length, 1, r.stderr);
    });
  }
});

// --- seeded random damage ----------------------------------------------------------------------

describe("seeded random damage of the example snapshot", () => {
  const files = filesOf(EXAMPLE);
  const RUNS = 36;
  const SEED = Number(process.env["PODPATH_FUZZ_SEED"] ?? 20261129);
  /** One to three edits of one file: cut, flip bytes, insert junk, duplicate or drop a slice. */
  function mutate(orig: Buffer, next: () => number): Buffer {
    let b = Buffer.from(orig);
    const edits = 1 + Math.floor(next() * 3);
    for (let e = 0; e < edits; e++) {
      const at = Math.floor(next() * (b.length + 1));
      const len = 1 + Math.floor(next() * 64);
      switch (Math.floor(next() * 5)) {
        case 0:
          b = b.subarray(0, at);
          break;
        case 1:
          for (let i = 0; i < len && at + i < b.length; i++) b[at + i] = Math.floor(next() * 256);
          break;
        case 2: {
          const junk = Buffer.alloc(len);
          for (let i = 0; i < len; i++) junk[i] = Math.floor(next() * 256);
          b = Buffer.concat([b.subarray(0, at), junk, b.subarray(at)]);
          break;
        }
        case 3:
          b = Buffer.concat([b.subarray(0, at + len), b.subarray(at)]);
          break;
        default:
          b = Buffer.concat([b.subarray(0, at), b.subarray(at + len)]);
      }
    }
    return b;
  }

  it(`${RUNS} runs (seed ${SEED}): every command answers or refuses cleanly, never hangs`, () => {
    const next = prng(SEED);
    for (let run = 0; run < RUNS; run++) {
      const rel = files[Math.floor(next() * files.length)]!;
      const snap = damaged(EXAMPLE, "fuzz", rel, mutate(readFileSync(join(EXAMPLE, rel)), next));
      const which = run % 3;
      const argv =
        which === 0
          ? ["diagnose", snap, "-o", "json"]
          : which === 1
            ? ["plan", "masquerade", snap, "-o", "json"]
            : ["verify", snap, FIXED, "-o", "json"];
      const r = podpath(...argv);
      const ctx = `run ${run} (seed ${SEED}), ${rel}: ${argv[0]}`;
      assertClean(r, [0, 1, 2]);
      if (r.code === 2) {
        assert.ok(r.stderr.length > 0, `${ctx}: exit 2 without a message`);
        assert.equal(r.stdout, "", `${ctx}: exit 2 with an answer on stdout`);
      } else {
        assert.doesNotThrow(() => JSON.parse(r.stdout), `${ctx}: stdout is not JSON`);
      }
      // the same damaged file through the command that reads that kind of file on its own
      const file = join(snap, rel);
      const single = rel.endsWith(".pcap")
        ? [["capture", "flows", file, "-o", "json"]]
        : rel.startsWith("cluster/")
          ? [
              ["ipmasq", "rules", file],
              ["admission", "check", file],
            ]
          : [];
      for (const argv of single) assertClean(podpath(...argv), [0, 1, 2]);
    }
  });
});
