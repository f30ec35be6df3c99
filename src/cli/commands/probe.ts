/**
 * @module cli/commands/probe — `podpath probe --peer IP --pod-ip IP --service-ip IP[:PORT] --public
 * HOST --name NAME [--dns-server IP] [--all] [--out FILE] [-o text|json]`: wiring only. The
 * verdict, then the transcript (the `probes/` form), go to stdout; --out gets the transcript alone.
 */
import { writeFileSync } from "node:fs";
import { hostname, networkInterfaces } from "node:os";
import { resolve } from "node:path";
import { type ProbeTargets, parseIpPort, probeOutward, realSystem } from "../../live/probe.ts";
import { envelope } from "../../model/envelope.ts";
import { tryParseIp } from "../../net/cidr.ts";
import { codeBlock, paragraph } from "../../report/document.ts";
import { isFormat, renderReport } from "../../report/render.ts";
import { EXIT, type Io, UsageError } from "../io.ts";

const HOST =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?$/;

function intOpt(
  opts: Readonly<Record<string, unknown>>,
  key: string,
  min: number,
  max: number,
): number {
  const raw = String(opts[key]);
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < min || n > max) {
    throw new UsageError(
      `probe: --${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} ${raw}: expected a whole number from ${min} to ${max}`,
    );
  }
  return n;
}

function ipOpt(
  opts: Readonly<Record<string, unknown>>,
  key: string,
  flag: string,
): string | undefined {
  const v = opts[key];
  if (v === undefined) return undefined;
  if (!tryParseIp(String(v)))
    throw new UsageError(`probe: ${flag} ${String(v)}: expected an IP address`);
  return String(v);
}

/** The address of a tunnel interface on this machine (tun*, utun*, tap*, wg*), if any. */
function vpnAddress(): string | undefined {
  for (const [name, addrs] of Object.entries(networkInterfaces())) {
    if (!/^(u?tun|tap|wg)/.test(name)) continue;
    const a = addrs?.find((x) => x.family === "IPv4");
    if (a) return a.address;
  }
  return undefined;
}

export async function run(
  _args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const peer = ipOpt(opts, "peer", "--peer");
  const podIp = ipOpt(opts, "podIp", "--pod-ip");
  const dnsServer = ipOpt(opts, "dnsServer", "--dns-server");
  let serviceIp: ProbeTargets["serviceIp"];
  if (opts["serviceIp"] !== undefined) {
    const p = parseIpPort(String(opts["serviceIp"]));
    if (!p)
      throw new UsageError(
        `probe: --service-ip ${String(opts["serviceIp"])}: expected IP or IP:PORT`,
      );
    serviceIp = p;
  }
  const pub = opts["public"] === undefined ? undefined : String(opts["public"]);
  if (pub !== undefined && !tryParseIp(pub) && !HOST.test(pub)) {
    throw new UsageError(`probe: --public ${pub}: expected an IP address or a host name`);
  }
  const name = opts["name"] === undefined ? undefined : String(opts["name"]);
  if (name !== undefined && !HOST.test(name))
    throw new UsageError(`probe: --name ${name}: expected a host name`);
  if (!peer && !podIp && !serviceIp && !pub && !name) {
    throw new UsageError(
      "probe: name at least one target: --peer, --pod-ip, --service-ip, --public or --name",
    );
  }
  const timeoutMs = intOpt(opts, "timeoutMs", 100, 60_000);
  const count = intOpt(opts, "count", 1, 10);
  const targets: ProbeTargets = {
    ...(peer ? { peer } : {}),
    ...(podIp ? { podIp } : {}),
    ...(serviceIp ? { serviceIp } : {}),
    ...(pub ? { public: pub } : {}),
    ...(name ? { name } : {}),
    ...(dnsServer ? { dnsServer } : {}),
  };
  const vpn = vpnAddress();
  const result = await probeOutward(targets, realSystem(io.env as NodeJS.ProcessEnv), {
    timeoutMs,
    count,
    all: opts["all"] === true,
    clientName: hostname(),
    ...(vpn ? { vpnAddress: vpn } : {}),
    signal: io.signal,
    onStep: (l) => {
      if (io.stderrIsTTY) io.err(`${l}\n`);
    },
  });
  const out = opts["out"] === undefined ? undefined : resolve(io.cwd, String(opts["out"]));
  const verdict = result.stoppedAt
    ? `first hop without an answer: ${result.stoppedAt.role} → layer ${result.stoppedAt.layer}: ${result.stoppedAt.explain}`
    : "every probed hop answered";
  const report = {
    json: envelope("probe", {
      stoppedAt: result.stoppedAt ?? null,
      steps: result.steps,
      transcript: result.transcript.replace(/\n$/, "").split("\n"),
    }),
    // the verdict, then the transcript as it is (the `probes/` form, what --out writes)
    document: { question: "probe", blocks: [paragraph(verdict), codeBlock(result.transcript)] },
  };
  const json = renderReport(report, "json");
  const format = isFormat(opts["output"]) ? opts["output"] : "text";
  const body = format === "text" ? result.transcript : renderReport(report, format);
  if (out) {
    try {
      writeFileSync(out, out.endsWith(".json") ? json : result.transcript);
    } catch (e) {
      throw new UsageError(`probe: cannot write --out ${out}: ${(e as Error).message}`);
    }
  }
  // the verdict is the answer: first on stdout (JSON carries it as stoppedAt; md and html open
  // their document with it, so an HTML page starts with its doctype)
  if (format === "json") io.err(`podpath: ${verdict}\n`);
  else if (format === "text") io.out(`${verdict}\n\n`);
  io.out(body);
  return result.stoppedAt ? EXIT.findings : EXIT.ok;
}
