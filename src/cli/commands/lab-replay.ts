/**
 * @module cli/commands/lab-replay — `podpath lab replay --iptables FILE --flow SRC->DST[:PORT]`:
 * wiring and its document only (rendered by report/, JSON in the envelope); the work is
 * lab/replay.ts.
 */
import { resolve } from "node:path";
import { z } from "zod";
import { formatFlowSpec, parseFlowSpec } from "../../lab/flow-spec.ts";
import { ReplayError, type ReplayResult, replayFlow } from "../../lab/replay.ts";
import { parseScenarioArgs } from "../../lab/scenarios/index.ts";
import { envelope } from "../../model/envelope.ts";
import { type Document, fields, type Text } from "../../report/document.ts";
import { isFormat, renderReport } from "../../report/render.ts";
import { readRegularText } from "../../snapshot/input-file.ts";
import { EXIT, type Io, UsageError } from "../io.ts";

const IFACE = z.string().regex(/^[A-Za-z0-9_.-]{1,15}$/, "an interface name of 1-15 characters");

const ReplayExtra = z
  .object({
    proto: z.enum(["tcp", "udp", "icmp"]).optional(),
    "in-iface": IFACE.optional(),
    "out-iface": IFACE.optional(),
    "node-ip": z.string().optional(),
    local: z.literal(true).optional(),
    "skip-invalid": z.literal(true).optional(),
  })
  .strict();

/** Maps iptables-restore's "Error occurred at line: N" (in the nat section) to the file's line. */
function kernelErrorLine(message: string, dumpText: string): string {
  const m = /line:? (\d+)/.exec(message);
  const lines = dumpText.split(/\r?\n/);
  const start = lines.findIndex((l) => l.trim() === "*nat");
  if (!m || start < 0) return message;
  const line = start + Number(m[1]);
  return `line ${line}: ${lines[line - 1]?.trim() ?? ""}: ${message.split("\n")[0]}`;
}

export async function runReplay(opts: Readonly<Record<string, unknown>>, io: Io): Promise<number> {
  const extraArgs = Array.isArray(opts["_args"]) ? (opts["_args"] as string[]) : [];
  const { options, positional } = parseScenarioArgs(extraArgs);
  if (positional.length > 0)
    throw new UsageError(`lab replay: unexpected argument ${positional[0]}`);
  const extra = ReplayExtra.safeParse(options);
  if (!extra.success) {
    throw new UsageError(
      `lab replay: ${extra.error.issues.map((i) => (i.code === "unrecognized_keys" ? `unknown option(s) ${i.keys.map((k) => `--${k}`).join(", ")}` : `--${i.path.join(".")}: ${i.message}`)).join("; ")}`,
    );
  }
  const flow = parseFlowSpec(String(opts["flow"]), extra.data.proto);
  if ("error" in flow) throw new UsageError(`lab replay: --flow ${flow.error}`);
  const file = String(opts["iptables"]);
  let dumpText: string;
  try {
    // a FIFO or device is refused, not waited on; UTF-16 (PowerShell's >) is decoded
    dumpText = readRegularText(resolve(io.cwd, file), file);
  } catch (e) {
    throw new UsageError(`lab replay: ${(e as Error).message}`);
  }
  let result: ReplayResult;
  try {
    result = await replayFlow(dumpText, flow, {
      file,
      ...(extra.data["in-iface"] ? { inIface: extra.data["in-iface"] } : {}),
      ...(extra.data["out-iface"] ? { outIface: extra.data["out-iface"] } : {}),
      ...(extra.data["node-ip"] ? { nodeIp: extra.data["node-ip"] } : {}),
      ...(extra.data.local ? { local: true } : {}),
      invalidLines: extra.data["skip-invalid"] ? "skip" : "refuse",
    });
  } catch (e) {
    if (e instanceof ReplayError) {
      const msg = e.code === "ERR_REPLAY_KERNEL" ? kernelErrorLine(e.message, dumpText) : e.message;
      throw new UsageError(`lab replay: ${file}: ${msg}`);
    }
    io.err(`podpath lab replay: ${(e as Error).message}\n`);
    return EXIT.live;
  }
  for (const d of result.diagnostics.filter((x) => x.severity !== "info")) {
    io.err(`${d.source ? `${d.source.file}:${d.source.line}: ` : ""}${d.severity}: ${d.message}\n`);
  }
  const format = isFormat(opts["output"]) ? opts["output"] : "text";
  io.out(renderReport({ json: replayJson(result), document: replayDocument(result) }, format));
  return result.agree === false ? EXIT.findings : EXIT.ok;
}

function decidingRule(r: ReplayResult) {
  const ref = r.trace.decidingRule;
  return ref
    ? { file: ref.file, line: ref.line, ...(ref.text ? { text: ref.text } : {}) }
    : undefined;
}

/** An address with its port, as ss and curl write it: IPv6 addresses in brackets. */
function endpoint(address: string | undefined, port: number | undefined): string {
  if (address === undefined || port === undefined) return String(address);
  return address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`;
}

/** The replay as key/value rows: the verdict, the flow, what the kernel did, what the evaluator says. */
function replayDocument(r: ReplayResult): Document {
  const k = r.kernel;
  const rule = decidingRule(r);
  const verdict =
    r.agree === true
      ? "agree"
      : r.agree === false
        ? `DISAGREE: ${r.agreement.why}`
        : "the evaluator cannot decide this flow (not a disagreement)";
  // the verdict first, as every answer starts
  const rows: [string, Text][] = [
    ["verdict", verdict],
    ["flow", formatFlowSpec(r.flow)],
    [
      "kernel",
      k.error
        ? `nothing left the node (${k.error})`
        : `source ${endpoint(k.source, k.sport)} on the wire, to ${endpoint(k.destination, k.dport)}`,
    ],
    ...(k.entry
      ? [["", `conntrack: ${k.entry.replace(/\s+/g, " ").trim()}`] as [string, Text]]
      : []),
    ["evaluator", r.predicted],
    ...(rule
      ? [["", `${rule.file}:${rule.line}${rule.text ? `  ${rule.text}` : ""}`] as [string, Text]]
      : []),
  ];
  return { question: "lab replay", blocks: [fields(rows)] };
}

function replayJson(r: ReplayResult) {
  const k = r.kernel;
  const rule = decidingRule(r);
  return envelope("lab-replay", {
    flow: formatFlowSpec(r.flow),
    kernel: {
      source: k.source ?? null,
      sport: k.sport ?? null,
      destination: k.destination ?? null,
      dport: k.dport ?? null,
      conntrack: k.entry ?? null,
      error: k.error ?? null,
    },
    predicted: {
      decision: r.trace.decision,
      summary: r.predicted,
      rule: rule ?? null,
    },
    agree: r.agree ?? null,
    why: r.agreement.why,
  });
}
