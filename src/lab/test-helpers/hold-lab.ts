/**
 * @module lab/test-helpers/hold-lab — test helper process: builds a small lab (two namespaces, a veth,
 * an address, a nat rule, a sleeping process), prints its id and namespace names as JSON on one
 * line, then waits to be killed. Used to test cleanup after SIGTERM and after SIGKILL.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLab, labTempDir } from "../netns.ts";

const lab = await createLab();
const a = await lab.addNamespace("a");
const b = await lab.addNamespace("b");
await lab.link(a, "eth0", b, "eth0");
await a.exec(["ip", "addr", "add", "10.99.0.1/24", "dev", "eth0"]);
await a.exec(["iptables", "-t", "nat", "-A", "POSTROUTING", "-j", "MASQUERADE"]);
const sleeper = b.spawn(["sleep", "600"]);
// a private key, as the VPN lab keeps its PKI
const temp = labTempDir(lab, "keys");
writeFileSync(join(temp, "server.key"), "-----BEGIN PRIVATE KEY-----\n");
process.stdout.write(
  `${JSON.stringify({ id: lab.id, namespaces: [a.name, b.name], sleeper: sleeper.pid, temp })}\n`,
);
setInterval(() => {}, 1000);
