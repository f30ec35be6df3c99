/**
 * @module iptables/target-spec — turns `-j NAME` with its options into a structured {@link Target}
 * (NAT targets, MARK/CONNMARK in their `--set-xmark` form, verdicts, chains, other extensions).
 */
import type { Family } from "../net/cidr.ts";
import { formatIp } from "../net/cidr.ts";
import type { MarkOp, ModuleOption, NatRange, PortRange, Target } from "./dump.ts";
import {
  formatPortRange,
  hex,
  parseAddr,
  parseMarkMask,
  parseNatRange,
  parsePortRange,
} from "./values.ts";

/** Options each target understands (canonical names). */
export const TARGET_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  MASQUERADE: ["--to-ports", "--random", "--random-fully"],
  SNAT: ["--to-source", "--random", "--random-fully", "--persistent"],
  DNAT: ["--to-destination", "--random", "--persistent"],
  REDIRECT: ["--to-ports", "--random"],
  NETMAP: ["--to"],
  MARK: ["--set-xmark", "--set-mark", "--or-mark", "--and-mark", "--xor-mark"],
  CONNMARK: [
    "--set-xmark",
    "--set-mark",
    "--or-mark",
    "--and-mark",
    "--xor-mark",
    "--save-mark",
    "--restore-mark",
    "--nfmask",
    "--ctmask",
    "--mask",
  ],
  LOG: [
    "--log-level",
    "--log-prefix",
    "--log-tcp-sequence",
    "--log-tcp-options",
    "--log-ip-options",
    "--log-uid",
    "--log-macdecode",
  ],
  REJECT: ["--reject-with"],
};

/**
 * Target extensions iptables knows by name. A user chain can never carry one of these names
 * (iptables refuses `-N` for them), so anything else after `-j` is a chain.
 */
export const KNOWN_TARGETS: ReadonlySet<string> = new Set([
  "ACCEPT",
  "DROP",
  "RETURN",
  "QUEUE",
  "MASQUERADE",
  "SNAT",
  "DNAT",
  "REDIRECT",
  "NETMAP",
  "MARK",
  "CONNMARK",
  "LOG",
  "REJECT",
  "NFLOG",
  "ULOG",
  "NFQUEUE",
  "TRACE",
  "NOTRACK",
  "CT",
  "CLASSIFY",
  "DSCP",
  "TOS",
  "TTL",
  "HL",
  "TCPMSS",
  "CHECKSUM",
  "AUDIT",
  "SET",
  "TPROXY",
  "TEE",
  "IDLETIMER",
  "LED",
  "SECMARK",
  "CONNSECMARK",
  "SYNPROXY",
  "CLUSTERIP",
  "ECN",
  "RATEEST",
  "HMARK",
  "TCPOPTSTRIP",
  "DNPT",
  "SNPT",
  "MIRROR",
]);

export interface TargetResult {
  readonly target: Target;
  readonly problems: string[];
}

const has = (opts: readonly ModuleOption[], n: string) => opts.some((o) => o.name === n);
const val = (opts: readonly ModuleOption[], n: string) => opts.find((o) => o.name === n)?.values[0];

function markOpFrom(opts: readonly ModuleOption[], problems: string[]): MarkOp | undefined {
  // libxt_MARK / libxt_CONNMARK revision 1+: every form becomes mark = (mark & ~mask) ^ value
  for (const o of opts) {
    if (!["--set-xmark", "--set-mark", "--or-mark", "--and-mark", "--xor-mark"].includes(o.name))
      continue;
    const r = parseMarkMask(o.values[0] ?? "");
    if (!r.ok) {
      problems.push(`${o.name}: ${r.error}`);
      return undefined;
    }
    const { value, mask } = r.value;
    switch (o.name) {
      case "--set-xmark":
        return { value, mask: mask ?? 0xffffffff };
      case "--set-mark":
        return { value, mask: ((mask ?? 0xffffffff) | value) >>> 0 };
      case "--or-mark":
        return { value, mask: value };
      case "--and-mark":
        return { value: 0, mask: ~value >>> 0 };
      case "--xor-mark":
        return { value, mask: 0 };
    }
  }
  return undefined;
}

function ports(o: string | undefined, problems: string[]): PortRange | undefined {
  if (o === undefined) return undefined;
  const r = parsePortRange(o, "-");
  if (!r.ok) {
    problems.push(`--to-ports: ${r.error}`);
    return undefined;
  }
  return r.value;
}

export function formatNatRange(r: NatRange, family: Family): string {
  let s = "";
  if (r.from && r.to) {
    const a = formatIp(r.from);
    s = r.from.value === r.to.value ? a : `${a}-${formatIp(r.to)}`;
    if (family === 6 && r.ports) s = `[${s}]`;
  }
  if (r.ports) s += `:${formatPortRange(r.ports, "-")}`;
  return s;
}

const flag = (name: string, on: boolean): ModuleOption[] =>
  on ? [{ name, negated: false, values: [] }] : [];

/** Canonical options of a structured target, as iptables-save prints them. */
export function targetOptions(t: Target): ModuleOption[] {
  const opt = (name: string, v: string): ModuleOption => ({ name, negated: false, values: [v] });
  switch (t.kind) {
    case "verdict":
    case "chain":
      return [];
    case "MASQUERADE":
      return [
        ...(t.toPorts ? [opt("--to-ports", formatPortRange(t.toPorts, "-"))] : []),
        ...flag("--random", t.random),
        ...flag("--random-fully", t.randomFully),
      ];
    case "SNAT":
    case "DNAT":
      return [
        ...(t.to
          ? [
              opt(
                t.kind === "SNAT" ? "--to-source" : "--to-destination",
                formatNatRange(t.to, t.to.from?.family ?? 4),
              ),
            ]
          : []),
        ...flag("--random", t.random),
        ...flag("--random-fully", t.randomFully),
        ...flag("--persistent", t.persistent),
      ];
    case "REDIRECT":
      return [
        ...(t.toPorts ? [opt("--to-ports", formatPortRange(t.toPorts, "-"))] : []),
        ...flag("--random", t.random),
      ];
    case "NETMAP":
      return [
        opt("--to", `${formatIp({ family: t.to.family, value: t.to.start })}/${t.to.prefix}`),
      ];
    case "MARK":
      return [opt("--set-xmark", `${hex(t.op.value)}/${hex(t.op.mask)}`)];
    case "CONNMARK":
      if (t.mode === "set") return [opt("--set-xmark", `${hex(t.op.value)}/${hex(t.op.mask)}`)];
      return [
        { name: t.mode === "save" ? "--save-mark" : "--restore-mark", negated: false, values: [] },
        opt("--nfmask", hex(t.nfmask)),
        opt("--ctmask", hex(t.ctmask)),
      ];
    case "extension":
      return [...t.options];
  }
}

/** Interprets `-j NAME options...` (or `-g NAME`). */
export function interpretTarget(
  name: string,
  isGoto: boolean,
  options: readonly ModuleOption[],
  family: Family,
): TargetResult {
  const problems: string[] = [];
  if (isGoto || !KNOWN_TARGETS.has(name)) {
    if (options.length > 0) {
      problems.push(
        `options ${options.map((o) => o.name).join(" ")} after chain ${name}: chains take no options`,
      );
    }
    return { target: { kind: "chain", name, goto: isGoto }, problems };
  }
  const known = TARGET_OPTIONS[name];
  if (known) {
    for (const o of options) {
      if (!known.includes(o.name))
        problems.push(`option ${o.name} is not an option of target ${name}`);
    }
  }
  return { target: targetOf(name, options, family, problems), problems };
}

/** The target extension `name` with its options; what is wrong with them goes to `problems`. */
function targetOf(
  name: string,
  options: readonly ModuleOption[],
  family: Family,
  problems: string[],
): Target {
  switch (name) {
    case "ACCEPT":
    case "DROP":
    case "RETURN":
    case "QUEUE":
      return { kind: "verdict", name };
    case "MASQUERADE": {
      const tp = ports(val(options, "--to-ports"), problems);
      return {
        kind: "MASQUERADE",
        name,
        ...(tp ? { toPorts: tp } : {}),
        random: has(options, "--random"),
        randomFully: has(options, "--random-fully"),
      };
    }
    case "REDIRECT": {
      const tp = ports(val(options, "--to-ports"), problems);
      return {
        kind: "REDIRECT",
        name,
        ...(tp ? { toPorts: tp } : {}),
        random: has(options, "--random"),
      };
    }
    case "SNAT":
    case "DNAT":
      return natTarget(name, options, family, problems);
    case "NETMAP": {
      const r = parseAddr(val(options, "--to") ?? "", family);
      if (!r.ok) {
        problems.push(`NETMAP --to: ${r.error}`);
        return { kind: "extension", name, options };
      }
      return { kind: "NETMAP", name, to: r.value };
    }
    case "MARK": {
      const op = markOpFrom(options, problems);
      if (!op) {
        if (problems.length === 0)
          problems.push("MARK needs --set-xmark, --set-mark, --or-mark, --and-mark or --xor-mark");
        return { kind: "extension", name, options };
      }
      return { kind: "MARK", name, op };
    }
    case "CONNMARK":
      return connmarkTarget(options, problems);
    default:
      return { kind: "extension", name, options };
  }
}

/** SNAT `--to-source` or DNAT `--to-destination` (the first; several are not modelled). */
function natTarget(
  name: "SNAT" | "DNAT",
  options: readonly ModuleOption[],
  family: Family,
  problems: string[],
): Target {
  const optName = name === "SNAT" ? "--to-source" : "--to-destination";
  const all = options.filter((o) => o.name === optName);
  let to: NatRange | undefined;
  if (all.length === 0) problems.push(`${name} needs ${optName}`);
  else {
    if (all.length > 1)
      problems.push(`${name} with several ${optName}: only the first is modelled`);
    const r = parseNatRange(all[0]!.values[0] ?? "", family);
    if (r.ok) to = r.value;
    else problems.push(`${optName}: ${r.error}`);
  }
  return {
    kind: name,
    name,
    ...(to ? { to } : {}),
    random: has(options, "--random"),
    randomFully: has(options, "--random-fully"),
    persistent: has(options, "--persistent"),
  };
}

/** CONNMARK: `--save-mark`/`--restore-mark` with their masks, or a mark operation on the connection. */
function connmarkTarget(options: readonly ModuleOption[], problems: string[]): Target {
  const name = "CONNMARK";
  const save = has(options, "--save-mark");
  const restore = has(options, "--restore-mark");
  if (save || restore) {
    const m = (n: string) => {
      const v = val(options, n);
      if (v === undefined) return undefined;
      const r = parseMarkMask(v);
      if (!r.ok) problems.push(`${n}: ${r.error}`);
      return r.ok ? r.value.value : undefined;
    };
    const mask = m("--mask");
    return {
      kind: "CONNMARK",
      name,
      mode: save ? "save" : "restore",
      op: { value: 0, mask: 0 },
      nfmask: m("--nfmask") ?? mask ?? 0xffffffff,
      ctmask: m("--ctmask") ?? mask ?? 0xffffffff,
    };
  }
  const op = markOpFrom(options, problems);
  if (!op) {
    if (problems.length === 0)
      problems.push("CONNMARK needs a mark operation, --save-mark or --restore-mark");
    return { kind: "extension", name, options };
  }
  return { kind: "CONNMARK", name, mode: "set", op, nfmask: 0xffffffff, ctmask: 0xffffffff };
}
