/**
 * @module test/components/component-guard — where the component tests find the real Kubernetes
 * binaries that scripts/build-components.sh builds (.components/, or COMPONENTS_DIR), and whether a
 * test may run: in CI a binary that should have been built and is missing fails the test; a
 * component the Go module proxy refuses (recorded by the build script in `<name>.unavailable`)
 * is skipped with that recorded reason; locally a missing binary skips, naming the build script.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { kernelSkip } from "../../src/lab/kernel-guard.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The folder the build script writes the binaries to. */
export function componentsDir(): string {
  return process.env["COMPONENTS_DIR"] || join(ROOT, ".components");
}

/** The path of one built component binary, e.g. `componentPath("ip-masq-agent")`. */
export function componentPath(name: string): string {
  return join(componentsDir(), name);
}

/**
 * For `describe(name, { skip: componentSkip("kube-proxy") }, …)`: false when the binary is built
 * and the kernel lab can run; otherwise a skip reason, or (in CI, for a binary the build script
 * should have built) an error that fails the run.
 */
export function componentSkip(name: string, opts: { kernel?: boolean } = {}): false | string {
  if (opts.kernel !== false) {
    const k = kernelSkip();
    if (k !== false) return k;
  }
  const bin = componentPath(name);
  if (existsSync(bin)) return false;
  const unavailable = `${bin}.unavailable`;
  if (existsSync(unavailable)) {
    return `${name} could not be built: ${readFileSync(unavailable, "utf8").trim()}`;
  }
  const hint = `${bin} is not built: run scripts/build-components.sh`;
  if (process.env["CI"]) throw new Error(`component tests must run in CI, but ${hint}`);
  return `component test skipped locally: ${hint}`;
}
