/** @module evidence/kube-objects.test — readKubeObjects on kubectl output: single, List, multi-document, JSON. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { readKubeObjects } from "./kube-objects.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`fixtures/kube/${name}`, import.meta.url), "utf8");
const lineOf = (text: string, n: number) => text.split("\n")[n - 1];

describe("readKubeObjects", () => {
  it("reads a `kind: List` of pods as kubectl prints it, item by item with lines", () => {
    const text = fixture("pods.yaml");
    const { value, diagnostics } = readKubeObjects(text, "cluster/pods.yaml");
    assert.deepEqual(diagnostics, []);
    const itemLines = text.split("\n").flatMap((l, i) => (l === "- apiVersion: v1" ? [i + 1] : []));
    assert.equal(value.length, itemLines.length);
    assert.deepEqual(
      value.map((o) => o.source.line),
      itemLines,
    );
    const ad = value.find((o) => o.name.startsWith("adservice-"))!;
    assert.equal(ad.kind, "Pod");
    assert.equal(ad.apiVersion, "v1");
    assert.equal(ad.namespace, "default");
    assert.equal(ad.labels.app, "adservice");
    assert.match(ad.annotations["cni.projectcalico.org/podIP"] ?? "", /^10\.244\./);
    const image = ad.locate(["spec", "containers", 0, "image"])!;
    assert.match(
      lineOf(text, image.line) ?? "",
      /image: gcr.io\/google-samples\/microservices-demo\/adservice/,
    );
    assert.equal(image.file, "cluster/pods.yaml");
    assert.equal(lineOf(text, image.line)?.indexOf("gcr.io"), image.col! - 1);
    const nodeName = ad.locate(["spec", "nodeName"])!;
    assert.equal(lineOf(text, nodeName.line)?.trim(), "nodeName: minikube");
    assert.equal(ad.locate(["spec", "nope"]), undefined);
  });

  it("reads a typed list in JSON with line positions", () => {
    const text = fixture("pods_list_a.json");
    const { value, diagnostics } = readKubeObjects(text, "pods.json");
    assert.deepEqual(diagnostics, []);
    assert.ok(value.length >= 2);
    assert.ok(value.every((o) => o.kind === "Pod"));
    const first = value[0]!;
    assert.equal(
      lineOf(text, first.locate(["metadata", "name"])!.line)?.trim(),
      `"name": "${first.name}",`,
    );
    assert.equal(first.raw.kind, "Pod");
  });

  it("reads a list of namespaces", () => {
    const { value, diagnostics } = readKubeObjects(fixture("ns.yaml"), "ns.yaml");
    assert.deepEqual(diagnostics, []);
    assert.ok(
      value.length > 1 && value.every((o) => o.kind === "Namespace" && o.namespace === undefined),
    );
  });

  it("maps lines inside a ConfigMap's block scalar to file lines", () => {
    const text = fixture("configmap-ip-masq-agent.yaml");
    const [cm] = readKubeObjects(text, "cm.yaml").value;
    assert.equal(cm?.name, "ip-masq-agent");
    const config = String((cm!.raw.data as Record<string, unknown>).config);
    config.split("\n").forEach((l, i) => {
      if (l.trim() === "") return;
      const ref = cm!.locateInString(["data", "config"], i + 1)!;
      assert.equal(lineOf(text, ref.line)?.trim(), l.trim(), `config line ${i + 1}`);
      assert.equal(ref.text?.trim(), l.trim());
      assert.equal(lineOf(text, ref.line)?.indexOf(l.trim()), ref.col! - 1);
    });
    assert.equal(cm!.locateInString(["data", "config"], 99), undefined);
    assert.equal(cm!.locateInString(["data", "config"], 0), undefined);
    assert.equal(cm!.locateInString(["metadata"], 1), undefined);
  });

  it("maps lines inside a JSON string to the column where they start", () => {
    const text = fixture("configmap-ip-masq-agent.json");
    const [cm] = readKubeObjects(text, "cm.json").value;
    const ref = cm!.locateInString(["data", "config"], 3)!;
    const line = lineOf(text, ref.line)!;
    assert.match(line, /"config": "nonMasqueradeCIDRs/);
    assert.ok(line.slice(ref.col! - 1).startsWith("  - 172.16.0.0/12\\n"));
  });

  it("maps lines of folded and plain multi-line strings by their text", () => {
    const text =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: >\n    first\n\n    second\n  b: one\n    two\n";
    const [cm] = readKubeObjects(text, "f.yaml").value;
    assert.equal(cm!.locateInString(["data", "a"], 2)?.line, 9);
    assert.equal(cm!.locateInString(["data", "b"], 1)?.line, 10);
  });

  it("reads multi-document YAML and skips only the broken document", () => {
    const good = fixture("configmap-ip-masq-agent.yaml");
    const text = `${good}---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [broken\n---\n${fixture("nodes-daemonset.yaml")}---\n`;
    const { value, diagnostics } = readKubeObjects(text, "mixed.yaml");
    assert.deepEqual(
      value.map((o) => o.kind),
      ["ConfigMap", "Node", "Node", "DaemonSet"],
    );
    assert.equal(diagnostics.length >= 1, true);
    const d = diagnostics[0]!;
    assert.equal(d.code, "YAML_SYNTAX");
    assert.equal(d.source?.file, "mixed.yaml");
    const brokenStart = good.split("\n").length + 1;
    assert.ok(
      d.source!.line >= brokenStart && d.source!.line <= brokenStart + 5,
      `line ${d.source?.line}`,
    );
    assert.match(d.message, /expected valid YAML or JSON/);
    const ds = value[3]!;
    assert.equal(lineOf(text, ds.source.line), "apiVersion: apps/v1");
  });

  it("reports what is not a Kubernetes object, with the line", () => {
    const text =
      "- a\n- b\n---\njust a string\n---\nkind: Pod\nmetadata: {name: x}\n---\napiVersion: v1\nkind: List\nitems:\n- 3\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: ok}\n";
    const { value, diagnostics } = readKubeObjects(text, "odd.yaml");
    assert.deepEqual(
      value.map((o) => o.name),
      ["ok"],
    );
    assert.deepEqual(
      diagnostics.map((d) => [d.code, d.source?.line]),
      [
        ["KUBE_NOT_OBJECT", 1],
        ["KUBE_NOT_OBJECT", 4],
        ["KUBE_NOT_OBJECT", 6],
        ["KUBE_NOT_OBJECT", 12],
      ],
    );
    assert.match(
      diagnostics[2]!.message,
      /expected a Kubernetes object with string fields apiVersion and kind/,
    );
  });

  it("reports duplicate keys, non-string labels and alias cycles", () => {
    const dup = readKubeObjects(
      "apiVersion: v1\nkind: Pod\nkind: Pod\nmetadata: {name: a}\n",
      "d.yaml",
    );
    assert.equal(dup.value.length, 0);
    assert.equal(dup.diagnostics[0]?.source?.line, 3);
    const labels = readKubeObjects(
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n    tier: 3\n",
      "l.yaml",
    );
    assert.deepEqual(labels.value[0]?.labels, {});
    assert.equal(labels.diagnostics[0]?.code, "KUBE_SCHEMA");
    const cyc = readKubeObjects(
      "apiVersion: v1\nkind: Pod\nmetadata: &m\n  name: a\n  x: *m\n",
      "c.yaml",
    );
    assert.equal(cyc.value.length, 0);
    assert.equal(cyc.diagnostics.length, 1);
  });

  it("keeps string fields as written, as the API server's decoder does", () => {
    const [o] = readKubeObjects(
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: n\n  labels: {enabled: yes}\ndata:\n  port: '8080'\n",
      "y.yaml",
    ).value;
    assert.equal(o?.name, "n");
    assert.deepEqual(o?.labels, { enabled: "yes" });
    assert.equal((o!.raw.data as Record<string, unknown>).port, "8080");
  });

  it("reads JSON outputs appended to one file, each with its own lines", () => {
    const cm = fixture("configmap-ip-masq-agent.json");
    const list = fixture("pods_list_a.json");
    const text = `${cm}\n${list}`;
    const { value, diagnostics } = readKubeObjects(text, "both.json");
    assert.deepEqual(diagnostics, []);
    assert.equal(value[0]?.kind, "ConfigMap");
    assert.ok(value.length > 2);
    const pod = value[1]!;
    const ref = pod.locate(["metadata", "name"])!;
    assert.ok(ref.line > cm.split("\n").length);
    assert.equal(lineOf(text, ref.line)?.trim(), `"name": "${pod.name}",`);
  });

  it("says where broken JSON goes wrong", () => {
    const text = '{\n  "apiVersion": "v1",\n  "kind": "Pod",\n  "metadata": {"name": "x"]\n}\n';
    const { value, diagnostics } = readKubeObjects(text, "bad.json");
    assert.deepEqual(value, []);
    assert.equal(diagnostics.length, 1);
    assert.equal(diagnostics[0]?.code, "JSON_SYNTAX");
    assert.deepEqual([diagnostics[0]?.source?.line, diagnostics[0]?.source?.col], [4, 27]);
    assert.match(diagnostics[0]!.message, /expected JSON as kubectl get -o json prints it/);
  });

  it("gives typed-list items their kind when the API omitted it", () => {
    const text =
      '{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"p","namespace":"n"}}]}';
    const { value, diagnostics } = readKubeObjects(text, "raw.json");
    assert.deepEqual(diagnostics, []);
    assert.deepEqual([value[0]?.kind, value[0]?.apiVersion, value[0]?.name], ["Pod", "v1", "p"]);
  });
});
