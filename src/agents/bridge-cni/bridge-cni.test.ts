/**
 * The bridge plugin's semantics: chain names against the plugin's own test vectors
 * (pkg/utils/utils_test.go), the comment and rules as SetupIPMasq writes them and iptables-save
 * prints them, the CNI config reader (conflist and conf, Go's case-insensitive keys and last-wins
 * duplicates, the default ipMasq false, lines kept, bad files as diagnostics with their line), the
 * runtime's choice of file, and the reader fuzzed.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { mutatedText } from "../../lab/test-helpers/text-mutations.ts";
import { parseCidr, parseIp } from "../../net/cidr.ts";
import { activeConfig, readCniConfig } from "./conflist.ts";
import { formatChainName, formatComment, parseComment, podMasqRules } from "./rules.ts";

const FILE = "nodes/n1/cni/10-containerd-net.conflist";

const CONFLIST = `{
  "cniVersion": "1.0.0",
  "name": "containerd-net",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "10.88.0.0/16" }], [{ "subnet": "fd00:88::/64" }]]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
`;

describe("bridge plugin rules", () => {
  it("chain names match the plugin's own test vectors", () => {
    assert.equal(formatChainName("test", "1234"), "CNI-2bbe0c48b91a7d1b8a6753a8");
    assert.equal(
      formatChainName("testalongnamethatdoesnotmakesense", "1234"),
      "CNI-374f33fe84ab0ed84dcdebe3",
    );
  });
  it("writes ACCEPT for the subnet, MASQUERADE but multicast, the POSTROUTING jump", () => {
    const { chain, rules } = podMasqRules({
      network: "containerd-net",
      containerId: "abc",
      ip: parseIp("10.88.0.5"),
      subnet: parseCidr("10.88.0.0/16"),
    });
    const c = '"name: \\"containerd-net\\" id: \\"abc\\""';
    assert.deepEqual(
      rules.map((r) => r.saved),
      [
        `-A ${chain} -d 10.88.0.0/16 -m comment --comment ${c} -j ACCEPT`,
        `-A ${chain} ! -d 224.0.0.0/4 -m comment --comment ${c} -j MASQUERADE`,
        `-A POSTROUTING -s 10.88.0.5/32 -m comment --comment ${c} -j ${chain}`,
      ],
    );
    assert.deepEqual(rules[0]?.spec.slice(0, 4), ["-d", "10.88.0.5/16", "-j", "ACCEPT"]);
    assert.equal(formatComment("containerd-net", "abc"), 'name: "containerd-net" id: "abc"');
    assert.deepEqual(parseComment('name: "containerd-net" id: "abc"'), {
      network: "containerd-net",
      containerId: "abc",
    });
    const v6 = podMasqRules({
      network: "n",
      containerId: "x",
      ip: parseIp("fd00:88::5"),
      subnet: parseCidr("fd00:88::/64"),
    });
    assert.match(v6.rules[1]?.saved ?? "", /! -d ff00::\/8 /);
    assert.equal(v6.rules[2]?.family, 6);
  });
});

describe("readCniConfig", () => {
  it("reads a conflist's bridge plugin with lines", () => {
    const r = readCniConfig(CONFLIST, FILE);
    assert.deepEqual(r.diagnostics, []);
    assert.deepEqual(r.value.types, ["bridge", "portmap"]);
    const b = r.value.bridges[0];
    assert.equal(b?.network, "containerd-net");
    assert.equal(b?.ipMasq, true);
    assert.equal(b?.ipMasqSource?.line, 9);
    assert.deepEqual(
      b?.subnets.map((s) => [s.text, s.source.line]),
      [
        ["10.88.0.0/16", 12],
        ["fd00:88::/64", 12],
      ],
    );
    assert.equal(b?.bridge, "cni0");
  });
  it("a .conf: one plugin; keys match as Go's decoder does; absent ipMasq is false", () => {
    const conf = `{"cniVersion":"0.4.0","name":"mynet","type":"bridge","IPMASQ":false,"ipmasq":true,
"ipam":{"type":"host-local","subnet":"10.22.0.0/16"}}`;
    const r = readCniConfig(conf, "n/cni/10-mynet.conf");
    assert.equal(r.value.bridges[0]?.ipMasq, true, "the last of the case-insensitive keys");
    const none = readCniConfig(`{"name":"x","type":"bridge"}`, "n/cni/a.conf");
    assert.equal(none.value.bridges[0]?.ipMasq, false);
    assert.equal(none.value.bridges[0]?.ipMasqSource, undefined);
  });
  it("bad files are diagnostics with their line; the runtime takes the first readable file", () => {
    const bad = readCniConfig('{\n  "name": "x",\n  "plugins": [ {"type": "bridge",, } ]\n}', FILE);
    assert.equal(bad.diagnostics[0]?.code, "CNI_CONFIG_SYNTAX");
    assert.equal(bad.diagnostics[0]?.source?.line, 3);
    const typed = readCniConfig(
      '{"name":"x","plugins":[{"type":"bridge",\n"ipMasq":"yes"}]}',
      FILE,
    );
    assert.equal(typed.diagnostics[0]?.code, "CNI_BRIDGE_FIELD_TYPE");
    assert.equal(typed.diagnostics[0]?.source?.line, 2);
    assert.equal(typed.value.bridges.length, 0);
    const a = readCniConfig(CONFLIST, "n/cni/20-b.conflist").value;
    const z = readCniConfig(
      '{"name":"calico","plugins":[{"type":"calico"}]}',
      "n/cni/10-calico.conflist",
    ).value;
    assert.equal(activeConfig([a, z])?.file, "n/cni/10-calico.conflist");
    assert.equal(activeConfig([a, bad.value])?.file, "n/cni/20-b.conflist");
  });
  it("never throws; every diagnostic names the file and a line of the input", () => {
    const text = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc
        .array(
          fc.constantFrom(
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            '"type"',
            '"bridge"',
            '"ipMasq"',
            "true",
            '"plugins"',
            '"ipam"',
            '"subnet"',
            '"10.0.0.0/8"',
            '"x/99"',
            "\n",
            "é",
          ),
          { maxLength: 60 },
        )
        .map((p) => p.join("")),
    );
    const inputs = fc.oneof(
      text,
      mutatedText([CONFLIST], ["\n", "{", "}", "[", ",", '"', ":", "true"], 40),
    );
    fc.assert(
      fc.property(inputs, (t) => {
        const r = readCniConfig(t, FILE);
        const lines = t.split("\n").length;
        for (const d of r.diagnostics) {
          assert.match(d.code, /^[A-Z][A-Z0-9_]*$/);
          assert.equal(d.source?.file, FILE);
          assert.ok((d.source?.line ?? 0) >= 1 && (d.source?.line ?? 0) <= lines, d.message);
        }
      }),
      { numRuns: 400 },
    );
  });
});
