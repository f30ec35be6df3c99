import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeMasqConfig, type MasqConfig } from "./config.ts";
import { type AgentFlags, DEFAULT_AGENT_FLAGS } from "./flags.ts";
import { parseIntervals } from "./intervals.ts";
import {
  agentChain,
  agentFakeSave,
  agentRestoreInput,
  agentSavedLines,
  goFormatFloatF,
  restoreProblems,
  savedProbability,
} from "./rules.ts";
import { loadVectors, type RuleCase, type VectorConfig } from "./test-helpers/vectors.ts";

const vectors = loadVectors();

function configOf(v: VectorConfig): MasqConfig {
  const r = decodeMasqConfig(JSON.stringify(v));
  if ("error" in r) throw new Error(r.error.message);
  return r.config;
}

function flagsOf(c: RuleCase, randomFully: boolean, enableIpv6: boolean): AgentFlags {
  return { ...DEFAULT_AGENT_FLAGS, masqChain: c.masq_chain, randomFully, enableIpv6 };
}

function ruleCases(family: 4 | 6, cases: readonly RuleCase[]): void {
  const enableIpv6 = family === 6;
  for (const c of cases) {
    describe(c.id, () => {
      const config = configOf(c.config);
      for (const v of c.variants ?? []) {
        const randomFully = v.random_fully_flag !== "false";
        it(`fake save with --random-fully=${v.random_fully_flag ?? "(default)"}, iptables ${v.iptables_has_random_fully ? "has" : "lacks"} it`, () => {
          assert.equal(
            agentFakeSave(config, family, {
              flags: flagsOf(c, randomFully, enableIpv6),
              hasRandomFully: v.iptables_has_random_fully,
            }),
            v.expected_fake_save,
          );
        });
      }
      if (c.iptables_restore_input_random_fully !== undefined) {
        it("iptables-restore input, with and without --random-fully", () => {
          assert.equal(
            agentRestoreInput(config, family, { flags: flagsOf(c, true, enableIpv6) }),
            c.iptables_restore_input_random_fully,
          );
          assert.equal(
            agentRestoreInput(config, family, { flags: flagsOf(c, false, enableIpv6) }),
            c.iptables_restore_input_no_random_fully,
          );
        });
      }
      const realLines =
        c.real_iptables_save_lines_random_fully_DERIVED ??
        c.real_ip6tables_save_lines_random_fully_DERIVED;
      if (realLines) {
        it("real iptables-save rendering", () => {
          const chain = agentChain(config, family, { flags: flagsOf(c, true, enableIpv6) });
          assert.ok(chain);
          assert.deepEqual(agentSavedLines(chain), realLines);
        });
      }
    });
  }
}

describe("IPv4 rules (upstream TestSyncMasqRules + derived)", () => {
  ruleCases(4, vectors.sync_masq_rules_ipv4);
});

describe("IPv6 rules (upstream TestSyncMasqRulesIPv6)", () => {
  ruleCases(6, vectors.sync_masq_rules_ipv6);
  it("writes no IPv6 rules without --enable-ipv6", () => {
    const config = configOf({ nonMasqueradeCIDRs: ["fc00::/7"] });
    assert.equal(agentRestoreInput(config, 6, { flags: DEFAULT_AGENT_FLAGS }), undefined);
  });
});

describe("MASQUERADE rules with --to-ports (upstream TestWriteMasqRules)", () => {
  // a chain with only the MASQUERADE rules: no link-local, no CIDRs
  const config = configOf({ nonMasqueradeCIDRs: [], masqLinkLocal: true });
  for (const v of vectors.write_masq_rules) {
    it(`${v.id}: ${v.to_ports_flag ?? "(unset)"}`, () => {
      const parsed = parseIntervals(v.to_ports_flag ?? "");
      const toPorts = v.to_ports_flag === null ? [] : "intervals" in parsed ? parsed.intervals : [];
      for (const [randomFully, want] of [
        [true, v.expected_lines_random_fully],
        [false, v.expected_lines_no_random_fully],
      ] as const) {
        const chain = agentChain(config, 4, {
          flags: { ...DEFAULT_AGENT_FLAGS, randomFully },
          toPorts,
        });
        assert.equal(chain?.rules.map((r) => `${r.written}\n`).join(""), want);
      }
    });
  }

  it("renders probabilities as iptables-save prints them (derived, confirmed on a real kernel)", () => {
    for (const [p, want] of Object.entries(vectors.derived_statistic_probability_save_rendering)) {
      assert.equal(savedProbability(Number(p)), want);
    }
  });
});

describe("RETURN rule (upstream TestWriteNonMasqRule)", () => {
  for (const v of vectors.write_nonmasq_rule) {
    it(v.id, () => {
      const family = v.cidr.includes(":") ? 6 : 4;
      const config = configOf({
        nonMasqueradeCIDRs: [v.cidr],
        masqLinkLocal: true,
        masqLinkLocalIPv6: true,
      });
      const chain = agentChain(config, family, {
        flags: { ...DEFAULT_AGENT_FLAGS, enableIpv6: true },
      });
      assert.equal(`${chain?.rules[0]?.written}\n`, v.expected);
    });
  }
});

describe("saved rendering details", () => {
  it("omits -d for a /0 entry, as iptables-save does", () => {
    const config = configOf({ nonMasqueradeCIDRs: ["0.0.0.0/0"], masqLinkLocal: true });
    const chain = agentChain(config, 4, { flags: DEFAULT_AGENT_FLAGS });
    assert.equal(
      chain?.rules[0]?.saved,
      '-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
    );
  });

  it("reads a leading-zero prefix as iptables does: octal (/010 is /8; the agent validated /10)", () => {
    const config = configOf({ nonMasqueradeCIDRs: ["10.0.0.0/010"], masqLinkLocal: true });
    const chain = agentChain(config, 4, { flags: DEFAULT_AGENT_FLAGS })!;
    assert.match(chain.rules[0]!.written, / -d 10\.0\.0\.0\/010 /);
    assert.match(chain.rules[0]!.saved, / -d 10\.0\.0\.0\/8 /);
    assert.deepEqual(restoreProblems(chain), []);
  });

  it("names what the real iptables-restore refuses although the agent accepted it", () => {
    const config = configOf({
      nonMasqueradeCIDRs: ["10.0.0.0/08", "::ffff:10.0.0.0/104"],
      masqLinkLocal: true,
    });
    const chain = agentChain(config, 4, {
      flags: { ...DEFAULT_AGENT_FLAGS, masqChain: "A-CHAIN-NAME-LONGER-THAN-28-CHARS" },
      toPorts: [{ first: 1024, last: 70000 }],
    })!;
    assert.deepEqual(
      restoreProblems(chain).map((p) => [p.line, p.message]),
      [
        [2, "chain name `A-CHAIN-NAME-LONGER-THAN-28-CHARS' too long (must be under 29 chars)"],
        [3, "invalid mask `08' specified"],
        [4, "invalid mask `104' specified"],
        [5, "Port `70000' not valid"],
        [6, "Port `70000' not valid"],
        [7, "Port `70000' not valid"],
      ],
    );
  });

  it("formats floats like strconv.FormatFloat(x, 'f', -1, 64)", () => {
    assert.equal(goFormatFloatF(0.5), "0.5");
    assert.equal(goFormatFloatF(1e-7), "0.0000001");
    assert.equal(goFormatFloatF(1.5e-8), "0.000000015");
    assert.equal(goFormatFloatF(0.469292562840114), "0.469292562840114");
  });
});
