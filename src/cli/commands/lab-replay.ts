/** @module cli/commands/lab-replay — `podpath lab replay` (not built yet). */
import { EXIT, type Io } from "../io.ts";

export async function runReplay(_opts: Readonly<Record<string, unknown>>, io: Io): Promise<number> {
  io.err("podpath lab replay: not available in this build yet\n");
  return EXIT.usage;
}
