/**
 * @module test/components/podpath-cli — runs the built podpath CLI (dist/, made by
 * `npx tsc -p tsconfig.build.json`) against a test cluster, the way a user would: as its own
 * process, with KUBECONFIG set and colour off. Used by the real-node component tests.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";

const CLI = join(import.meta.dirname, "../../dist/cli/main.js");

export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `podpath <args>` with KUBECONFIG=`kubeconfig`; killed after `timeoutMs`. */
export function runPodpath(
  args: readonly string[],
  kubeconfig: string,
  timeoutMs: number,
): Promise<CliRun> {
  return new Promise((resolve) => {
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", KUBECONFIG: kubeconfig };
    const child = spawn(process.execPath, [CLI, ...args], { env, timeout: timeoutMs });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}
