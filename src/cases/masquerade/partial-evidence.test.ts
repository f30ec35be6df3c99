/**
 * Answers that hold when evidence is partial: the node's address list left out, or its dump
 * handed over as a grep excerpt or cut short. What is left out is unknown, never absent: an
 * excerpt never produces an error or warning finding that the whole dump does not.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import type { Answer } from "../../model/answer.ts";
import { parseIp } from "../../net/cidr.ts";
import { type DiagnoseOptions, diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";

const EXAMPLE = join(import.meta.dirname, "../../../examples/snat-exception-list");
const NODE_DUMP = "nodes/gke-lab-default-0/iptables-save.txt";
const FIXTURES = join(import.meta.dirname, "../../iptables/fixtures");
const tmp = mkdtempSync(join(tmpdir(), "pp-partial-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A copy of the example with one node file replaced (or removed when `text` is undefined). */
function exampleWith(file: string, text: string | undefined): string {
  const root = mkdtempSync(join(tmp, "s-"));
  cpSync(EXAMPLE, root, { recursive: true });
  if (text === undefined) rmSync(join(root, file));
  else writeFileSync(join(root, file), text);
  return root;
}

async function run(root: string, opts: DiagnoseOptions = {}): Promise<Answer> {
  return diagnose(loadSnapshot(openSnapshot(root)), opts);
}

/** error and warning findings, by id and subject */
const serious = (a: Answer) =>
  new Set(a.findings.filter((f) => f.severity !== "info").map((f) => `${f.id} ${f.subject}`));

describe("diagnose without the node's ip addr", () => {
  it("gives the same masq/exempt-destination citing the same lines, and says where the node's addresses came from", async () => {
    const whole = await run(EXAMPLE);
    const partial = await run(exampleWith("nodes/gke-lab-default-0/ip-addr.txt", undefined));
    const f = whole.findings.find((x) => x.id === "masq/exempt-destination");
    const g = partial.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f && g, JSON.stringify(partial.findings.map((x) => x.id)));
    assert.equal(g.severity, f.severity);
    assert.deepEqual(g.evidence, f.evidence);
    assert.match(
      g.explanation,
      /ip addr\) is not in the snapshot; which addresses are its own was read from other evidence: 10\.20\.0\.0\/16 is not the node's \(onprem-dc1's prefix, the far side, remote\/onprem-dc1\.yaml:\d+\)/,
    );
    assert.deepEqual(
      partial.findings.map((x) => x.id),
      whole.findings.map((x) => x.id),
    );
  });
});

describe("diagnose on an excerpt of the node's dump", () => {
  const text = readFileSync(join(EXAMPLE, NODE_DUMP), "utf8");
  const lines = text.split("\n");
  const excerpts: [string, string][] = [
    ["grep MASQ", lines.filter((l) => l.includes("MASQ")).join("\n")],
    ["grep POSTROUTING", lines.filter((l) => l.includes("POSTROUTING")).join("\n")],
    ["grep -- -A", lines.filter((l) => l.startsWith("-A")).join("\n")],
    ["grep RETURN", lines.filter((l) => l.includes("RETURN")).join("\n")],
    ["grep 10.0.0.0", lines.filter((l) => l.includes("10.0.0.0")).join("\n")],
    ["grep -v COMMIT", lines.filter((l) => !l.includes("COMMIT")).join("\n")],
  ];
  for (let n = 1; n < lines.length; n++) {
    excerpts.push([`head -n ${n}`, lines.slice(0, n).join("\n")]);
  }

  for (const [what, excerpt] of excerpts) {
    it(`${what}: no error or warning the whole dump does not give`, async () => {
      const whole = serious(await run(EXAMPLE));
      const part = await run(exampleWith(NODE_DUMP, `${excerpt}\n`));
      for (const k of serious(part)) assert.ok(whole.has(k), `${k} only from the excerpt`);
    });
  }

  it("reads the grep as an excerpt: the source is undecided, with the command that decides it", async () => {
    const rules = lines.filter((l) => l.startsWith("-A")).join("\n");
    const part = await run(exampleWith(NODE_DUMP, `${rules}\n`));
    const path = part.paths.find((p) => p.from.startsWith("pod/"));
    assert.ok(path);
    assert.equal(path.sourceOnWire, undefined, path.verdict);
    const u = part.findings.find((f) => f.id === "masq/source-undecided");
    assert.ok(u, JSON.stringify(part.findings.map((f) => f.id)));
    assert.ok(u.next.some((n) => n.startsWith("iptables-save -t nat")));
    // what the excerpt shows is still the evidence: the RETURN for 10.0.0.0/8
    assert.ok(u.evidence.some((e) => e.text?.includes("-d 10.0.0.0/8")));
  });
});

describe("diagnose on real node dumps cut down", () => {
  const dumps = [
    "gke-dpv2-1.29_iptables-S-nat_IP-MASQ-default-snat_cilium.txt",
    "gke-legacy-kubenet_iptables-S-nat_kube-proxy_kubenet-snat.txt",
    "kubeadm-docker_k8s-pr-75893_iptables-save-nat-header.txt",
  ];
  const opts: DiagnoseOptions = {
    dest: { ip: parseIp("10.20.30.40"), text: "10.20.30.40" },
    from: { kind: "address", ip: parseIp("10.4.0.5") },
  };
  const snapshot = (dump: string) => {
    const root = mkdtempSync(join(tmp, "r-"));
    cpSync(EXAMPLE, root, { recursive: true });
    writeFileSync(join(root, NODE_DUMP), dump);
    return root;
  };
  for (const name of dumps) {
    it(`${name}: grep excerpts give no error or warning the whole dump does not`, async () => {
      const text = readFileSync(join(FIXTURES, name), "utf8");
      const whole = serious(await run(snapshot(text), opts));
      const lines = text.split("\n");
      for (const pattern of ["MASQ", "POSTROUTING", "RETURN", "KUBE", "-A", "10.0.0.0/8"]) {
        const shown = lines.filter((l) => l.includes(pattern));
        // a grep that matched nothing is no dump at all (the answer comes from the intent)
        if (shown.length === 0) continue;
        const part = await run(snapshot(`${shown.join("\n")}\n`), opts);
        for (const k of serious(part))
          assert.ok(whole.has(k), `grep ${pattern}: ${k} only from the excerpt`);
        // every finding cites a real line, and its text names none that is not
        for (const f of part.findings) {
          assert.ok(f.evidence.length > 0, `grep ${pattern}: ${f.id} cites nothing`);
          for (const e of f.evidence)
            assert.ok(e.line >= 1, `grep ${pattern}: ${f.id} cites line 0`);
          assert.doesNotMatch(f.explanation, /\.txt:0\b/, `grep ${pattern}: ${f.id}`);
        }
      }
    });
  }
});

describe("a whole dump with no masquerade rule at all, and no component's objects", () => {
  it("says no rule masquerades and nothing says whose job it is; blames no agent's default list", async () => {
    // the Flannel lab's node before the fix (flanneld without --ip-masq), its objects left out
    const root = mkdtempSync(join(tmp, "s-"));
    cpSync(join(import.meta.dirname, "fixtures/flannel/before"), root, { recursive: true });
    for (const f of ["kube-flannel.yaml"]) rmSync(join(root, "cluster", f), { force: true });
    const a = await diagnose(loadSnapshot(openSnapshot(root)), {});
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, JSON.stringify(a.findings.map((x) => x.id)));
    assert.doesNotMatch(f.title, /exempted by/);
    assert.doesNotMatch(f.explanation, /default exception list|GKE's node startup/);
    assert.match(f.explanation, /no masquerade for pod traffic to it/);
  });
});

describe("an owner's file that cannot be read is named, whoever reads it", () => {
  for (const [owner, file, code] of [
    ["kubenet", "kubelet-flags.txt", "KUBELET_FLAGS_UNRECOGNIZED"],
    ["bridge-cni", "cni/10-containerd-net.conflist", "CNI_CONFIG_SYNTAX"],
  ] as const) {
    it(`${owner}: a garbled ${file} is a diagnostic of the answer`, async () => {
      const root = mkdtempSync(join(tmp, "s-"));
      cpSync(join(import.meta.dirname, `fixtures/${owner}/before`), root, { recursive: true });
      const node = readdirSync(join(root, "nodes"))[0]!;
      writeFileSync(join(root, "nodes", node, file), "{{{ garbage\n");
      const a = await diagnose(loadSnapshot(openSnapshot(root)), {});
      const d = a.diagnostics.find((x) => x.code === code);
      assert.ok(d, JSON.stringify(a.diagnostics));
      assert.match(
        d.message + JSON.stringify(d.source ?? {}),
        new RegExp(file.replace(".", "\\.")),
      );
    });
  }
});

describe("a filter table cut short (the lab's Service snapshot, nat first as legacy iptables-save prints)", () => {
  const FIX = join(import.meta.dirname, "fixtures/service-probes");
  const DUMP = "nodes/worker-1/iptables-save.txt";
  const lines = readFileSync(join(FIX, DUMP), "utf8").split("\n");
  const table = (name: string) => {
    const start = lines.indexOf(`*${name}`);
    return lines.slice(start - 1, lines.indexOf("COMMIT", start) + 2);
  };
  const filter = table("filter");
  const cut = [
    ...table("nat"),
    ...filter.slice(
      0,
      filter.findIndex((l) => l.startsWith("-A FORWARD")),
    ),
  ];
  const fixtureWith = (text: string) => {
    const root = mkdtempSync(join(tmp, "s-"));
    cpSync(FIX, root, { recursive: true });
    writeFileSync(join(root, DUMP), text);
    return root;
  };
  const filterMissing = (a: Answer) =>
    a.missing.filter((m) => m.file === DUMP && m.command?.startsWith("iptables-save -t filter"));

  it("keeps the INPUT REJECT it shows, adds no serious finding, and names the command for each flow it leaves open", async () => {
    const whole = await run(FIX);
    const part = await run(fixtureWith(`${cut.join("\n")}\n`));
    assert.deepEqual(filterMissing(whole), []);
    const rejects = part.findings.find((f) => f.id === "masq/service-node-rejects");
    assert.ok(rejects, JSON.stringify(part.findings.map((f) => f.id)));
    assert.match(rejects.title, /filter INPUT rule 9 rejects it.*\(on 1 of its \d+ ways\)/);
    for (const k of serious(part)) assert.ok(serious(whole).has(k), k);
    const open = filterMissing(part);
    // the web Service's packet is forwarded to its endpoint: filter FORWARD, cut off, decides
    const web = open.find((m) => m.would_decide.includes("10.244.1.7 → 10.96.0.50:80"));
    assert.ok(web, JSON.stringify(open));
    assert.match(web.would_decide, /filter FORWARD \(it is cut short\)/);
  });
});
