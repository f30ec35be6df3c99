/**
 * Regenerates examples/<name>/ from the end-to-end variants that name an example
 * (test/e2e/lab-variants.ts), by running `podpath lab run` on the real kernel, so the embedded
 * examples are real artifacts. Needs root. Usage: `node --import tsx scripts/make-examples.ts [name…]`.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LAB_VARIANTS } from "../test/e2e/lab-variants.ts";

const root = join(import.meta.dirname, "..");
/** The tools whose real output each scenario's snapshot holds. */
const TOOLS = {
  masquerade: "iptables-save, ip route, ip addr, sysctl, conntrack -L, tcpdump -w, ping, nc",
  vpn: "an OpenVPN 2.6 server and client, sysctl, iptables-save, ip addr, ip route, tcpdump -w, ping, curl, dig",
  "aws-vpc-cni": "iptables-save, ip route, ip addr, sysctl, conntrack -L, tcpdump -w, ping, nc",
} as const;
const wanted = process.argv.slice(2);
const variants = LAB_VARIANTS.filter(
  (v) => v.example !== undefined && (wanted.length === 0 || wanted.includes(v.example)),
);
if (variants.length === 0) {
  console.error(`no example named ${wanted.join(", ")}`);
  process.exit(2);
}
for (const v of variants) {
  const example = v.example!;
  const tmp = join(mkdtempSync(join(tmpdir(), "podpath-example-")), example);
  const argv = ["lab", "run", v.scenario, ...v.args, "--out", tmp];
  console.error(`podpath ${argv.slice(0, -2).join(" ")} → examples/${example}`);
  const r = spawnSync(
    process.execPath,
    ["--import", "tsx", join(root, "src/cli/main.ts"), ...argv],
    {
      cwd: root,
      stdio: ["ignore", "inherit", "inherit"],
    },
  );
  if (r.status !== 0) {
    console.error(`lab run failed (exit ${r.status})`);
    process.exit(r.status ?? 1);
  }
  const dest = join(root, "examples", example);
  const kept = join(dest, "README.md");
  // a README written by hand (it says what podpath answers) is kept; the others are made here
  if (v.readme === "kept" && existsSync(kept)) copyFileSync(kept, join(tmp, "README.md"));
  else
    writeFileSync(
      join(tmp, "README.md"),
      `# ${example}\n\n${v.description}\n\nGenerated on a real kernel by \`scripts/make-examples.ts\` with:\n\n` +
        `    podpath lab run ${v.scenario}${v.args.map((a) => ` ${a}`).join("")} --out examples/${example}\n\n` +
        "Every file is the real output of the command that produced it, in the replica's network\n" +
        `namespaces (${TOOLS[v.scenario]});\n` +
        "cluster/ holds the Kubernetes objects describing the replica. Try:\n\n" +
        `    podpath diagnose examples/${example}\n` +
        (v.tryAlso ?? []).map((c) => `    ${c}\n`).join(""),
    );
  rmSync(dest, { recursive: true, force: true });
  renameSync(tmp, dest);
}
