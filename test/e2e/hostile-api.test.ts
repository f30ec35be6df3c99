/**
 * End-to-end: `podpath collect` (the built CLI) against hostile API servers on loopback. Whatever
 * the server does (endless continue tokens, a 1 GB answer, an answer that never ends, malformed
 * JSON, a Status message full of terminal escapes), collect ends with exit 3 (a live operation
 * failed), one sentence per failure, no raw control character and no stack trace; never exit 1,
 * which means findings.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const CLI = join(import.meta.dirname, "../../dist/cli/main.js");
const scratch = mkdtempSync(join(tmpdir(), "podpath-hostile-e2e-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let seq = 0;

const emptyList = (res: ServerResponse) =>
  res.end(JSON.stringify({ kind: "List", apiVersion: "v1", metadata: {}, items: [] }));

/** A server whose node list is hostile; every other path answers an empty list (or 404). */
async function hostile(nodes: (req: IncomingMessage, res: ServerResponse) => void) {
  const server = createServer((req, res) => {
    if (req.url?.startsWith("/api/v1/nodes")) return nodes(req, res);
    if (req.url?.startsWith("/apis/") && !req.url.includes("/namespaces/")) {
      res.writeHead(404);
      return res.end();
    }
    if (req.url?.includes("/configmaps/")) {
      res.writeHead(404, { "Content-Type": "application/json" });
      return res.end(JSON.stringify({ kind: "Status", reason: "NotFound", message: "not found" }));
    }
    emptyList(res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const kc = join(scratch, `kc-${++seq}`);
  writeFileSync(
    kc,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: c",
      "  cluster:",
      `    server: http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      "contexts:",
      "- name: hostile",
      "  context: {cluster: c, user: u}",
      "current-context: hostile",
      "users:",
      "- name: u",
      "  user: {}",
      "",
    ].join("\n"),
  );
  return kc;
}

function collect(kc: string, extra: readonly string[] = []) {
  const child = spawn(
    process.execPath,
    [CLI, "collect", "--out", join(scratch, `out-${++seq}`), "--kubeconfig", kc, ...extra],
    { env: { ...process.env, NO_COLOR: "1" } },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => {
    stdout += d;
  });
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((r) =>
    child.on("close", (code) => r({ code, stdout, stderr })),
  );
}

function failsCleanly(r: { code: number | null; stderr: string }, why: RegExp) {
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, why);
  assert.doesNotMatch(r.stderr, /\n\s+at |internal error/);
  // no raw control character reaches the terminal
  assert.doesNotMatch(r.stderr.replaceAll("\n", ""), /[\u0000-\u001f\u007f-\u009f]/);
}

describe("collect against a hostile API server", () => {
  it("endless continue tokens: stops after the page cap, exit 3", async () => {
    let n = 0;
    const kc = await hostile((_q, res) =>
      res.end(JSON.stringify({ kind: "NodeList", metadata: { continue: `c${++n}` }, items: [] })),
    );
    const r = await collect(kc);
    failsCleanly(r, /list nodes: .*past 2000 pages of 500 \(continue tokens without end\)/);
    assert.equal(n, 2000);
  });

  it("a 1 GB answer: refused at the size limit, exit 3", async () => {
    const kc = await hostile((_q, res) => {
      res.writeHead(200, { "Content-Length": String(1024 ** 3) });
      res.write('{"kind":"NodeList","items":[');
    });
    failsCleanly(await collect(kc), /larger than the limit of 256 MiB \(1024 MiB announced\)/);
  });

  it("an answer that never ends: the request deadline ends it, exit 3", async () => {
    const kc = await hostile((_q, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write('{"kind":"NodeList","items":[');
      const t = setInterval(() => res.write(" "), 50);
      res.on("close", () => clearInterval(t));
    });
    failsCleanly(
      await collect(kc, ["--request-timeout", "1s"]),
      /Timeout: the API server of context "hostile" did not answer list nodes in time \(no complete answer in 1000 ms\)/,
    );
  });

  it("malformed JSON: one failure saying so, exit 3", async () => {
    const kc = await hostile((_q, res) => res.end('{"kind":"NodeList","items":[{"metadata":'));
    failsCleanly(await collect(kc), /list nodes: .*the server's answer is not JSON/);
  });

  it("a Status full of terminal escapes is shown escaped, exit 3", async () => {
    const kc = await hostile((_q, res) => {
      res.writeHead(403, { "Content-Type": "application/json" });
      res.end(
        JSON.stringify({
          kind: "Status",
          reason: "Forbidden",
          message: "nodes is forbidden\u001b]0;pwned\u0007\u001b[2J\u001b[1;1HAll good\u009b0m",
        }),
      );
    });
    const r = await collect(kc);
    failsCleanly(r, /forbidden\\x1b\]0;pwned\\x07\\x1b\[2J\\x1b\[1;1HAll good\\x9b0m/);
  });
});
