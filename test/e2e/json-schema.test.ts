/**
 * End-to-end: every command with `-o json` (capture read: `-o jsonl`) is run through the built CLI
 * (dist/cli/main.js) on the committed examples and fixtures, and each stdout is validated against
 * its published schema in docs/schema/ with ajv. Also: the committed schemas are what
 * scripts/make-schema.mjs generates from the types now, and a broken output fails validation.
 * `collect` runs against the fake API server of test/k8s-api; `lab replay` and `lab run` only as
 * root (a real kernel, in their own namespaces). Not covered here: `diagnose --live` (its JSON is
 * diagnose's), `lab up|down` (no JSON output).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Ajv, type ValidateFunction } from "ajv";
import { kernelSkip } from "../../src/lab/kernel-guard.ts";
import { collectFromFakeApi } from "./fake-api-collect.ts";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const SCHEMAS = join(ROOT, "docs/schema");
const VPN_LAB = "src/cases/vpn/testdata/vpn-lab";
const VPN_POD = "vpn/vpn-openvpn-6d9c7b5f4-x2x7k";
const EXAMPLE = "examples/snat-exception-list";
const EXAMPLE_FIXED = "examples/snat-exception-list-allowlisted";

const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
const validators = new Map<string, ValidateFunction>();

function validator(name: string): ValidateFunction {
  let v = validators.get(name);
  if (!v) {
    const schema = JSON.parse(readFileSync(join(SCHEMAS, `${name}.schema.json`), "utf8"));
    v = ajv.compile(schema);
    validators.set(name, v);
  }
  return v;
}

function errorsOf(name: string, value: unknown): string[] {
  const v = validator(name);
  if (v(value)) return [];
  return (v.errors ?? []).map(
    (e) => `${e.instancePath || "/"} ${e.message ?? ""} ${JSON.stringify(e.params)}`,
  );
}

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function podpath(args: readonly string[]): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 60_000,
    env: { ...process.env, NO_COLOR: "1" },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Runs the command, checks it answered (exit 0, 1 or 2 with output) and validates its JSON. */
function assertValid(schema: string, args: readonly string[], opts: { jsonl?: boolean } = {}) {
  const r = podpath(args);
  const what = `podpath ${args.join(" ")}`;
  assert.ok(r.status !== null && r.status <= 2, `${what}: exit ${r.status}\n${r.stderr}`);
  assert.doesNotMatch(r.stderr, /^\s+at .*\.js:\d+/m, `${what}: a stack trace`);
  // JSONL of an empty capture is no line at all; JSON is always one document.
  if (opts.jsonl && r.stdout === "") assert.equal(r.status, 0, `${what}: no output\n${r.stderr}`);
  else assert.notEqual(r.stdout.trim(), "", `${what}: no output (exit ${r.status})\n${r.stderr}`);
  const docs = opts.jsonl
    ? r.stdout
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as unknown)
    : [JSON.parse(r.stdout) as unknown];
  for (const [i, doc] of docs.entries()) {
    const errors = errorsOf(schema, doc);
    assert.deepEqual(
      errors,
      [],
      `${what}${opts.jsonl ? ` (line ${i + 1})` : ""} against ${schema}`,
    );
  }
  return docs;
}

/**
 * A snapshot holding both cases: BASE (a masquerade example) with the VPN lab snapshot VPN laid
 * over it, its files renamed `vpn-…` where BASE has one of the same name.
 */
function withVpn(base: string, vpn: string, into: string): string {
  cpSync(join(ROOT, base), into, { recursive: true });
  for (const dir of readdirSync(join(ROOT, vpn), { withFileTypes: true })) {
    if (!dir.isDirectory()) continue;
    mkdirSync(join(into, dir.name), { recursive: true });
    for (const f of readdirSync(join(ROOT, vpn, dir.name))) {
      const taken = existsSync(join(into, dir.name, f));
      cpSync(join(ROOT, vpn, dir.name, f), join(into, dir.name, taken ? `vpn-${f}` : f), {
        recursive: true,
      });
    }
  }
  return into;
}

const vpnLabs = readdirSync(join(ROOT, VPN_LAB), { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => `${VPN_LAB}/${d.name}`);

/** Every capture file under src/capture/fixtures and the examples (not their notes or metadata). */
const captures = [
  ...readdirSync(join(ROOT, "src/capture/fixtures"), { recursive: true, encoding: "utf8" }).map(
    (f) => `src/capture/fixtures/${f}`,
  ),
  ...readdirSync(join(ROOT, EXAMPLE, "captures")).map((f) => `${EXAMPLE}/captures/${f}`),
]
  // tcpdump text is .out beside tcpdump's own tests, .txt among the forms (other .txt are notes).
  .filter(
    (f) => /\.(pcap|pcapng|out)$/.test(f) || /^src\/capture\/fixtures\/forms\/.*\.txt$/.test(f),
  )
  .sort();

const IPMASQ_FIXTURES = "src/agents/ip-masq-agent/fixtures";
const ipmasqConfigs = [
  ...readdirSync(join(ROOT, IPMASQ_FIXTURES))
    .filter((f) => f.endsWith(".yaml") && !f.startsWith("daemonset") && !f.startsWith("diagnose"))
    .map((f) => `${IPMASQ_FIXTURES}/${f}`),
  ...readdirSync(join(ROOT, "test/fixtures/lab"))
    .filter((f) => f.startsWith("ip-masq-agent"))
    .map((f) => `test/fixtures/lab/${f}`),
  `${EXAMPLE}/cluster/ip-masq-agent.yaml`,
  `${EXAMPLE_FIXED}/cluster/ip-masq-agent.yaml`,
].filter((f) => existsSync(join(ROOT, f)));

describe("published JSON schemas", () => {
  before(() => {
    assert.ok(existsSync(CLI), "dist/cli/main.js is missing: npx tsc -p tsconfig.build.json");
  });

  it("are what scripts/make-schema.mjs generates from the types now", () => {
    const r = spawnSync(process.execPath, [join(ROOT, "scripts/make-schema.mjs"), "--check"], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(r.status, 0, `${r.stderr}\nrun: npm run schema`);
  });

  it("each carry $id, title and, where the output has it, schemaVersion const 1", () => {
    const files = readdirSync(SCHEMAS).filter((f) => f.endsWith(".schema.json"));
    assert.ok(files.length >= 12, files.join(", "));
    for (const f of files) {
      const s = JSON.parse(readFileSync(join(SCHEMAS, f), "utf8")) as {
        $id?: string;
        title?: string;
        properties?: { schemaVersion?: { const?: unknown } };
      };
      assert.equal(s.$id, `https://podpath.dev/schema/${f}`, f);
      assert.equal(typeof s.title, "string", f);
      if (s.properties?.schemaVersion) assert.equal(s.properties.schemaVersion.const, 1, f);
    }
  });

  it("reject a diagnose answer whose finding has no id, and one with an unknown field", () => {
    const [answer] = assertValid("diagnose", ["diagnose", EXAMPLE, "-o", "json"]) as [
      { findings: Record<string, unknown>[] },
    ];
    assert.ok(answer.findings.length > 0, "the example has findings");
    const noId = structuredClone(answer);
    delete noId.findings[0]!["id"];
    assert.ok(
      errorsOf("diagnose", noId).some((e) => e.includes("/findings/0") && e.includes("id")),
      "a finding without id fails",
    );
    const extra = { ...structuredClone(answer), surprise: true };
    assert.notDeepEqual(errorsOf("diagnose", extra), []);
    const wrongVersion = { ...structuredClone(answer), schemaVersion: 2 };
    assert.notDeepEqual(errorsOf("diagnose", wrongVersion), []);
  });
});

describe("every command's JSON matches its schema", () => {
  it("diagnose, on the examples and every VPN lab snapshot", () => {
    for (const snap of [EXAMPLE, EXAMPLE_FIXED, ...vpnLabs])
      assertValid("diagnose", ["diagnose", snap, "-o", "json"]);
    assertValid("diagnose", ["diagnose", EXAMPLE, "--dest", "10.20.30.40:5432", "-o", "json"]);
  });

  it("plan masquerade, both strategies", () => {
    for (const strategy of ["narrow", "keep-pod-identity"])
      assertValid("plan-masquerade", [
        "plan",
        "masquerade",
        EXAMPLE,
        "--strategy",
        strategy,
        "-o",
        "json",
      ]);
  });

  it("plan vpn, on every VPN lab snapshot", () => {
    for (const snap of vpnLabs)
      assertValid("plan-vpn", ["plan", "vpn", snap, "--pod", VPN_POD, "-o", "json"]);
  });

  it("capture read (jsonl) and capture flows, on every capture fixture", () => {
    assert.ok(captures.length > 10, captures.join(", "));
    for (const file of captures) {
      assertValid("capture-read", ["capture", "read", file, "-o", "jsonl"], { jsonl: true });
      assertValid("capture-read-json", ["capture", "read", file, "-o", "json"]);
      assertValid("capture-flows", ["capture", "flows", file, "-o", "json"]);
    }
  });

  it("capture flows --host, and --talkers", () => {
    const file = `${EXAMPLE}/captures/node-gke-lab-default-0.pcap`;
    const [flows] = assertValid("capture-flows", [
      "capture",
      "flows",
      file,
      "--host",
      "10.20.30.40",
      "-o",
      "json",
    ]) as [{ conversations: unknown[] }];
    assert.ok(flows.conversations.length > 0);
    assertValid("capture-talkers", [
      "capture",
      "flows",
      file,
      "--host",
      "10.20.30.40",
      "--talkers",
      "-o",
      "json",
    ]);
  });

  it("ipmasq config and rules, on every ip-masq-agent config fixture and the defaults", () => {
    assert.ok(ipmasqConfigs.length >= 4, ipmasqConfigs.join(", "));
    let errors = 0;
    for (const file of [...ipmasqConfigs, undefined]) {
      const f = file === undefined ? [] : [file];
      const [config] = assertValid("ipmasq-config", ["ipmasq", "config", ...f, "-o", "json"]) as [
        Record<string, unknown>,
      ];
      if ("error" in config) {
        errors++;
        continue;
      }
      assertValid("ipmasq-rules", ["ipmasq", "rules", ...f, "-o", "json"]);
      assertValid("ipmasq-rules", ["ipmasq", "rules", ...f, "--enable-ipv6", "-o", "json"]);
    }
    assert.ok(errors > 0, "an invalid config (its error object) was validated too");
  });

  it("admission check, on the OpenVPN manifests, the VPN lab clusters and Pod Security cases", () => {
    const psa = "src/agents/pod-security/fixtures/psa-upstream/baseline/v1.29";
    const manifests = [
      ...readdirSync(join(ROOT, "src/agents/pod-security/fixtures/openvpn")).map(
        (f) => `src/agents/pod-security/fixtures/openvpn/${f}`,
      ),
      ...vpnLabs.map((d) => `${d}/cluster`),
      ...["fail", "pass"].flatMap((k) =>
        readdirSync(join(ROOT, psa, k)).map((f) => `${psa}/${k}/${f}`),
      ),
    ];
    for (const m of manifests)
      assertValid("admission-check", ["admission", "check", m, "-o", "json"]);
    assertValid("admission-check", [
      "admission",
      "check",
      manifests[0]!,
      "--platform",
      "gke-autopilot",
      "-o",
      "json",
    ]);
  });

  it("probe, against loopback addresses only", () => {
    const [out] = assertValid("probe", [
      "probe",
      "--peer",
      "127.0.0.1",
      "--pod-ip",
      "127.0.0.2",
      "--service-ip",
      "127.0.0.3:9",
      "--public",
      "127.0.0.4",
      "--name",
      "podpath.invalid",
      "--dns-server",
      "127.0.0.1",
      "--timeout-ms",
      "300",
      "--count",
      "1",
      "--all",
      "-o",
      "json",
    ]) as [{ steps: unknown[] }];
    assert.ok(out.steps.length >= 4);
  });

  it("lab replay (root: a real kernel in its own namespace)", { skip: kernelSkip() }, () => {
    const rules = `${EXAMPLE}/nodes/gke-lab-default-0/iptables-save.txt`;
    for (const flow of ["10.4.0.5->10.20.30.40:5432", "10.4.0.5->8.8.8.8:53"])
      assertValid("lab-replay", [
        "lab",
        "replay",
        "--iptables",
        rules,
        "--flow",
        flow,
        "--node-ip",
        "10.128.0.9",
        "-o",
        "json",
      ]);
  });

  it("lab run (root: a real kernel in its own namespaces)", { skip: kernelSkip() }, () => {
    const tmp = mkdtempSync(join(tmpdir(), "podpath-schema-lab-"));
    after(() => rmSync(tmp, { recursive: true, force: true }));
    const [out] = assertValid("lab-run", [
      "lab",
      "run",
      "masquerade",
      "--out",
      join(tmp, "snap"),
      "-o",
      "json",
    ]) as [{ files: string[] }];
    assert.ok(out.files.length > 5);
  });

  it("collect, against a fake API server", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "podpath-schema-collect-"));
    after(() => rmSync(tmp, { recursive: true, force: true }));
    const r = await collectFromFakeApi(tmp, "json");
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(errorsOf("collect", JSON.parse(r.stdout)), []);
  });

  it("verify on snapshots that hold both cases: an array of their records", () => {
    const tmp = mkdtempSync(join(tmpdir(), "podpath-schema-e2e-"));
    after(() => rmSync(tmp, { recursive: true, force: true }));
    const b = withVpn(EXAMPLE, `${VPN_LAB}/forwarding-off`, join(tmp, "before"));
    const a = withVpn(EXAMPLE_FIXED, `${VPN_LAB}/fixed`, join(tmp, "after"));
    const [records] = assertValid("verify", ["verify", b, a, "-o", "json"]);
    assert.ok(Array.isArray(records), "several records are an array");
    assert.equal(records.length, 2);
  });

  // Last: verify's record is the shape most often extended.
  it("verify, the example's change and the VPN lab's", () => {
    assertValid("verify", ["verify", EXAMPLE, EXAMPLE_FIXED, "-o", "json"]);
    assertValid("verify", [
      "verify",
      EXAMPLE,
      EXAMPLE_FIXED,
      "--dest",
      "10.20.30.40:5432",
      "-o",
      "json",
    ]);
    assertValid("verify", [
      "verify",
      `${VPN_LAB}/forwarding-off`,
      `${VPN_LAB}/fixed`,
      "-o",
      "json",
    ]);
  });
});
