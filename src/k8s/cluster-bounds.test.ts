/**
 * @module k8s/cluster-bounds.test — the client against hostile API servers (plain node:http on
 * loopback): endless continue tokens, a 1 GB answer streamed slowly or announced, an answer that
 * never ends, malformed JSON, a Status whose message carries terminal escapes, a spent time
 * budget; and the refusal to send credentials over plain http.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { explainClusterError } from "../live/collect-errors.ts";
import { listAll } from "../live/collect-objects.ts";
import {
  ClusterError,
  type ClusterSource,
  escapeControl,
  type OpenClusterOptions,
  openCluster,
  RESOURCES,
} from "./cluster.ts";

const scratch = mkdtempSync(join(tmpdir(), "podpath-bounds-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let seq = 0;

function kubeconfig(url: string, user: string, skipTlsVerify = false): string {
  const file = join(scratch, `kc-${++seq}`);
  writeFileSync(
    file,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: c",
      "  cluster:",
      `    server: ${url}`,
      ...(skipTlsVerify ? ["    insecure-skip-tls-verify: true"] : []),
      "contexts:",
      "- name: hostile",
      "  context: {cluster: c, user: u}",
      "current-context: hostile",
      "users:",
      "- name: u",
      `  user: ${user}`,
      "",
    ].join("\n"),
  );
  return file;
}

interface Hostile {
  readonly url: string;
  readonly requests: IncomingMessage[];
  /** Resolves when the client has closed the connection of the request in progress. */
  readonly closed: Promise<void>;
  close(): Promise<void>;
}

async function hostile(answer: (req: IncomingMessage, res: ServerResponse) => void) {
  const requests: IncomingMessage[] = [];
  let onClose: () => void = () => {};
  const closed = new Promise<void>((r) => {
    onClose = r;
  });
  const server = createServer((req, res) => {
    requests.push(req);
    res.on("close", () => onClose());
    answer(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const h: Hostile = {
    url,
    requests,
    closed,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  after(() => h.close());
  return h;
}

async function open(h: Hostile, extra: Partial<OpenClusterOptions> = {}): Promise<ClusterSource> {
  return await openCluster({
    kubeconfig: kubeconfig(h.url, "{}"),
    env: {},
    ...extra,
  });
}

async function failure(p: Promise<unknown>): Promise<ClusterError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ClusterError, String(e));
    return e;
  }
  assert.fail("expected a ClusterError");
}

const list = (items: unknown[], cont?: string) =>
  JSON.stringify({
    kind: "NodeList",
    apiVersion: "v1",
    metadata: cont === undefined ? {} : { continue: cont },
    items,
  });

describe("a hostile API server", () => {
  it("endless continue tokens stop at the page cap, a repeated token at once", async () => {
    let n = 0;
    const h = await hostile((_q, res) => res.end(list([], `t${++n}`)));
    const src = await open(h);
    const e = await failure(listAll(src, RESOURCES.nodes, { maxPages: 25 }));
    assert.equal(h.requests.length, 25);
    assert.match(e.apiMessage ?? "", /past 25 pages of 500 \(continue tokens without end\)/);
    const same = await hostile((_q, res) => res.end(list([], "again")));
    const e2 = await failure(listAll(await open(same), RESOURCES.nodes, {}));
    assert.equal(same.requests.length, 2);
    assert.match(e2.apiMessage ?? "", /same continue token twice/);
  });

  it("a 1 GB answer streamed slowly is cut off at the size limit, the connection closed", async () => {
    const chunk = Buffer.alloc(64 * 1024, "a");
    let sent = 0;
    const h = await hostile((_q, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write('{"kind":"NodeList","items":[{"x":"');
      const t = setInterval(() => {
        if (res.destroyed || sent >= 1024 ** 3) return clearInterval(t);
        sent += chunk.length;
        res.write(chunk);
      }, 2);
      res.on("close", () => clearInterval(t));
    });
    const src = await open(h, { maxResponseBytes: 1024 * 1024 });
    const e = await failure(src.list(RESOURCES.nodes));
    assert.match(e.apiMessage ?? "", /larger than the limit of 1 MiB \(cut off at [\d.]+ MiB\)/);
    await h.closed;
    assert.ok(sent < 4 * 1024 * 1024, `kept sending ${sent} bytes`);
  });

  it("an answer that announces 1 GB is refused before its body is read", async () => {
    const h = await hostile((_q, res) => {
      res.writeHead(200, { "Content-Length": String(1024 ** 3) });
      res.write("{");
    });
    const e = await failure((await open(h)).list(RESOURCES.nodes));
    assert.match(e.apiMessage ?? "", /larger than the limit of 256 MiB \(1024 MiB announced\)/);
  });

  it("an answer that never ends fails at the request deadline, not at the first byte", async () => {
    const h = await hostile((_q, res) => {
      res.writeHead(200);
      const t = setInterval(() => res.write(" "), 20);
      res.on("close", () => clearInterval(t));
    });
    const e = await failure((await open(h, { requestTimeoutMs: 400 })).list(RESOURCES.nodes));
    assert.equal(e.reason, "Timeout");
    assert.match(e.apiMessage ?? "", /no complete answer in 400 ms/);
  });

  it("no call starts once the time budget is spent", async () => {
    const h = await hostile((_q, res) => res.end(list([])));
    const e = await failure((await open(h, { budgetMs: 0 })).list(RESOURCES.nodes));
    assert.equal(e.reason, "Timeout");
    assert.match(e.apiMessage ?? "", /time budget of 0 s for API calls is spent/);
    assert.equal(h.requests.length, 0);
  });

  it("malformed JSON is one failure saying so", async () => {
    const h = await hostile((_q, res) => res.end('{"kind":"NodeList","items":[{'));
    const e = await failure((await open(h)).list(RESOURCES.nodes));
    assert.match(e.apiMessage ?? "", /not JSON/);
  });

  it("a Status carrying terminal escapes is shown escaped, on one line", async () => {
    const evil = "nodes is forbidden\u001b]0;owned\u0007\u001b[2J\r\nFAKE: all good\u009b31m";
    const h = await hostile((_q, res) => {
      res.writeHead(403, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", reason: "Forbidden", message: evil }));
    });
    const e = await failure((await open(h)).list(RESOURCES.nodes));
    const said = explainClusterError(e, { contextName: "hostile" });
    assert.doesNotMatch(said, /[\u0000-\u001f\u007f-\u009f]/);
    assert.match(said, /forbidden\\x1b\]0;owned\\x07\\x1b\[2J FAKE: all good\\x9b31m/);
    assert.equal(escapeControl("tab\there"), "tab\\x09here");
  });
});

describe("credentials over plain http", () => {
  it("refuses a token (and a password) over http:// even with insecure-skip-tls-verify", async () => {
    const h = await hostile((_q, res) => res.end(list([])));
    for (const user of ["{token: s3cret}", "{username: u, password: s3cret}"]) {
      const kc = kubeconfig(h.url, user, true);
      const e = await failure(openCluster({ kubeconfig: kc, env: {} }));
      assert.equal(e.reason, "ContextNotFound");
      assert.match(
        e.apiMessage ?? "",
        /plain http:\/\/ server .* carries a (bearer token|password)/,
      );
      assert.match(e.apiMessage ?? "", /--allow-plaintext-credentials/);
    }
    assert.equal(h.requests.length, 0);
  });

  it("sends them only when allowed, and says so", async () => {
    const h = await hostile((_q, res) => res.end(list([])));
    const src = await openCluster({
      kubeconfig: kubeconfig(h.url, "{token: s3cret}"),
      env: {},
      allowPlaintextCredentials: true,
    });
    assert.match(src.warnings?.[0] ?? "", /a bearer token is sent unencrypted to http:\/\/127/);
    await src.list(RESOURCES.nodes);
    assert.equal(h.requests[0]?.headers.authorization, "Bearer s3cret");
  });

  it("an anonymous context over http (kubectl proxy) needs no flag and sends nothing", async () => {
    const h = await hostile((_q, res) => res.end(list([])));
    const src = await open(h);
    assert.deepEqual(src.warnings, []);
    await src.list(RESOURCES.nodes);
    assert.equal(h.requests[0]?.headers.authorization, undefined);
  });

  it("insecure-skip-tls-verify over https is allowed with a warning", async () => {
    const kc = kubeconfig("https://127.0.0.1:1", "{token: s3cret}", true);
    const src = await openCluster({ kubeconfig: kc, env: {} });
    assert.match(
      src.warnings?.[0] ?? "",
      /insecure-skip-tls-verify: the API server's certificate is not checked/,
    );
  });
});
