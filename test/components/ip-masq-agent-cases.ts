/**
 * @module test/components/ip-masq-agent-cases — the inputs the real ip-masq-agent is run on: one
 * case per vector of the shared reference (vectors.json, transcribed from the agent's unit tests)
 * and seeded random configs. A case is a config file's text (or none: the agent finds no file)
 * and the agent's Go flag arguments; what to expect is never stored here, it comes from podpath
 * and from the agent.
 */
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export interface AgentCase {
  readonly id: string;
  /** The text at /etc/config/ip-masq-agent; undefined: no file there. */
  readonly file: string | undefined;
  /** Go flag arguments, each `--name=value`. */
  readonly flags: readonly string[];
  /** Which iptables the agent finds on its PATH. */
  readonly backend: "nft" | "legacy";
  /** The text mounted for the agent when podpath reads another file (a whole ConfigMap). */
  readonly mounted?: string;
}

type Config = Readonly<Record<string, unknown>>;
type Flags = Readonly<Record<string, boolean | string>>;

interface RuleCase {
  readonly id: string;
  readonly config: Config;
  readonly flags?: Flags;
  readonly variants?: readonly { readonly random_fully_flag: string | null }[];
}

interface Vectors {
  readonly validate_config: readonly { id: string; config: Config; flags?: Flags }[];
  readonly sync_config: readonly {
    id: string;
    fs: "file" | "not_exist";
    file_content: string | null;
    flags: Flags;
  }[];
  readonly sync_masq_rules_ipv4: readonly RuleCase[];
  readonly sync_masq_rules_ipv6: readonly RuleCase[];
  readonly write_masq_rules: readonly { id: string; to_ports_flag: string | null }[];
  readonly write_nonmasq_rule: readonly { id: string; cidr: string }[];
  readonly interval: {
    readonly parse_interval: readonly { input: string }[];
    readonly parse_intervals: readonly { input: string }[];
  };
}

const SHARED = new URL("../../../shared/reference/ip-masq-agent/vectors.json", import.meta.url);
const COPY = new URL("../../src/agents/ip-masq-agent/fixtures/vectors.json", import.meta.url);

/** The shared reference's vectors, or the repository's copy of them when shared/ is not beside it. */
export function vectorsFile(): string {
  return fileURLToPath(existsSync(SHARED) ? SHARED : COPY);
}

function flagArgs(flags: Flags | undefined): string[] {
  return Object.entries(flags ?? {}).map(([k, v]) => `--${k}=${String(v)}`);
}

function isV6(cidr: string): boolean {
  return cidr.includes(":");
}

/** Every vector of vectors.json as a run of the agent. */
export function vectorCases(): AgentCase[] {
  const v = JSON.parse(readFileSync(vectorsFile(), "utf8")) as Vectors;
  const cases: AgentCase[] = [];
  const add = (id: string, file: string | undefined, flags: readonly string[]) =>
    cases.push({ id, file, flags, backend: "nft" });
  for (const c of v.validate_config) {
    add(`validate_config/${c.id}`, JSON.stringify(c.config), flagArgs(c.flags));
  }
  for (const c of v.sync_config) {
    add(
      `sync_config/${c.id}`,
      c.fs === "file" ? (c.file_content ?? "") : undefined,
      flagArgs(c.flags),
    );
  }
  for (const [group, list] of [
    ["sync_masq_rules_ipv4", v.sync_masq_rules_ipv4],
    ["sync_masq_rules_ipv6", v.sync_masq_rules_ipv6],
  ] as const) {
    for (const c of list) {
      // the variants differ in --random-fully (unset, true, false) and in whether iptables
      // supports it; the real iptables here does, so each distinct flag value is one run
      const values = [
        ...new Set((c.variants ?? [{ random_fully_flag: null }]).map((x) => x.random_fully_flag)),
      ];
      for (const rf of values) {
        const flags = [...flagArgs(c.flags), ...(rf === null ? [] : [`--random-fully=${rf}`])];
        add(`${group}/${c.id}/random-fully=${rf ?? "unset"}`, JSON.stringify(c.config), flags);
      }
    }
  }
  for (const c of v.write_masq_rules) {
    const flags = c.to_ports_flag === null ? [] : [`--to-ports=${c.to_ports_flag}`];
    add(`write_masq_rules/${c.id}`, undefined, flags);
  }
  for (const c of v.write_nonmasq_rule) {
    const config = JSON.stringify({ nonMasqueradeCIDRs: [c.cidr] });
    add(`write_nonmasq_rule/${c.id}`, config, isV6(c.cidr) ? ["--enable-ipv6=true"] : []);
  }
  const ports = [...v.interval.parse_interval, ...v.interval.parse_intervals].map((x) => x.input);
  for (const p of [...new Set(ports)])
    add(`interval/--to-ports=${p}`, undefined, [`--to-ports=${p}`]);
  return cases;
}

/**
 * Config files whose reading depends on the agent's YAML and JSON libraries: YAML 1.1 booleans,
 * key case, quoting, comments, duplicate keys, wrong types, flow style, a ConfigMap-shaped file.
 */
export function edgeCases(): AgentCase[] {
  const files: readonly [string, string][] = [
    ["yaml11-bools", "masqLinkLocal: yes\nmasqLinkLocalIPv6: on\n"],
    ["yaml11-bools-no", "masqLinkLocal: No\n"],
    ["key-case", "NonMasqueradeCIDRs:\n  - 10.0.0.0/8\n"],
    ["key-case-lower", "nonmasqueradecidrs:\n  - 10.0.0.0/8\ncidrlimit: 0\n"],
    ["unknown-key", "nonMasqueradeCIDRs: [10.0.0.0/8]\nextra: 1\n"],
    ["duplicate-key", "cidrLimit: 1\ncidrLimit: 2\n"],
    ["comment-only", "# nothing here\n"],
    ["empty-file", ""],
    ["whitespace-file", "\n\n  \n"],
    ["document-marker", "---\nnonMasqueradeCIDRs: [10.0.0.0/8]\n"],
    ["two-documents", "cidrLimit: 3\n---\ncidrLimit: 4\n"],
    ["cidr-limit-string", "cidrLimit: '5'\n"],
    ["cidr-limit-float", "cidrLimit: 5.0\n"],
    ["cidr-limit-negative", "cidrLimit: -1\nnonMasqueradeCIDRs: []\n"],
    ["cidr-limit-huge", "cidrLimit: 99999999999999999999\n"],
    ["resync-number", "resyncInterval: 5\n"],
    ["resync-bad", "resyncInterval: soon\n"],
    ["resync-negative", "resyncInterval: -1s\n"],
    ["resync-null", "resyncInterval: null\n"],
    ["cidrs-string", "nonMasqueradeCIDRs: 10.0.0.0/8\n"],
    ["cidrs-number-entry", "nonMasqueradeCIDRs:\n  - 10\n"],
    // past the default list's length a null entry is "" for the agent too
    ["cidrs-null-fourth", "nonMasqueradeCIDRs: [null, null, null, null]\n"],
    ["cidrs-flow-quoted", "nonMasqueradeCIDRs: [\"10.0.0.0/8\", '192.168.0.0/16']\n"],
    ["cidr-trailing-comment", "nonMasqueradeCIDRs:\n  - 10.0.0.0/8 # pods\n"],
    ["bool-string", 'masqLinkLocal: "true"\n'],
    ["tab-indent", "nonMasqueradeCIDRs:\n\t- 10.0.0.0/8\n"],
    ["not-a-map", "- 10.0.0.0/8\n"],
    ["scalar", "hello\n"],
    ["json-trailing-comma", '{"cidrLimit": 3,}\n'],
    ["anchor-alias", "a: &x [10.0.0.0/8]\nnonMasqueradeCIDRs: *x\n"],
    ["v4-mapped-v6", "nonMasqueradeCIDRs:\n  - ::ffff:10.0.0.0/104\n"],
    ["leading-zero-prefix", "nonMasqueradeCIDRs:\n  - 10.0.0.0/08\n"],
    ["cidrs-object-entry", "nonMasqueradeCIDRs:\n  - {a: 1}\n"],
    ["cidrs-bool-entry", "nonMasqueradeCIDRs:\n  - true\n"],
    ["cidrs-object", "nonMasqueradeCIDRs: {}\n"],
    ["cidr-limit-null", "cidrLimit: null\nnonMasqueradeCIDRs: [10.0.0.0/8]\n"],
    ["link-local-null", "masqLinkLocal: null\n"],
    ["key-case-duplicate", "cidrLimit: 1\nCidrLimit: 2\n"],
  ];
  const cases: AgentCase[] = files.map(([id, file]) => ({
    id: `edge/${id}`,
    file,
    flags: [],
    backend: "nft",
  }));
  // podpath also reads the ConfigMap as kubectl prints it; the agent sees its data key `config`
  cases.push({
    id: "edge/configmap-shape",
    file: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ip-masq-agent\n  namespace: kube-system\ndata:\n  config: |\n    cidrLimit: 1\n",
    mounted: "cidrLimit: 1\n",
    flags: [],
    backend: "nft",
  });
  // a null list entry: Go's JSON decoder reuses the default list's backing array and leaves the
  // element as it was, so the agent keeps the default CIDR at that position (an empty string past
  // the defaults' length)
  for (const [id, file, flags] of [
    ["cidrs-null-entry", "nonMasqueradeCIDRs:\n  - null\n", []],
    ["cidrs-null-second", "nonMasqueradeCIDRs: [192.168.0.0/16, null]\n", []],
    [
      "cidrs-null-reserved",
      "nonMasqueradeCIDRs: [null, null, null, null]\n",
      ["--nomasq-all-reserved-ranges=true"],
    ],
    [
      "cidrs-null-past-defaults",
      "nonMasqueradeCIDRs: [10.0.0.0/8, 1.0.0.0/8, 2.0.0.0/8, null]\n",
      [],
    ],
    ["cidrs-mistyped-entry", "nonMasqueradeCIDRs: [10.1.0.0/16, 7]\n", []],
  ] as const) {
    cases.push({ id: `edge/${id}`, file, flags, backend: "nft" });
  }
  return cases;
}

/** mulberry32: a small seeded generator, so a failing random case can be run again. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` random configs and flags from `seed`, half of them on the legacy iptables backend. */
export function randomCases(seed: number, count: number): AgentCase[] {
  const r = rng(seed);
  const int = (n: number) => Math.floor(r() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const v4 = () => {
    const len = int(33);
    const bytes = [int(256), int(256), int(256), int(256)];
    const addr = (b: number[]) => b.join(".");
    if (r() < 0.7) {
      // aligned to its prefix
      const n = ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
      const masked = len === 0 ? 0 : (n & (~0 << (32 - len))) >>> 0;
      return `${addr([masked >>> 24, (masked >>> 16) & 255, (masked >>> 8) & 255, masked & 255])}/${len}`;
    }
    return `${addr(bytes)}/${len}`;
  };
  const v6 = () => {
    const len = pick([7, 10, 32, 48, 64, 128, 104]);
    const groups = Array.from({ length: 8 }, () => int(65536).toString(16));
    const full = groups.join(":");
    return pick([
      `fc00::/7`,
      `2001:db8::/32`,
      `${full}/${len}`,
      `fe80::/10`,
      `::ffff:10.0.0.0/104`,
    ]);
  };
  const odd = () =>
    pick([
      "10.1.2.3",
      "abcdefg",
      "010.0.0.0/8",
      "10.0.0.0/33",
      "10.0.0.0/08",
      " 10.0.0.0/8",
      "0.0.0.0/0",
      "::/0",
      "10.0.0.0/8",
      "",
    ]);
  const cases: AgentCase[] = [];
  for (let i = 0; i < count; i++) {
    const config: Record<string, unknown> = {};
    const shape = r();
    if (shape < 0.1) config["nonMasqueradeCIDRs"] = null;
    else if (shape < 0.15) config["nonMasqueradeCIDRs"] = [];
    else if (shape < 0.9) {
      config["nonMasqueradeCIDRs"] = Array.from({ length: 1 + int(6) }, () => {
        const k = r();
        return k < 0.55 ? v4() : k < 0.8 ? v6() : odd();
      });
    }
    if (r() < 0.3) config["cidrLimit"] = int(8);
    if (r() < 0.4) config["masqLinkLocal"] = r() < 0.5;
    if (r() < 0.3) config["masqLinkLocalIPv6"] = r() < 0.5;
    if (r() < 0.3) config["resyncInterval"] = pick(["1s", "90s", "1m30s", "250ms", "2h"]);
    const flags: string[] = [];
    if (r() < 0.5) flags.push(`--enable-ipv6=${r() < 0.8}`);
    if (r() < 0.3) flags.push(`--nomasq-all-reserved-ranges=${r() < 0.7}`);
    if (r() < 0.3) flags.push(`--random-fully=${r() < 0.5}`);
    if (r() < 0.25)
      flags.push(`--to-ports=${pick(["1024-29999", "80,443", "1024-29999,32768-65535", "7"])}`);
    if (r() < 0.15) flags.push("--masq-chain=MY-MASQ");
    const file = r() < 0.5 ? JSON.stringify(config) : toYaml(config);
    cases.push({ id: `random/${seed}/${i}`, file, flags, backend: i % 2 === 0 ? "nft" : "legacy" });
  }
  return cases;
}

/** Block YAML as a person writes the ConfigMap's data (strings quoted only when they need it). */
function toYaml(config: Readonly<Record<string, unknown>>): string {
  const scalar = (x: string) =>
    /^[A-Za-z0-9][\w./:-]*$/.test(x) && !/^[\d.]+$/.test(x) ? x : JSON.stringify(x);
  const value = (x: unknown) => (typeof x === "string" ? scalar(x) : JSON.stringify(x));
  const lines: string[] = [];
  for (const [k, v] of Object.entries(config)) {
    if (Array.isArray(v) && v.length > 0) lines.push(`${k}:`, ...v.map((x) => `  - ${value(x)}`));
    else lines.push(`${k}: ${value(v)}`);
  }
  return `${lines.join("\n")}\n`;
}
