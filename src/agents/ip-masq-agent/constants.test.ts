import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  AGENT_CONFIG_PATH,
  DEFAULT_NON_MASQ_CIDRS,
  decodeMasqConfig,
  defaultMasqConfig,
  LINK_LOCAL_V4,
  LINK_LOCAL_V6,
  RESERVED_NON_MASQ_CIDRS,
  validateMasqConfig,
} from "./config.ts";
import { agentFlagsFromArgs, DEFAULT_AGENT_FLAGS } from "./flags.ts";
import { formatGoDuration } from "./go-duration.ts";
import { jumpComment, MASQUERADE_COMMENT, RETURN_COMMENT, TO_PORTS_PROTOCOLS } from "./rules.ts";
import { loadVectors } from "./test-helpers/vectors.ts";

const k = loadVectors().constants as Record<string, unknown> & {
  flags: Record<string, unknown>;
  error_formats: Record<string, string>;
};

/** Go's fmt.Sprintf for the verbs the agent's formats use (%d, %s, %v, %q). */
function sprintf(format: string, ...args: (string | number)[]): string {
  let i = 0;
  return format.replace(/%[dsvq]/g, (verb) => {
    const a = args[i++];
    return verb === "%q" ? JSON.stringify(a) : String(a);
  });
}

describe("the agent's constants (vectors.json constants)", () => {
  it("paths, chain and defaults", () => {
    assert.equal(AGENT_CONFIG_PATH, k["config_path"]);
    assert.equal(DEFAULT_AGENT_FLAGS.masqChain, k["default_masq_chain"]);
    assert.equal(LINK_LOCAL_V4, k["link_local_v4"]);
    assert.equal(LINK_LOCAL_V6, k["link_local_v6"]);
    assert.deepEqual([...DEFAULT_NON_MASQ_CIDRS], k["default_nonMasqueradeCIDRs"]);
    assert.deepEqual(
      [...RESERVED_NON_MASQ_CIDRS],
      k["default_nonMasqueradeCIDRs_with_nomasq_all_reserved_ranges"],
    );
    const d = defaultMasqConfig();
    assert.equal(Number(d.cidrLimit), k["default_cidrLimit"]);
    assert.equal(d.masqLinkLocal, k["default_masqLinkLocal"]);
    assert.equal(d.masqLinkLocalIPv6, k["default_masqLinkLocalIPv6"]);
    // "60s" as written in NewMasqConfig; Go prints the same duration as 1m0s
    assert.equal(formatGoDuration(d.resyncIntervalNs), "1m0s");
    assert.equal(d.resyncIntervalNs, 60_000_000_000n);
    assert.equal(k["default_resyncInterval"], "60s");
  });

  it("flags and their defaults", () => {
    assert.deepEqual(
      {
        "masq-chain": DEFAULT_AGENT_FLAGS.masqChain,
        "to-ports": DEFAULT_AGENT_FLAGS.toPorts,
        "nomasq-all-reserved-ranges": DEFAULT_AGENT_FLAGS.nomasqAllReservedRanges,
        "enable-ipv6": DEFAULT_AGENT_FLAGS.enableIpv6,
        "random-fully": DEFAULT_AGENT_FLAGS.randomFully,
      },
      k.flags,
    );
    assert.deepEqual([...TO_PORTS_PROTOCOLS], k["to_ports_protocols"]);
  });

  it("comment strings", () => {
    assert.equal(jumpComment("X"), sprintf(k["comment_postrouting_jump_format"] as string, "X"));
    assert.equal(RETURN_COMMENT, k["comment_nonmasq_return"]);
    assert.equal(MASQUERADE_COMMENT, k["comment_masquerade"]);
  });

  it("error texts follow the agent's formats", () => {
    const f = k.error_formats;
    const validate = (cidrs: string[], limit = 64, enableIpv6 = false) => {
      const r = decodeMasqConfig(JSON.stringify({ nonMasqueradeCIDRs: cidrs, cidrLimit: limit }));
      assert.ok("config" in r);
      return validateMasqConfig(r.config, { enableIpv6 })?.message;
    };
    assert.equal(validate(["10.0.0.0/8", "10.1.0.0/16"], 1), sprintf(f["cidr_limit"]!, 1, 2));
    assert.equal(validate(["x"]), sprintf(f["cidr_parse"]!, "x", "invalid CIDR address: x"));
    assert.equal(
      validate(["10.0.0.1/8"]),
      sprintf(f["cidr_align"]!, "10.0.0.1/8", "10.0.0.1", "10.0.0.0/8"),
    );
    assert.equal(validate(["fc00::/7"]), sprintf(f["ipv6_not_enabled"]!, "fc00::/7"));
    assert.equal(
      agentFlagsFromArgs(["--to-ports=x"]).value.fatal,
      sprintf(f["bad_to_ports_flag_fatal"]!, "x", 'strconv.Atoi: parsing "x": invalid syntax'),
    );
  });
});
