/**
 * Component test: podpath's Pod Security prediction (`predictAdmission`) against the real
 * kube-apiserver's admission answer. Every pod is created with `?dryRun=All` (admission and
 * validation run, nothing is stored) in namespaces labelled
 * `pod-security.kubernetes.io/enforce=<level>` and `enforce-version=<v1.N|latest>`; the server's
 * answer (admitted; 403 Forbidden with its PodSecurity message; 422 Invalid with its validation
 * message) must equal podpath's, message for message. Pods:
 * - every upstream Pod Security fixture (src/agents/pod-security/fixtures/psa-upstream-testdata.json:
 *   baseline and restricted, v1.0–v1.37), each in the namespace of its own level and version;
 * - derived sysctl cases: each sysctl PSA allows at some version, the VPN fix net.ipv4.ip_forward,
 *   a slash-separated name and IPC sysctls, on a plain pod, a hostNetwork pod and a hostIPC pod,
 *   at every level and version;
 * - the OpenVPN fixtures and the hand-written manifests (their pods, and their workloads' pod
 *   templates), and every file `podpath plan vpn --write` writes for examples/vpn-forwarding-off:
 *   each patch is applied to the example's Deployment with a server-side dry run (strategic merge
 *   for `patch-*.yaml`, server-side apply for `*-patched.yaml`), both give the same pod template,
 *   and the workloads' PodSecurity warnings equal podpath's.
 * The cluster's own version caps the policy version (a label newer than the server is evaluated
 * as the server's latest), so podpath is told the server's version.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse, parseAllDocuments } from "yaml";
import { PSA_SAFE_SYSCTLS } from "../../src/agents/pod-security/checks-baseline.ts";
import type { JsonObject } from "../../src/agents/pod-security/pod-spec.ts";
import { MAX_POLICY_MINOR } from "../../src/agents/pod-security/policy-level.ts";
import { predictAdmission } from "../../src/agents/pod-security/predict.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { componentSkip } from "./component-guard.ts";
import {
  collectionPath,
  createObjects,
  type Obj,
  rawRequest,
  readObjects,
} from "./live-objects.ts";

const skip =
  componentSkip("kube-apiserver", { kernel: false }) || componentSkip("etcd", { kernel: false });
const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const FIXTURES = join(ROOT, "src/agents/pod-security/fixtures");
const VPN_EXAMPLE = join(ROOT, "examples/vpn-forwarding-off");
const LEVELS = ["baseline", "restricted"] as const;
type Level = (typeof LEVELS)[number];
const VERSIONS = [
  ...Array.from({ length: MAX_POLICY_MINOR + 1 }, (_, i) => `v1.${i}`),
  "latest",
] as const;

/** The namespace labelled for one level and version. */
const nsFor = (level: string, version: string) => `psa-${level}-${version.replace(".", "-")}`;

const labelsFor = (level: string, version: string): Record<string, string> => ({
  "pod-security.kubernetes.io/enforce": level,
  "pod-security.kubernetes.io/enforce-version": version,
});

/** One side's answer: admitted, refused by admission (403) or by validation (422). */
interface Verdict {
  readonly outcome: "allowed" | "forbidden" | "invalid";
  readonly message: string;
}

async function serverVerdict(c: Cluster, namespace: string, pod: JsonObject): Promise<Verdict> {
  const r = await rawRequest(
    c,
    "POST",
    `/api/v1/namespaces/${namespace}/pods?dryRun=All`,
    c.adminToken,
    { text: JSON.stringify(pod), contentType: "application/json" },
  );
  const message = String(r.body["message"] ?? "");
  if (r.status === 201) return { outcome: "allowed", message: "" };
  if (r.status === 403) return { outcome: "forbidden", message };
  if (r.status === 422) return { outcome: "invalid", message };
  throw new Error(`dry-run create in ${namespace}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
}

function podpathVerdict(pod: JsonObject, labels: Record<string, string>, server: string): Verdict {
  const p = predictAdmission(pod, { namespaceLabels: labels, version: server });
  assert.ok(p, "podpath reads it as a pod");
  if (!p.apiValidation.allowed) return { outcome: "invalid", message: p.apiValidation.message };
  if (!p.podSecurity.allowed) return { outcome: "forbidden", message: p.podSecurity.message };
  return { outcome: "allowed", message: "" };
}

/** Runs `f` over `items`, `n` at a time. */
async function pool<T>(items: readonly T[], n: number, f: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await f(items[next++]!);
    }),
  );
}

interface Case {
  readonly label: string;
  readonly level: string;
  readonly version: string;
  readonly pod: JsonObject;
}

/** Each case's disagreement between the server and podpath, as one line (none: agreement). */
async function disagreements(
  c: Cluster,
  server: string,
  cases: readonly Case[],
  seen?: Set<Verdict["outcome"]>,
): Promise<string[]> {
  const out: string[] = [];
  await pool(cases, 8, async (k) => {
    const got = await serverVerdict(c, nsFor(k.level, k.version), k.pod);
    seen?.add(got.outcome);
    const want = podpathVerdict(k.pod, labelsFor(k.level, k.version), server);
    if (got.outcome !== want.outcome || got.message !== want.message) {
      out.push(
        `${k.label} [${k.level}:${k.version}]: server ${got.outcome} ${JSON.stringify(got.message)}; podpath ${want.outcome} ${JSON.stringify(want.message)}`,
      );
    }
  });
  return out.sort();
}

/** A pod that passes restricted at every version, with `extra` merged into its spec. */
function sysctlPod(name: string, extra: JsonObject, sysctls: readonly string[]): JsonObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      ...extra,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 1000,
        seccompProfile: { type: "RuntimeDefault" },
        sysctls: sysctls.map((s) => ({ name: s, value: "1" })),
      },
      containers: [
        {
          name: "c",
          image: "busybox",
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
        },
      ],
    },
  };
}

/** The pod a workload's template makes (its name the workload's). */
function podOfTemplate(o: JsonObject): JsonObject | undefined {
  if (o["kind"] === "Pod") return o;
  const spec = o["spec"] as { template?: { metadata?: JsonObject; spec?: JsonObject } } | undefined;
  const tpl =
    spec?.template ??
    ((spec as { jobTemplate?: { spec?: { template?: JsonObject } } })?.jobTemplate?.spec
      ?.template as { metadata?: JsonObject; spec?: JsonObject } | undefined);
  if (!tpl?.spec) return undefined;
  const name = (o["metadata"] as { name?: string } | undefined)?.name ?? "x";
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { ...(tpl.metadata ?? {}), name },
    spec: tpl.spec,
  };
}

describe("Pod Security: podpath's prediction equals the real kube-apiserver's dry-run answer", {
  skip,
}, () => {
  let cluster: Cluster | undefined;
  let server = "";
  before(async () => {
    cluster = await startCluster();
    const c = cluster;
    const v = await c.api("GET", "/version", c.adminToken);
    server = `v1.${Number.parseInt(String((v.body as { minor?: string }).minor), 10)}`;
    const namespaces: Obj[] = [];
    for (const level of LEVELS) {
      for (const version of VERSIONS) {
        namespaces.push({
          apiVersion: "v1",
          kind: "Namespace",
          metadata: { name: nsFor(level, version), labels: labelsFor(level, version) },
        });
        namespaces.push({
          apiVersion: "v1",
          kind: "Namespace",
          metadata: {
            name: `warn-${nsFor(level, version)}`,
            labels: {
              ...labelsFor(level, version),
              "pod-security.kubernetes.io/warn": level,
              "pod-security.kubernetes.io/warn-version": version,
            },
          },
        });
      }
    }
    await createObjects(c, namespaces);
    // the ServiceAccount admission plugin needs each namespace's default account
    await pool(namespaces, 8, async (n) => {
      const sa: Obj = {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "default", namespace: n.metadata.name },
      };
      const r = await c.api("POST", collectionPath(sa), c.adminToken, sa);
      assert.ok(r.status === 201 || r.status === 409, JSON.stringify(r.body));
    });
  });
  after(async () => {
    await cluster?.stop();
  });

  it("the server's version is one podpath models", () => {
    assert.match(server, /^v1\.\d+$/);
    assert.ok(Number(server.slice(3)) <= MAX_POLICY_MINOR, server);
  });

  it("every upstream fixture: the same verdict and the same message", async () => {
    const data = JSON.parse(readFileSync(join(FIXTURES, "psa-upstream-testdata.json"), "utf8")) as {
      files: Record<string, string>;
      contents: Record<string, string>;
    };
    const cases: Case[] = Object.keys(data.files)
      .sort()
      .map((p) => {
        const [level, version] = p.split("/") as [Level, string];
        const pod = parse(data.contents[data.files[p]!]!) as JsonObject;
        // upstream names some fixtures with "_", which no API server accepts as a name
        const meta = pod["metadata"] as { name?: string };
        if (meta.name) meta.name = meta.name.replaceAll("_", "-");
        return { label: p, level, version, pod };
      });
    assert.equal(cases.length, 4537);
    const seen = new Set<Verdict["outcome"]>();
    const bad = await disagreements(cluster!, server, cases, seen);
    assert.deepEqual([...seen].sort(), ["allowed", "forbidden", "invalid"]);
    assert.deepEqual(bad.slice(0, 10), [], `${bad.length} of ${cases.length} disagree`);
  });

  it("derived sysctl cases, at every level and version: the same verdict and message", async () => {
    const names = [
      ...PSA_SAFE_SYSCTLS.map((s) => s.name),
      "net.ipv4.ip_forward",
      "net/ipv4/tcp_syncookies",
      "kernel.shm_rmid_forced",
      "kernel.msgmax",
    ];
    const variants: [string, JsonObject][] = [
      ["plain", {}],
      ["hostnetwork", { hostNetwork: true }],
      ["hostipc", { hostIPC: true }],
    ];
    const cases: Case[] = [];
    for (const level of LEVELS) {
      for (const version of VERSIONS) {
        for (const [i, name] of names.entries()) {
          for (const [v, extra] of variants) {
            const podName = `sysctl-${i}-${v}`;
            cases.push({
              label: `${podName} ${name}`,
              level,
              version,
              pod: sysctlPod(podName, extra, [name]),
            });
          }
        }
      }
    }
    const seen = new Set<Verdict["outcome"]>();
    const bad = await disagreements(cluster!, server, cases, seen);
    assert.deepEqual([...seen].sort(), ["allowed", "forbidden", "invalid"]);
    assert.deepEqual(bad.slice(0, 10), [], `${bad.length} of ${cases.length} disagree`);
  });

  it("the OpenVPN fixtures and hand-written manifests: their pods and workload templates", async () => {
    const objects: JsonObject[] = [];
    for (const dir of ["openvpn", "manifests"]) {
      for (const f of readdirSync(join(FIXTURES, dir)).sort()) {
        if (!f.endsWith(".yaml") || f === "broken.yaml") continue;
        // YAML 1.1, as the API server and kubectl read it (`defaultMode: 0775` is octal)
        const text = readFileSync(join(FIXTURES, dir, f), "utf8");
        for (const d of parseAllDocuments(text, { version: "1.1" })) {
          const o = d.toJS() as JsonObject | null;
          if (!o) continue;
          const items = o["kind"] === "List" ? (o["items"] as JsonObject[]) : [o];
          for (const item of items) {
            const pod = podOfTemplate(item);
            if (pod)
              objects.push({
                ...pod,
                metadata: { ...(pod["metadata"] as object), namespace: undefined },
              });
          }
        }
      }
    }
    assert.ok(objects.length >= 3, `${objects.length} pods`);
    const cases = objects.flatMap((pod) =>
      LEVELS.flatMap((level) =>
        VERSIONS.map((version) => ({
          label: String((pod["metadata"] as { name?: string }).name),
          level,
          version,
          pod,
        })),
      ),
    );
    const bad = await disagreements(cluster!, server, cases);
    assert.deepEqual(bad.slice(0, 10), [], `${bad.length} of ${cases.length} disagree`);
  });

  it("every file plan vpn --write writes: the server applies it (dry run), and admission agrees", async () => {
    const c = cluster!;
    await createObjects(c, readObjects(join(VPN_EXAMPLE, "cluster")));
    const dir = mkdtempSync(join(tmpdir(), "podpath-plan-vpn-"));
    try {
      const r = spawnSync(process.execPath, [CLI, "plan", "vpn", VPN_EXAMPLE, "--write", dir], {
        encoding: "utf8",
        timeout: 60_000,
      });
      assert.equal(r.status, 0, r.stderr);
      const files = readdirSync(dir).sort();
      assert.deepEqual(files, [
        "chart-value-patched.yaml",
        "init-container-patched.yaml",
        "patch-init-container.yaml",
        "patch-pod-sysctls.yaml",
        "pod-sysctls-patched.yaml",
        "values-ip-forward.yaml",
      ]);
      const path = "/apis/apps/v1/namespaces/vpn/deployments/vpn-openvpn";
      const templates = new Map<string, unknown>();
      const manifests: JsonObject[] = [];
      for (const f of files) {
        const text = readFileSync(join(dir, f), "utf8");
        if (f === "values-ip-forward.yaml") {
          // Helm values, not an object: chart-value-patched.yaml is what they render to
          assert.deepEqual(parse(text), { ipForwardInitContainer: true });
          continue;
        }
        const patch = f.startsWith("patch-");
        const answer = await rawRequest(
          c,
          "PATCH",
          `${path}?dryRun=All${patch ? "" : "&fieldManager=podpath-test&force=true"}`,
          c.adminToken,
          patch
            ? {
                text: JSON.stringify(parse(text)),
                contentType: "application/strategic-merge-patch+json",
              }
            : { text, contentType: "application/apply-patch+yaml" },
        );
        assert.equal(answer.status, 200, `${f}: ${JSON.stringify(answer.body)}`);
        const spec = answer.body["spec"] as { template: unknown };
        const strategy = f.replace(/^patch-/, "").replace(/(-patched)?\.yaml$/, "");
        templates.set(`${patch ? "patch" : "apply"} ${strategy}`, spec.template);
        if (!patch) manifests.push(parse(text) as JsonObject);
        // the plan's claim for the example's own namespace (no Pod Security labels): admitted
        const p = predictAdmission(parse(text) as JsonObject, { version: server });
        if (!patch) assert.equal(p?.podSecurity.allowed, true, f);
        assert.deepEqual(answer.warnings, [], f);
      }
      // the patch and the full manifest podpath wrote give the server the same pod template
      for (const strategy of ["init-container", "pod-sysctls"]) {
        assert.ok(templates.has(`patch ${strategy}`) && templates.has(`apply ${strategy}`));
        assert.deepEqual(templates.get(`patch ${strategy}`), templates.get(`apply ${strategy}`));
      }
      assert.ok(templates.has("apply chart-value"));
      // each patched workload, in namespaces warning at each level and version: the same
      // warnings; its pods, in namespaces enforcing them: the same verdict and message
      const cases: Case[] = [];
      const warned: string[] = [];
      let warnings = 0;
      for (const m of manifests) {
        for (const level of LEVELS) {
          for (const version of VERSIONS) {
            const labels = {
              ...labelsFor(level, version),
              "pod-security.kubernetes.io/warn": level,
              "pod-security.kubernetes.io/warn-version": version,
            };
            const ns = `warn-${nsFor(level, version)}`;
            const body = { ...m, metadata: { ...(m["metadata"] as object), namespace: ns } };
            const got = await rawRequest(
              c,
              "POST",
              `/apis/apps/v1/namespaces/${ns}/deployments?dryRun=All`,
              c.adminToken,
              { text: JSON.stringify(body), contentType: "application/json" },
            );
            assert.equal(got.status, 201, JSON.stringify(got.body));
            const want = predictAdmission(body, { namespaceLabels: labels, version: server });
            const mine = (want?.podSecurity.warnings ?? []).map((w) => w.replace(/^Warning: /, ""));
            const theirs = got.warnings.filter((w) => w.startsWith("would violate PodSecurity"));
            warnings += theirs.length;
            if (JSON.stringify(mine) !== JSON.stringify(theirs))
              warned.push(
                `${ns}: server ${JSON.stringify(theirs)}; podpath ${JSON.stringify(mine)}`,
              );
            cases.push({
              label: `${(m["metadata"] as { name: string }).name} pod`,
              level,
              version,
              pod: podOfTemplate(m)!,
            });
          }
        }
      }
      assert.deepEqual(warned, []);
      assert.ok(warnings > 0, "some namespaces warn about the patched workloads");
      assert.ok(cases.length >= 3 * 2 * VERSIONS.length);
      const bad = await disagreements(c, server, cases);
      assert.deepEqual(bad.slice(0, 10), [], `${bad.length} of ${cases.length} disagree`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
