/**
 * @module lab/kernel-guard — how kernel tests decide whether they may run: in CI they must run (a
 * missing privilege fails the test), locally they may skip when not root.
 */
import { labUnavailableReason } from "./netns.ts";

/**
 * For `describe(name, { skip: kernelSkip() }, …)`: false when the lab can run; a reason string
 * (skip) locally when it cannot; throws in CI (`process.env.CI`) when it cannot, so CI fails.
 */
export function kernelSkip(): false | string {
  const reason = labUnavailableReason();
  if (reason === undefined) return false;
  if (process.env["CI"]) throw new Error(`kernel tests must run in CI, but podpath lab ${reason}`);
  return `kernel test skipped locally: podpath lab ${reason}`;
}
