/**
 * @module iptables/test-helpers/iptables-netns — set-up shared by the tests that load rules with the
 * real iptables tools: which iptables variants are installed, and one throw-away network namespace
 * per suite (created before its tests, removed after them).
 */
import { execFileSync } from "node:child_process";
import { after, before } from "node:test";
import { createLab, type Lab, type Namespace } from "../../lab/netns.ts";

/** Is `cmd` on the PATH? */
export function hasCommand(cmd: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** The iptables variants whose iptables-restore is installed. */
export function installedVariants(): ("nft" | "legacy")[] {
  return (["nft", "legacy"] as const).filter((v) => hasCommand(`iptables-${v}-restore`));
}

/**
 * Registers, in the calling `describe`, hooks that create a lab with `prefix` and one namespace
 * named "ipt" before the suite's tests and destroy the lab after them. `ns` is set once the
 * before hook has run.
 *
 * @example
 * const suite = iptablesNamespace("ppl");
 * it("loads", async () => { await suite.ns.exec(["iptables-nft-restore"], { input }); });
 */
export function iptablesNamespace(prefix: string): { readonly ns: Namespace } {
  let lab: Lab | undefined;
  let ns: Namespace | undefined;
  before(async () => {
    lab = await createLab({ prefix });
    ns = await lab.addNamespace("ipt");
  });
  after(async () => {
    await lab?.destroy();
  });
  return {
    get ns(): Namespace {
      if (ns === undefined) throw new Error("the namespace is made in the suite's before hook");
      return ns;
    },
  };
}

const XTABLES = /^ip6?tables(-legacy|-nft)?(-restore)?$/;

/**
 * `argv` with `-w` (wait for the xtables lock) when it runs iptables, ip6tables, their -legacy and
 * -nft forms or their -restore, and has no `-w` yet; other commands as they are. The legacy
 * backend's lock is one file (/run/xtables.lock) for every namespace, so tests running at once
 * share it; iptables releases without -w may give up at once ("Another app is currently holding
 * the xtables lock") instead of waiting for the other test's short hold.
 */
export function waitingForXtablesLock(argv: readonly string[]): string[] {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || !XTABLES.test(cmd) || rest.some((a) => a === "-w" || a === "--wait"))
    return [...argv];
  return [cmd, "-w", ...rest];
}
