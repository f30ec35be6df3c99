/**
 * @module lab/scenarios/index — the registry of lab scenarios (`podpath lab run|up <name>`).
 *
 * A scenario is a module exporting a `Scenario`: a zod schema for its options and a `run`
 * function that builds the replica inside a lab it is given and, when `outDir` is set, runs the
 * probes, takes the captures and writes the snapshot there. It never creates or destroys the lab:
 * the caller does (`lab run` destroys it afterwards, `lab up` keeps it). To add one, write
 * `scenarios/<name>.ts` exporting `scenario` and add a loader line to SCENARIOS below.
 *
 * Options arrive as the CLI saw them: `--flag value` / `--flag=value` become `{ flag: "value" }`
 * (kebab-case kept), a bare `--flag` becomes `{ flag: true }`. The schema turns them into the
 * scenario's typed options; a zod error becomes a usage error (exit 2).
 */
import type { z } from "zod";
import type { Lab } from "../netns.ts";

export interface ScenarioContext {
  readonly lab: Lab;
  /** Snapshot folder to write (created if missing); undefined for `lab up` (build only). */
  readonly outDir: string | undefined;
  /** Progress lines for stderr. */
  readonly log: (line: string) => void;
  /** Aborted on SIGINT/SIGTERM: stop early; the caller tears the lab down. */
  readonly signal?: AbortSignal;
}

export interface ScenarioOutcome {
  /** Files written, relative to outDir. */
  readonly files: readonly string[];
  /** A few lines for the terminal: what was built and what the probes saw. */
  readonly summary: readonly string[];
}

export interface Scenario<O = unknown> {
  readonly name: string;
  /** One line for `--help`. */
  readonly description: string;
  readonly options: z.ZodType<O>;
  run(ctx: ScenarioContext, opts: O): Promise<ScenarioOutcome>;
}

/** Name → loader; loaders import lazily so one scenario's dependencies never load for another. */
export const SCENARIOS: Readonly<Record<string, () => Promise<Scenario<unknown>>>> = {
  "aws-vpc-cni": async () => (await import("./aws-vpc-cni.ts")).scenario as Scenario<unknown>,
  "bridge-cni": async () => (await import("./bridge-cni.ts")).scenario as Scenario<unknown>,
  calico: async () => (await import("./calico.ts")).scenario as Scenario<unknown>,
  cilium: async () => (await import("./cilium.ts")).scenario as Scenario<unknown>,
  filter: async () => (await import("./filter.ts")).scenario as Scenario<unknown>,
  flannel: async () => (await import("./flannel.ts")).scenario as Scenario<unknown>,
  ipsec: async () => (await import("./ipsec.ts")).scenario as Scenario<unknown>,
  kubenet: async () => (await import("./kubenet.ts")).scenario as Scenario<unknown>,
  masquerade: async () => (await import("./masquerade.ts")).scenario as Scenario<unknown>,
  service: async () => (await import("./service.ts")).scenario as Scenario<unknown>,
  vpn: async () => (await import("./vpn.ts")).scenario as Scenario<unknown>,
  wireguard: async () => (await import("./wireguard.ts")).scenario as Scenario<unknown>,
};

/** Parses `--flag value`, `--flag=value` and bare `--flag` into a record (values stay strings). */
export function parseScenarioArgs(argv: readonly string[]): {
  options: Record<string, string | true>;
  positional: string[];
} {
  const options: Record<string, string | true> = {};
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? "";
    if (!a.startsWith("--")) {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf("=");
    if (eq > 0) {
      options[a.slice(2, eq)] = a.slice(eq + 1);
      continue;
    }
    const next = argv[i + 1];
    if (next !== undefined && !next.startsWith("--")) {
      options[a.slice(2)] = next;
      i++;
    } else {
      options[a.slice(2)] = true;
    }
  }
  return { options, positional };
}
