import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import * as models from "@kubernetes/client-node";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { modelNameFor, strictDecoding } from "./strict-decoding.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");

function objectsOf(text: string, file = "m.yaml") {
  const r = readKubeObjects(text, file);
  assert.deepEqual(r.diagnostics, []);
  return r.value;
}

describe("strict decoding, as the API server answers", () => {
  for (const f of readdirSync(FIXTURES).filter((x) => x.endsWith(".yaml"))) {
    it(`${f}: the server's own message`, () => {
      const [obj] = objectsOf(readFileSync(join(FIXTURES, f), "utf8"), f);
      const expected = readFileSync(join(FIXTURES, f.replace(/\.yaml$/, ".expected")), "utf8");
      const r = strictDecoding(models, obj!);
      assert.equal(r.state, "rejected");
      assert.equal(r.state === "rejected" && r.message, expected);
    });
  }

  // recorded from the real kube-apiserver (test/components/strict-decoding-types.test.ts)
  const typeCases = JSON.parse(readFileSync(join(FIXTURES, "type-errors.json"), "utf8")) as {
    name: string;
    manifest: string;
    message: string;
  }[];
  for (const c of typeCases) {
    it(`type-errors.json, ${c.name}: the server's own message`, () => {
      // the reader warns of a label that is no string, and keeps the object as written
      const [obj] = readKubeObjects(c.manifest, "m.yaml").value;
      const r = strictDecoding(models, obj!);
      assert.equal(r.state === "rejected" ? r.message : r.state, c.message);
    });
  }

  it("a type error: the server reports it, not the unknown fields, and podpath cites its line", () => {
    const c = typeCases.find((x) => x.name === "args as a string, and an unknown field")!;
    const [obj] = objectsOf(c.manifest, "web.yaml");
    const r = strictDecoding(models, obj!);
    assert.equal(r.state, "rejected");
    if (r.state !== "rejected") return;
    assert.deepEqual(r.fields, []);
    const line = c.manifest.split("\n").findIndex((l) => l.includes("args: --verbose")) + 1;
    assert.deepEqual(
      [r.typeError?.path, r.typeError?.source?.file, r.typeError?.source?.line],
      ["spec.containers[0].args", "web.yaml", line],
    );
    assert.equal(
      r.typeError?.detail,
      "json: cannot unmarshal string into Go struct field Container.spec.containers.args of type []string",
    );
  });

  it("numbers are quantities where the Go type is one, and strings elsewhere are not numbers", () => {
    const [ok] = objectsOf(
      [
        "apiVersion: v1",
        "kind: Pod",
        "metadata: {name: p}",
        "spec:",
        "  overhead: {cpu: 0.25}",
        "  containers:",
        "  - name: c",
        "    image: i",
        "    resources: {limits: {cpu: 2, memory: 1Gi}, requests: {cpu: 500m}}",
        "  volumes: [{name: scratch, emptyDir: {sizeLimit: 1e9}}]",
      ].join("\n"),
    );
    assert.deepEqual(strictDecoding(models, ok!), { state: "ok" });
  });

  it("cites the line of each unknown field", () => {
    const text = readFileSync(join(FIXTURES, "sloth-tolerations.yaml"), "utf8");
    const [obj] = objectsOf(text, "sloth.yaml");
    const r = strictDecoding(models, obj!);
    assert.equal(r.state, "rejected");
    if (r.state !== "rejected") return;
    const line = text.split("\n").findIndex((l) => l.includes("tolerations:")) + 1;
    assert.deepEqual(
      r.fields.map((x) => [x.path, x.source?.file, x.source?.line]),
      [["spec.template.spec.containers[0].tolerations", "sloth.yaml", line]],
    );
  });

  it("accepts a well-formed object, maps with any keys, and fields of every nesting", () => {
    const [obj] = objectsOf(
      [
        "apiVersion: v1",
        "kind: Pod",
        "metadata: {name: p, labels: {any-key/x: y}, annotations: {a: b}}",
        "spec:",
        "  securityContext: {sysctls: [{name: net.ipv4.ip_forward, value: '1'}]}",
        "  containers:",
        "  - name: c",
        "    image: i",
        "    resources: {limits: {cpu: 1, memory: 1Gi}}",
        "    ports: [{containerPort: 80}]",
        "status: {podIP: 10.0.0.1}",
      ].join("\n"),
    );
    assert.deepEqual(strictDecoding(models, obj!), { state: "ok" });
  });

  it("orders the fields as the server meets them: sorted keys, depth first", () => {
    const [obj] = objectsOf(
      [
        "apiVersion: v1",
        "kind: Pod",
        "metadata: {name: p}",
        "zeta: 1",
        "spec:",
        "  sysctls: []",
        "  containers: [{name: c, image: i, b: 1, a: 2}]",
      ].join("\n"),
    );
    const r = strictDecoding(models, obj!);
    assert.deepEqual(r.state === "rejected" && r.fields.map((f) => f.path), [
      "spec.containers[0].a",
      "spec.containers[0].b",
      "spec.sysctls",
      "zeta",
    ]);
  });

  it("knows fields the models know: a sidecar's restartPolicy on an init container (1.28+)", () => {
    const [obj] = objectsOf(
      [
        "apiVersion: v1",
        "kind: Pod",
        "metadata: {name: p}",
        "spec:",
        "  initContainers: [{name: s, image: i, restartPolicy: Always}]",
        "  containers: [{name: c, image: i}]",
      ].join("\n"),
    );
    assert.deepEqual(strictDecoding(models, obj!), { state: "ok" });
  });

  it("names the model by group and version, and leaves custom resources unchecked", () => {
    assert.equal(modelNameFor(models, "apps/v1", "Deployment"), "V1Deployment");
    assert.equal(modelNameFor(models, "v1", "Event"), "CoreV1Event");
    assert.equal(modelNameFor(models, "events.k8s.io/v1", "Event"), "EventsV1Event");
    assert.equal(modelNameFor(models, "networking.k8s.io/v1", "NetworkPolicy"), "V1NetworkPolicy");
    const [cr] = objectsOf(
      "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {x: 1}",
    );
    assert.equal(strictDecoding(models, cr!).state, "unchecked");
  });
});
