/**
 * @module test/components/api-bridge — the test API server, reached from inside a lab namespace:
 * it listens on the root namespace's loopback, which a namespace cannot reach, so a Unix socket
 * (a path on the shared filesystem) carries each connection, from a forwarder on the namespace's
 * own loopback to the API server's port. Used by the kube-proxy and real-node component tests.
 */
import { writeFileSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";
import type { Namespace } from "../../src/lab/netns.ts";

/** Pipes each connection accepted by `server` to a new connection made by `open`. */
function pipeEach(server: Server, open: () => ReturnType<typeof connect>): Server {
  server.on("connection", (c) => {
    const u = open();
    c.pipe(u);
    u.pipe(c);
    u.on("error", () => c.destroy());
    c.on("error", () => u.destroy());
  });
  return server;
}

const INNER_FORWARDER = `const net = require("node:net");
const [port, sock] = process.argv.slice(1);
net.createServer((c) => {
  const u = net.connect(sock);
  c.pipe(u); u.pipe(c);
  u.on("error", () => c.destroy()); c.on("error", () => u.destroy());
}).listen(Number(port), "127.0.0.1", () => console.log("listening"));`;

/**
 * Makes `https://127.0.0.1:innerPort` inside `ns` reach the API server at `apiPort` on the root
 * namespace's loopback, through the Unix socket `sock`; resolves once both ends listen. The
 * forwarder in `ns` ends with the namespace; `close()` ends the outer end.
 */
export async function reachApiFrom(
  ns: Namespace,
  apiPort: number,
  sock: string,
  innerPort: number,
): Promise<{ close(): void }> {
  const outer = pipeEach(createServer(), () => connect(apiPort, "127.0.0.1"));
  await new Promise<void>((r) => outer.listen(sock, r));
  const fwd = ns.spawn([process.execPath, "-e", INNER_FORWARDER, String(innerPort), sock]);
  await new Promise<void>((resolve, reject) => {
    fwd.stdout?.on("data", (d: Buffer) => (d.toString().includes("listening") ? resolve() : 0));
    fwd.once("exit", (code) => reject(new Error(`API forwarder exited ${code}`)));
  });
  return { close: () => outer.close() };
}

/**
 * Writes a kubeconfig (JSON) for a client inside the namespace: the API server at the forwarder's
 * `https://127.0.0.1:<innerPort>` (see reachApiFrom), trusted by the cluster's CA, as its admin.
 */
export function writeInnerKubeconfig(
  file: string,
  cluster: { readonly caFile: string; readonly adminToken: string },
  innerPort: number,
): void {
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name: "c",
          cluster: {
            server: `https://127.0.0.1:${innerPort}`,
            "certificate-authority": cluster.caFile,
          },
        },
      ],
      users: [{ name: "u", user: { token: cluster.adminToken } }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
}
