/**
 * @module cli/commands/lab — `podpath lab run|up|down|replay`: wiring only. Scenarios live in
 * lab/scenarios/, the harness in lab/netns.ts, replay in lab/replay.ts. `lab run -o
 * json|md|html`: where the snapshot went and what the scenario saw, through report/.
 */
import { resolve } from "node:path";
import type { z } from "zod";
import { createLab, type Lab, labUnavailableReason, listLabs, removeLab } from "../../lab/netns.ts";
import { parseScenarioArgs, SCENARIOS, type Scenario } from "../../lab/scenarios/index.ts";
import { envelope } from "../../model/envelope.ts";
import { code, list, paragraph } from "../../report/document.ts";
import { isFormat, renderReport } from "../../report/render.ts";
import { claimOutFolder, type OutFolder, OutFolderError } from "../../snapshot/out-folder.ts";
import { EXIT, type Io, UsageError } from "../io.ts";
import { progressStream, withProgress } from "../progress.ts";

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const command = String(opts["_command"]);
  const reason = labUnavailableReason();
  if (reason !== undefined) {
    io.err(`podpath lab: ${reason}; run it as root on Linux\n`);
    return EXIT.usage;
  }
  switch (command) {
    case "run":
    case "up":
      return runScenario(command, opts, io);
    case "down":
      return down(args[0], opts["all"] === true, io);
    case "replay": {
      const { runReplay } = await import("./lab-replay.ts");
      return runReplay(opts, io);
    }
    default:
      throw new UsageError(`lab: unknown subcommand ${command}`);
  }
}

function formatZodError(e: z.ZodError): string {
  return e.issues
    .map((i) => {
      const key = i.path.map(String).join(".");
      if (i.code === "unrecognized_keys")
        return `unknown option(s): ${i.keys.map((k) => `--${k}`).join(", ")}`;
      return key ? `--${key}: ${i.message}` : i.message;
    })
    .join("; ");
}

async function loadScenario(
  extra: readonly string[],
): Promise<{ scenario: Scenario<unknown>; options: unknown }> {
  const { options, positional } = parseScenarioArgs(extra);
  const [name, ...rest] = positional;
  if (name === undefined) throw new UsageError("lab: name a scenario");
  const load = SCENARIOS[name];
  if (load === undefined) {
    throw new UsageError(
      `lab: unknown scenario ${JSON.stringify(name)}; expected one of ${Object.keys(SCENARIOS).join(", ")}`,
    );
  }
  if (rest.length > 0) throw new UsageError(`lab: unexpected argument ${JSON.stringify(rest[0])}`);
  const scenario = await load();
  const parsed = scenario.options.safeParse(options);
  if (!parsed.success) throw new UsageError(`lab ${name}: ${formatZodError(parsed.error)}`);
  return { scenario, options: parsed.data };
}

async function runScenario(
  command: "run" | "up",
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const extra = Array.isArray(opts["_args"]) ? (opts["_args"] as string[]) : [];
  const { scenario, options } = await loadScenario(extra);
  let outDir: string | undefined;
  let folder: OutFolder | undefined;
  if (command === "run") {
    outDir = resolve(io.cwd, String(opts["out"]));
    try {
      // created here (or found empty) and locked: a second run on it is refused
      folder = claimOutFolder(outDir, "--out");
    } catch (e) {
      if (e instanceof OutFolderError) throw new UsageError(`lab run: ${e.message}`);
      throw e;
    }
  }
  let lab: Lab;
  try {
    lab = await createLab();
  } catch (e) {
    folder?.release();
    io.err(`podpath lab: ${(e as Error).message}\n`);
    return EXIT.live;
  }
  const onAbort = () => void lab.destroy();
  io.signal.addEventListener("abort", onAbort, { once: true });
  try {
    const outcome = await withProgress(progressStream(io), `lab ${command} ${scenario.name}`, (p) =>
      scenario.run({ lab, outDir, log: (l) => p.say(`${l}\n`), signal: io.signal }, options),
    );
    if (io.signal.aborted) {
      io.err("podpath lab: interrupted; the replica was removed\n");
      return EXIT.live;
    }
    if (command === "up") {
      lab.keep(`${scenario.name} ${extra.slice(1).join(" ")}`.trim());
      io.out(
        `lab ${lab.id} is up (${scenario.name}); remove it with: podpath lab down ${lab.id}\n`,
      );
      for (const ns of lab.namespaces) io.out(`  ip netns exec ${ns.name} bash\n`);
      for (const line of outcome.summary) io.out(`  ${line}\n`);
      return EXIT.ok;
    }
    const report = {
      json: envelope(
        "lab run",
        { scenario: scenario.name, files: outcome.files, summary: outcome.summary },
        outDir,
      ),
      document: {
        question: "lab run",
        blocks: [
          paragraph(["snapshot written to ", code(outDir!), ` (${outcome.files.length} files)`]),
          list(outcome.summary, false),
        ],
      },
    };
    io.out(renderReport(report, isFormat(opts["output"]) ? opts["output"] : "text"));
    return EXIT.ok;
  } catch (e) {
    io.err(`podpath lab ${command} ${scenario.name}: ${(e as Error).message}\n`);
    return EXIT.live;
  } finally {
    io.signal.removeEventListener("abort", onAbort);
    if (command === "run" || io.signal.aborted) await lab.destroy();
    folder?.release();
  }
}

async function down(id: string | undefined, all: boolean, io: Io): Promise<number> {
  const labs = listLabs();
  if (id === undefined && !all) {
    if (labs.length === 0) io.out("no labs recorded\n");
    for (const l of labs) {
      const state = l.kept ? "kept" : l.alive ? `running (pid ${l.ownerPid})` : "stale";
      io.out(`${l.id}  ${state}  ${l.namespaces.length} namespace(s)  ${l.note ?? ""}\n`);
    }
    if (labs.length > 0) io.err("podpath lab down: name an id, or --all to remove every one\n");
    return labs.length === 0 ? EXIT.ok : EXIT.usage;
  }
  const targets = all ? labs : labs.filter((l) => l.id === id);
  if (!all && targets.length === 0) throw new UsageError(`lab down: no lab ${JSON.stringify(id)}`);
  for (const l of targets) {
    removeLab(l.id);
    io.out(`removed ${l.id} (${l.namespaces.length} namespace(s))\n`);
  }
  return EXIT.ok;
}
