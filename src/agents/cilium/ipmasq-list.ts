/**
 * @module agents/cilium/ipmasq-list — reads what `cilium-dbg bpf ipmasq list` prints on a node: the
 * CIDRs of Cilium's BPF ip-masq-agent map (`cilium_ipmasq_v4` / `cilium_ipmasq_v6`), to which pod
 * packets are not masqueraded. The forms are the ones cilium-dbg/cmd/bpf_ipmasq_list.go writes:
 * the table (`TablePrinter("IP PREFIX/ADDRESS", "", …)`, a tabwriter with one CIDR a line, in map
 * order), `-o json` (a JSON array of prefixes), and "No entries found." (its stderr, kept when the
 * collector merged the streams). Each entry keeps its line for citing.
 */
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";

export const IPMASQ_LIST_TITLE = "IP PREFIX/ADDRESS";

/** One entry of the map: packets from pods to it are not masqueraded. */
export interface IpMasqEntry {
  readonly text: string;
  readonly cidr: Cidr;
  readonly source: SourceRef;
}

export interface IpMasqList {
  readonly entries: readonly IpMasqEntry[];
  /** The output said the map is empty ("No entries found." or `[]`). */
  readonly empty: boolean;
  /** The file's first line, cited when the list is empty. */
  readonly source: SourceRef;
}

/** A line's text for citing: long lines are cited without it. */
const cite = (text: string) => (text.length <= 200 ? { text } : {});

function entry(text: string, file: string, line: number, diags: Diagnostic[]): IpMasqEntry[] {
  const r = tryParseCidr(text);
  if ("cidr" in r) return [{ text, cidr: r.cidr, source: { file, line, text } }];
  diags.push({
    code: "CILIUM_IPMASQ_ENTRY",
    severity: "warning",
    message: `expected a CIDR of the ip-masq-agent map (as \`cilium-dbg bpf ipmasq list\` prints it), got "${text.slice(0, 80)}": ${r.error.slice(0, 120)}`,
    source: { file, line, ...cite(text) },
  });
  return [];
}

function readJson(text: string, file: string, diags: Diagnostic[]): IpMasqEntry[] | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(value)) {
    diags.push({
      code: "CILIUM_IPMASQ_JSON",
      severity: "warning",
      message:
        "expected `cilium-dbg bpf ipmasq list -o json` to be a JSON array of CIDR strings; the file is JSON of another shape",
      source: { file, line: 1 },
    });
    return [];
  }
  const lines = text.split("\n");
  const out: IpMasqEntry[] = [];
  for (const v of value) {
    const s = typeof v === "string" ? v : JSON.stringify(v);
    const at = lines.findIndex((l) => l.includes(JSON.stringify(s)));
    out.push(...entry(s, file, at >= 0 ? at + 1 : 1, diags));
  }
  return out;
}

/** Reads `cilium-dbg bpf ipmasq list` (table or `-o json`) as collected into `file`. */
export function readIpMasqList(text: string, file: string): Parsed<IpMasqList> {
  const diagnostics: Diagnostic[] = [];
  const source: SourceRef = { file, line: 1 };
  const trimmed = text.trim();
  if (trimmed.startsWith("[")) {
    const json = readJson(trimmed, file, diagnostics);
    if (json) return { value: { entries: json, empty: json.length === 0, source }, diagnostics };
  }
  const entries: IpMasqEntry[] = [];
  let empty = false;
  let sawTitle = false;
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    if (line === IPMASQ_LIST_TITLE) {
      sawTitle = true;
      return;
    }
    if (/^No entries found\.?$/.test(line)) {
      empty = true;
      return;
    }
    if (/^error (opening|dumping)/.test(line)) {
      diagnostics.push({
        code: "CILIUM_IPMASQ_ERROR",
        severity: "warning",
        message: `cilium-dbg could not read the ip-masq-agent map ("${line.slice(0, 120)}"): the map's contents are unknown (is enable-ip-masq-agent on?)`,
        source: { file, line: i + 1, ...cite(line) },
      });
      return;
    }
    // one CIDR a line; tabwriter pads the row with spaces
    entries.push(...entry(line.split(/\s+/)[0] ?? line, file, i + 1, diagnostics));
  });
  if (!sawTitle && !empty && entries.length > 0) {
    diagnostics.push({
      code: "CILIUM_IPMASQ_TITLE",
      severity: "info",
      message: `no "${IPMASQ_LIST_TITLE}" title line: read as one CIDR a line`,
      source,
    });
  }
  if (!sawTitle && !empty && entries.length === 0 && diagnostics.length === 0) {
    diagnostics.push({
      code: "CILIUM_IPMASQ_EMPTY_FILE",
      severity: "warning",
      message: `expected the output of \`cilium-dbg bpf ipmasq list\` ("${IPMASQ_LIST_TITLE}" and one CIDR a line, or "No entries found."); the file is empty`,
      source,
    });
  }
  return {
    value: { entries, empty: empty || (sawTitle && entries.length === 0), source },
    diagnostics,
  };
}
