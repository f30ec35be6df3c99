/** @module cli/commands/lab — placeholder until the command is built. */
import { EXIT, type Io } from "../io.ts";

export async function run(
  _args: readonly string[],
  _opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  io.err("podpath: 'lab' is not available in this build yet\n");
  return EXIT.usage;
}
