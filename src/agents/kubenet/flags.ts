/**
 * @module agents/kubenet/flags — the kubelet's command line as a node shows it
 * (`nodes/<node>/kubelet-flags.txt`): `ps -o args` output (with or without its COMMAND header),
 * `/proc/<pid>/cmdline | tr '\0' ' '`, a systemd unit's `ExecStart=`/`Environment=` lines (with
 * `\` continuations), or `/etc/default/kubelet`'s `KUBELET_EXTRA_ARGS=` line. Reads the flags
 * kubenet's masquerade rule depends on, as the kubelet's pflag set does: `--flag=value` or
 * `--flag value`, the last occurrence wins. `--non-masquerade-cidr` defaults to 10.0.0.0/8
 * (kubernetes cmd/kubelet/app/options/options.go, NewKubeletFlags; deprecated, removed with
 * dockershim in v1.24); `--network-plugin` names kubenet.
 */
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";

export const FLAG_NON_MASQUERADE_CIDR = "non-masquerade-cidr";
export const FLAG_NETWORK_PLUGIN = "network-plugin";
export const FLAG_POD_CIDR = "pod-cidr";
/** The kubelet's default `--non-masquerade-cidr` (options.go NewKubeletFlags). */
export const DEFAULT_NON_MASQUERADE_CIDR = "10.0.0.0/8";

/** The flags whose value this reader keeps (a bare `--flag` of any other kind takes no value). */
const VALUE_FLAGS = new Set([FLAG_NON_MASQUERADE_CIDR, FLAG_NETWORK_PLUGIN, FLAG_POD_CIDR]);

/** One flag as written, with its line. */
export interface FlagValue {
  readonly value: string;
  readonly source: SourceRef;
}

export interface KubeletFlags {
  /** The last occurrence of each flag this reader knows. */
  readonly flags: ReadonlyMap<string, FlagValue>;
  /** Some line names the kubelet (its binary, `KUBELET_*ARGS`, or a kubelet flag). */
  readonly isKubelet: boolean;
  /** `--non-masquerade-cidr` as the kubelet runs with it (the default when not given). */
  readonly nonMasqueradeCidr: {
    readonly text: string;
    readonly cidr?: Cidr;
    readonly source?: SourceRef;
    readonly defaulted: boolean;
  };
  /** `--network-plugin`, when given. */
  readonly networkPlugin?: FlagValue;
}

interface Token {
  readonly text: string;
  readonly line: number;
  readonly lineText: string;
}

/** Splits a line as a shell would for plain words and quotes (no expansion). */
function words(line: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quote: '"' | "'" | undefined;
  let has = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i] ?? "";
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < line.length) cur += line[++i] ?? "";
      else cur += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      has = true;
    } else if (c === " " || c === "\t") {
      if (has || cur !== "") out.push(cur);
      cur = "";
      has = false;
    } else if (c === "\\" && i + 1 < line.length) {
      cur += line[++i] ?? "";
    } else if (c !== "\\") {
      cur += c;
    }
  }
  if (has || cur !== "") out.push(cur);
  return out;
}

/** The words of every line, a `NAME=value` assignment (systemd, /etc/default) opened up. */
function tokens(text: string): Token[] {
  const out: Token[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const lineText = lines[i] ?? "";
    const trimmed = lineText.trim();
    if (trimmed === "" || trimmed.startsWith("#") || trimmed.startsWith("[")) continue;
    let ws = words(trimmed.replace(/\0/g, " "));
    // systemd: `Environment="KUBELET_EXTRA_ARGS=--a=b --c"`, `ExecStart=/usr/bin/kubelet …`
    const first = ws[0] ?? "";
    const assign = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(first);
    if (assign && !first.startsWith("-")) {
      const rest = assign[1] === "Environment" ? (assign[2] ?? "") : undefined;
      if (rest !== undefined) {
        const inner = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(rest);
        ws = [...(inner ? words(inner[2] ?? "") : []), ...ws.slice(1)];
      } else {
        ws = [...words(assign[2] ?? ""), ...ws.slice(1)];
      }
    }
    for (const w of ws) out.push({ text: w, line: i + 1, lineText });
  }
  return out;
}

/** The first line with text, as the file shows it: where an unrecognized file is cited. */
function firstLine(text: string, file: string): SourceRef {
  const lines = text.split(/\r?\n/);
  const i = Math.max(
    0,
    lines.findIndex((l) => l.trim() !== ""),
  );
  return { file, line: i + 1, text: (lines[i] ?? "").trim().slice(0, 200) };
}

/** Reads the kubelet's command line; never throws. */
export function readKubeletFlags(text: string, file: string): Parsed<KubeletFlags> {
  const diagnostics: Diagnostic[] = [];
  const flags = new Map<string, FlagValue>();
  const seen = new Map<string, SourceRef>();
  const toks = tokens(text);
  let isKubelet = /kubelet/i.test(text);
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (!t?.text.startsWith("--")) continue;
    const eq = t.text.indexOf("=");
    const name = eq < 0 ? t.text.slice(2) : t.text.slice(2, eq);
    if (!VALUE_FLAGS.has(name)) continue;
    isKubelet = true;
    let value: string | undefined;
    let shown = t.text;
    if (eq >= 0) value = t.text.slice(eq + 1);
    else {
      const next = toks[i + 1];
      if (next && !next.text.startsWith("-")) {
        value = next.text;
        shown = `${t.text} ${next.text}`;
        i++;
      }
    }
    const source: SourceRef = { file, line: t.line, text: shown };
    if (value === undefined) {
      diagnostics.push({
        code: "KUBELET_FLAG_NO_VALUE",
        severity: "warning",
        message: `--${name} has no value; the kubelet refuses to start with it (expected --${name}=VALUE)`,
        source,
      });
      continue;
    }
    const before = seen.get(name);
    if (before) {
      diagnostics.push({
        code: "KUBELET_FLAG_REPEATED",
        severity: "info",
        message: `--${name} is given again (first on line ${before.line}); the kubelet keeps the last one, ${value}`,
        source,
      });
    }
    seen.set(name, source);
    flags.set(name, { value, source });
  }
  const given = flags.get(FLAG_NON_MASQUERADE_CIDR);
  const text0 = given?.value ?? DEFAULT_NON_MASQUERADE_CIDR;
  const parsed = tryParseCidr(text0.trim(), { allowBareAddress: false });
  if ("error" in parsed && given) {
    diagnostics.push({
      code: "KUBELET_NON_MASQ_CIDR_INVALID",
      severity: "warning",
      message: `--${FLAG_NON_MASQUERADE_CIDR}=${given.value} is not a CIDR (${parsed.error}); kubenet cannot write its masquerade rule with it (iptables refuses it, the network plugin does not start)`,
      source: given.source,
    });
  }
  if (!isKubelet && text.trim() !== "") {
    diagnostics.push({
      code: "KUBELET_FLAGS_UNRECOGNIZED",
      severity: "info",
      message: `${file} does not look like the kubelet's command line (expected \`ps -o args\` of the kubelet, its systemd unit or KUBELET_EXTRA_ARGS)`,
      source: firstLine(text, file),
    });
  }
  const networkPlugin = flags.get(FLAG_NETWORK_PLUGIN);
  return {
    value: {
      flags,
      isKubelet,
      nonMasqueradeCidr: {
        text: text0,
        ...("cidr" in parsed ? { cidr: parsed.cidr } : {}),
        ...(given ? { source: given.source } : {}),
        defaulted: given === undefined,
      },
      ...(networkPlugin ? { networkPlugin } : {}),
    },
    diagnostics,
  };
}
