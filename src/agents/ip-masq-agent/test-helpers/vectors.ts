/**
 * @module agents/ip-masq-agent/test-helpers/vectors — loads the upstream test vectors (fixtures/vectors.json)
 * for the tests; shared by the test files, not part of the library.
 */
import { readFileSync } from "node:fs";

export interface VectorConfig {
  readonly nonMasqueradeCIDRs?: readonly string[] | null;
  readonly cidrLimit?: number;
  readonly masqLinkLocal?: boolean;
  readonly masqLinkLocalIPv6?: boolean;
  readonly resyncInterval?: string;
}

export interface VectorFlags {
  readonly "enable-ipv6"?: boolean;
  readonly "nomasq-all-reserved-ranges"?: boolean;
}

export interface RuleVariant {
  readonly random_fully_flag: "true" | "false" | null;
  readonly iptables_has_random_fully: boolean;
  readonly expected_fake_save: string;
}

export interface RuleCase {
  readonly id: string;
  readonly config: VectorConfig;
  readonly masq_chain: string;
  readonly flags?: VectorFlags;
  readonly variants?: readonly RuleVariant[];
  readonly iptables_restore_input_random_fully?: string;
  readonly iptables_restore_input_no_random_fully?: string;
  readonly real_iptables_save_lines_random_fully_DERIVED?: readonly string[];
  readonly real_ip6tables_save_lines_random_fully_DERIVED?: readonly string[];
}

export interface Vectors {
  readonly validate_config: readonly {
    readonly id: string;
    readonly config: VectorConfig;
    readonly flags?: VectorFlags;
    readonly expected_error: string | null;
  }[];
  readonly sync_config: readonly {
    readonly id: string;
    readonly fs: "file" | "not_exist";
    readonly file_content: string | null;
    readonly flags: VectorFlags;
    readonly previous_config: VectorConfig;
    readonly expected_error: string | null;
    readonly expected_config: VectorConfig;
  }[];
  readonly sync_masq_rules_ipv4: readonly RuleCase[];
  readonly sync_masq_rules_ipv6: readonly RuleCase[];
  readonly write_masq_rules: readonly {
    readonly id: string;
    readonly to_ports_flag: string | null;
    readonly expected_lines_no_random_fully: string;
    readonly expected_lines_random_fully: string;
  }[];
  readonly derived_statistic_probability_save_rendering: Readonly<Record<string, string>>;
  readonly write_nonmasq_rule: readonly {
    readonly id: string;
    readonly cidr: string;
    readonly expected: string;
  }[];
  readonly interval: {
    readonly size: readonly { interval: [number, number]; want: number }[];
    readonly string: readonly { interval: [number, number]; want: string }[];
    readonly parse_interval: readonly { input: string; want?: [number, number]; error?: true }[];
    readonly intervals_size: readonly { intervals: [number, number][] | null; want: number }[];
    readonly parse_intervals: readonly {
      input: string;
      want?: [number, number][];
      error?: true;
    }[];
  };
  readonly constants: Readonly<Record<string, unknown>>;
}

export function loadVectors(): Vectors {
  return JSON.parse(
    readFileSync(new URL("../fixtures/vectors.json", import.meta.url), "utf8"),
  ) as Vectors;
}
