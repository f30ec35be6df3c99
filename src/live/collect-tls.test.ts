import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { kubeconfigFor, startFakeApi } from "../../test/k8s-api/server.ts";
import { smallCluster, smallClusterExec } from "../../test/k8s-api/small-cluster.ts";
import { memoryIo } from "../cli/io.ts";
import { openCluster } from "../k8s/cluster.ts";
import { collectSnapshot } from "./collect.ts";
import { memoryWriter } from "./collect-writer.ts";

// A throw-away CA, an API server certificate for 127.0.0.1 and a client certificate, made with
// openssl for this run: real clusters speak TLS and many authenticate users by certificate.
const dir = mkdtempSync(join(tmpdir(), "podpath-tls-test-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
function makePki(prefix: string): {
  ca: string;
  key: string;
  cert: string;
  clientKey: string;
  clientCert: string;
} {
  const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  ssl(
    "req",
    "-x509",
    ...EC,
    "-days",
    "2",
    "-subj",
    `/CN=${prefix}-ca`,
    "-keyout",
    `${prefix}-ca.key`,
    "-out",
    `${prefix}-ca.crt`,
  );
  /** A key and a certificate signed by the CA, for `name`. */
  const issue = (name: string, subject: string, extensions: string) => {
    writeFileSync(join(dir, `${name}.ext`), extensions);
    ssl(
      "req",
      ...EC,
      "-subj",
      subject,
      "-keyout",
      `${prefix}-${name}.key`,
      "-out",
      `${prefix}-${name}.csr`,
    );
    ssl(
      "x509",
      "-req",
      "-in",
      `${prefix}-${name}.csr`,
      "-CA",
      `${prefix}-ca.crt`,
      "-CAkey",
      `${prefix}-ca.key`,
      "-CAcreateserial",
      "-days",
      "2",
      "-extfile",
      `${name}.ext`,
      "-out",
      `${prefix}-${name}.crt`,
    );
  };
  issue(
    "server",
    "/CN=kube-apiserver",
    "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
  );
  issue("client", "/O=system:masters/CN=podpath-test-user", "extendedKeyUsage=clientAuth\n");
  const r = (f: string) => readFileSync(join(dir, f), "utf8");
  return {
    ca: r(`${prefix}-ca.crt`),
    key: r(`${prefix}-server.key`),
    cert: r(`${prefix}-server.crt`),
    clientKey: r(`${prefix}-client.key`),
    clientCert: r(`${prefix}-client.crt`),
  };
}
const b64 = (s: string) => Buffer.from(s).toString("base64");

describe("collect over TLS with a client certificate", () => {
  it("verifies the server against the kubeconfig's CA and presents the client certificate, exec included", async () => {
    const pki = makePki("good");
    const api = await startFakeApi(smallCluster(), {
      gkeCrds: true,
      exec: smallClusterExec,
      tls: { key: pki.key, cert: `${pki.cert}${pki.ca}`, ca: pki.ca },
    });
    try {
      const kc = join(dir, "kubeconfig");
      writeFileSync(
        kc,
        kubeconfigFor(api.url, {
          caData: b64(pki.ca),
          certData: b64(pki.clientCert),
          keyData: b64(pki.clientKey),
        }),
      );
      const w = memoryWriter();
      const rep = await collectSnapshot(await openCluster({ kubeconfig: kc, env: {} }), w, {
        pods: [{ namespace: "vpn", name: "openvpn-6f7d8c9b5-x2x7p" }],
        nodeState: true,
        pollMs: 5,
      });
      assert.deepEqual(rep.failures, []);
      assert.ok(api.requests.some((q) => q.resource === "pods/exec"));
      for (const q of api.requests)
        assert.equal(q.clientCert, "podpath-test-user", `${q.method} ${q.path}`);
      const keyBody = pki.clientKey.split("\n")[1]!;
      for (const [f, data] of w.files) assert.ok(!data.toString("latin1").includes(keyBody), f);
    } finally {
      await api.close();
    }
  });

  it("a server certificate the kubeconfig's CA did not sign is one sentence, exit 3", async () => {
    const good = makePki("srv");
    const other = makePki("other");
    const api = await startFakeApi(smallCluster(), {
      tls: { key: good.key, cert: good.cert, ca: good.ca },
    });
    try {
      const kc = join(dir, "kubeconfig-wrong-ca");
      writeFileSync(kc, kubeconfigFor(api.url, { caData: b64(other.ca), token: "t" }));
      const { run } = await import("../cli/commands/collect.ts");
      const io = memoryIo();
      const code = await run([], { out: join(dir, "snap-wrong-ca"), kubeconfig: kc }, io);
      assert.equal(code, 3);
      assert.match(
        io.stderr(),
        /^podpath: Unreachable: the API server https:\/\/127\.0\.0\.1:\d+ of context "test-ctx" cannot be reached \((UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT)/,
      );
      assert.equal(io.stderr().trim().split("\n").length, 1, io.stderr());
    } finally {
      await api.close();
    }
  });
});
