/**
 * @module lab/path-diff-tally — the count a whole-path differential run keeps (IPv4 or IPv6,
 * iptables or nftables): each flow's kernel verdict tested against podpath's outcomes (one must
 * allow it; an outcome with no test is undecided and allows anything), cases, decided ones,
 * later packets left out (with why), undecided reasons, and a failure report per disagreement
 * with the seed to reproduce it and the node's state; and the run's diagnostic lines.
 */
import type { PathOutcome } from "../path/path-types.ts";
import { kernelWords, podpathWords } from "./path-agreement.ts";
import type { PathFlow } from "./path-gen.ts";
import type { KernelPathVerdict } from "./path-verdict.ts";

/** podpath's outcome as a test of the kernel's words (undefined: undecided). */
export type OutcomeTest = (o: PathOutcome, f: PathFlow) => ((k: string) => boolean) | undefined;

/** What a failure report shows of the node besides the flow. */
export interface FailureContext {
  /** The seed's variable name prefix, e.g. `PODPATH_PATH_DIFF` (…_SEED, …_SETS). */
  readonly env: string;
  readonly seed: number;
  /** The `ip rule` listing's label and lines. */
  readonly ipRuleLabel: string;
  readonly ipRule: string;
  readonly routes: readonly string[];
  /** The rules' label and lines. */
  readonly rulesLabel: string;
  readonly rules: readonly string[];
}

export class PathDiffTally {
  total = 0;
  /** Cases that were later packets of established connections. */
  established = 0;
  decided = 0;
  readonly failures: string[] = [];
  /** Why later packets were left out (the kernel never held their connection established). */
  readonly notEstablished = new Map<string, number>();
  /** The undecided outcomes' reasons, numbers as N. */
  readonly undecidedWhy = new Map<string, number>();

  readonly #test: OutcomeTest;

  constructor(test: OutcomeTest) {
    this.#test = test;
  }

  /** Compares the kernel's verdict on each flow with podpath's outcomes for it. */
  compare(
    flows: readonly PathFlow[],
    observed: readonly KernelPathVerdict[],
    outcomes: (f: PathFlow, i: number) => readonly PathOutcome[],
    context: FailureContext,
  ): void {
    for (const [i, f] of flows.entries()) {
      const v = observed[i]!;
      if (v.kind === "not-established") {
        // the kernel never held the connection established: no established packet to compare
        this.notEstablished.set(v.why, (this.notEstablished.get(v.why) ?? 0) + 1);
        continue;
      }
      this.total++;
      if (f.established) this.established++;
      const k = kernelWords(v);
      const os = outcomes(f, i);
      const tests = os.map((o) => this.#test(o, f));
      if (tests.every((x) => x !== undefined)) this.decided++;
      for (const o of os) {
        if (o.verdict.kind !== "undecided") continue;
        const why = o.verdict.reason.replace(/\d+/g, "N");
        this.undecidedWhy.set(why, (this.undecidedWhy.get(why) ?? 0) + 1);
      }
      if (tests.some((x) => x === undefined || x(k))) continue;
      const c = context;
      this.failures.push(
        [
          `seed ${c.seed} (${c.env}_SEED=${c.seed} ${c.env}_SETS=1), flow ${JSON.stringify(f)}`,
          `  kernel:  ${k}`,
          `  podpath: ${podpathWords(os)}`,
          `  ${c.ipRuleLabel}:`,
          ...c.ipRule.split("\n").map((l) => `    ${l}`),
          "  routes:",
          ...c.routes.map((l) => `    ${l}`),
          `  ${c.rulesLabel}:`,
          ...c.rules.map((l) => `    ${l}`),
        ].join("\n"),
      );
    }
  }

  /** The later packets left out, by why. */
  leftOut(): string {
    return `later packets left out: ${[...this.notEstablished].map(([w, n]) => `${n}x ${w}`).join("; ") || "none"}`;
  }

  /** The most frequent undecided reasons. */
  undecided(): string {
    const why = [...this.undecidedWhy].sort((a, b) => b[1] - a[1]).slice(0, 5);
    return `undecided outcomes, most often: ${why.map(([w, n]) => `${n}x ${w}`).join("; ")}`;
  }
}
