import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { agentArgsFromDaemonSet } from "./daemonset-args.ts";
import { agentFlagsFromArgs, DEFAULT_AGENT_FLAGS, goParseBool } from "./flags.ts";

describe("agentFlagsFromArgs", () => {
  it("defaults to the agent's own defaults", () => {
    const r = agentFlagsFromArgs([]);
    assert.deepEqual(r.value.flags, DEFAULT_AGENT_FLAGS);
    assert.equal(r.value.flags.randomFully, true);
    assert.deepEqual(r.diagnostics, []);
  });

  it("reads the GCE addon's arguments", () => {
    const r = agentFlagsFromArgs(["--masq-chain=IP-MASQ", "--nomasq-all-reserved-ranges"]);
    assert.equal(r.value.flags.masqChain, "IP-MASQ");
    assert.equal(r.value.flags.nomasqAllReservedRanges, true);
    assert.deepEqual(r.value.set, ["masqChain", "nomasqAllReservedRanges"]);
  });

  it("accepts one or two dashes and a separate value for non-boolean flags", () => {
    const r = agentFlagsFromArgs(["-masq-chain", "X", "--to-ports", "1024-2047"]);
    assert.equal(r.value.flags.masqChain, "X");
    assert.equal(r.value.flags.toPorts, "1024-2047");
    assert.deepEqual(r.value.toPorts, [{ first: 1024, last: 2047 }]);
  });

  it("accepts every boolean spelling of strconv.ParseBool and refuses others", () => {
    for (const t of ["1", "t", "T", "TRUE", "true", "True"]) {
      assert.equal(agentFlagsFromArgs([`--enable-ipv6=${t}`]).value.flags.enableIpv6, true, t);
    }
    for (const f of ["0", "f", "F", "FALSE", "false", "False"]) {
      assert.equal(agentFlagsFromArgs([`--random-fully=${f}`]).value.flags.randomFully, false, f);
    }
    const bad = agentFlagsFromArgs(["--enable-ipv6=yes"]);
    assert.equal(bad.value.fatal, 'invalid boolean value "yes" for -enable-ipv6: parse error');
  });

  it("lets a later flag override an earlier one", () => {
    const r = agentFlagsFromArgs(["--random-fully=false", "--random-fully"]);
    assert.equal(r.value.flags.randomFully, true);
  });

  it("stops at the first non-flag argument, as Go's flag package does", () => {
    // `--enable-ipv6 false`: a boolean flag takes no separate value, so "false" ends parsing
    const r = agentFlagsFromArgs(["--enable-ipv6", "false", "--masq-chain=X"]);
    assert.equal(r.value.flags.enableIpv6, true);
    assert.equal(r.value.flags.masqChain, "IP-MASQ-AGENT");
    assert.equal(r.diagnostics[0]?.code, "IPMASQ_FLAG_STOP");
    assert.equal(r.value.fatal, undefined);
  });

  it("stops at --", () => {
    const r = agentFlagsFromArgs(["--", "--masq-chain=X"]);
    assert.equal(r.value.flags.masqChain, "IP-MASQ-AGENT");
  });

  it("treats an unknown flag as fatal with Go's text, and klog's flags as known", () => {
    assert.equal(
      agentFlagsFromArgs(["--masq-chian=X"]).value.fatal,
      "flag provided but not defined: -masq-chian",
    );
    const klog = agentFlagsFromArgs(["--v=2", "--logtostderr", "--vmodule", "x=1"]);
    assert.equal(klog.value.fatal, undefined);
  });

  it("reports bad syntax and a missing value", () => {
    assert.equal(agentFlagsFromArgs(["---x"]).value.fatal, "bad flag syntax: ---x");
    assert.equal(agentFlagsFromArgs(["-=x"]).value.fatal, "bad flag syntax: -=x");
    assert.equal(
      agentFlagsFromArgs(["--masq-chain"]).value.fatal,
      "flag needs an argument: -masq-chain",
    );
  });

  it("refuses a bad --to-ports with the agent's startup error", () => {
    assert.equal(
      agentFlagsFromArgs(["--to-ports=1024-"]).value.fatal,
      'Invalid --to-ports flag "1024-": strconv.Atoi: parsing "": invalid syntax',
    );
  });

  it("never throws on arbitrary arguments", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 12 }), { maxLength: 8 }), (args) => {
        const r = agentFlagsFromArgs(args);
        assert.equal(typeof r.value.flags.masqChain, "string");
      }),
    );
  });

  it("goParseBool matches strconv.ParseBool", () => {
    assert.equal(goParseBool("tRUE"), undefined);
    assert.equal(goParseBool(""), undefined);
  });
});

describe("agentArgsFromDaemonSet", () => {
  const ds = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ip-masq-agent
  namespace: kube-system
spec:
  template:
    spec:
      containers:
      - name: sidecar
        image: busybox
      - name: ip-masq-agent
        image: registry.k8s.io/networking/ip-masq-agent:v2.12.0
        command: ["/ip-masq-agent", "--v=2"]
        args:
          - --masq-chain=IP-MASQ
          - --nomasq-all-reserved-ranges
`;

  it("finds the agent container and joins command arguments and args", () => {
    const r = agentArgsFromDaemonSet(ds, "ds.yaml");
    assert.deepEqual(r.value?.args, [
      "--v=2",
      "--masq-chain=IP-MASQ",
      "--nomasq-all-reserved-ranges",
    ]);
    assert.equal(r.value?.container, "ip-masq-agent");
    assert.equal(r.value?.source.line, 15);
  });

  it("reads the same object printed as JSON in a List", () => {
    const list = JSON.stringify({
      apiVersion: "v1",
      kind: "List",
      items: [
        {
          apiVersion: "apps/v1",
          kind: "DaemonSet",
          metadata: { name: "agent" },
          spec: {
            template: {
              spec: {
                containers: [
                  { name: "a", image: "gke.gcr.io/ip-masq-agent:v2.9", args: ["--enable-ipv6"] },
                ],
              },
            },
          },
        },
      ],
    });
    assert.deepEqual(agentArgsFromDaemonSet(list, "l.json").value?.args, ["--enable-ipv6"]);
  });

  it("says so when there is no DaemonSet", () => {
    const r = agentArgsFromDaemonSet(
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
      "x.yaml",
    );
    assert.equal(r.value, undefined);
    assert.equal(r.diagnostics.at(-1)?.code, "IPMASQ_NO_DAEMONSET");
  });
});
