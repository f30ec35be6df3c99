/**
 * Cilium's readers and semantics: the Masquerading line and the ipmasq listing in the forms the
 * agent prints them (fixtures/README.md says where each comes from), cilium-config's keys with
 * their lines, Cilium's ip-masq-agent reading (defaults, replacement, link-local, refusal), GKE's
 * EgressNATPolicy, the BPF datapath's order, and the iptables rules as the agent's own tests in
 * pkg/datapath/iptables/iptables_test.go expect them.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { formatCidr, parseCidr, parseIp } from "../../net/cidr.ts";
import { bpfMasqueradeVerdict } from "./bpf-masquerade.ts";
import { readCiliumConfig } from "./config.ts";
import { noSnatDestinationFor, readEgressNatPolicies } from "./egress-nat-policy.ts";
import {
  CILIUM_DEFAULT_NON_MASQ_CIDRS,
  nonMasqEntryFor,
  readCiliumIpMasqIntent,
} from "./ip-masq-agent.ts";
import { readIpMasqList } from "./ipmasq-list.ts";
import { ciliumMasqueradeRules, feederRule } from "./rules.ts";
import { readCiliumStatus } from "./status.ts";

const fixture = (f: string) => readFileSync(new URL(`fixtures/${f}`, import.meta.url), "utf8");
const objects = (yaml: string) => readKubeObjects(yaml, "cluster/cilium.yaml").value;

describe("cilium-dbg bpf ipmasq list", () => {
  it("reads the docs' table, one CIDR a line with its line", () => {
    const r = readIpMasqList(fixture("ipmasq-list-docs.txt"), "nodes/n/cilium-bpf-ipmasq.txt");
    assert.deepEqual(r.diagnostics, []);
    assert.deepEqual(
      r.value.entries.map((e) => [e.text, e.source.line]),
      [
        ["10.0.0.0/8", 2],
        ["172.16.0.0/12", 3],
        ["192.168.0.0/16", 4],
      ],
    );
  });
  it("reads -o json, an empty map, and names a bad line", () => {
    const j = readIpMasqList(fixture("ipmasq-list-json.txt"), "f");
    assert.deepEqual(
      j.value.entries.map((e) => e.text),
      ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"],
    );
    assert.equal(j.value.entries[3]?.source.line, 5);
    assert.equal(readIpMasqList("No entries found.\n", "f").value.empty, true);
    const bad = readIpMasqList("IP PREFIX/ADDRESS   \n10.0.0.0/8          \nbogus\n", "f");
    assert.equal(bad.value.entries.length, 1);
    assert.deepEqual(
      [bad.diagnostics[0]?.code, bad.diagnostics[0]?.source?.line],
      ["CILIUM_IPMASQ_ENTRY", 3],
    );
  });
});

describe("cilium-dbg status: the Masquerading line", () => {
  it("BPF with ip-masq-agent, devices, exclusion CIDR and families", () => {
    const r = readCiliumStatus(fixture("status-bpf-ip-masq-agent.txt"), "s");
    assert.deepEqual(r.diagnostics, []);
    const s = r.value!;
    assert.equal(s.mode, "BPF");
    assert.equal(s.ipMasqAgent, true);
    assert.deepEqual(s.devices, ["eth0"]);
    assert.equal(formatCidr(s.snatExclusionCidr!), "10.0.0.0/16");
    assert.deepEqual([s.ipv4, s.ipv6, s.source.line], [true, false, 19]);
  });
  it("the docs' older form, IPv4 and IPv6 exclusion CIDRs, IPTables, Disabled", () => {
    const docs = readCiliumStatus(
      "Masquerading:   BPF (ip-masq-agent)   [eth0, eth1]  10.0.0.0/16\n",
      "s",
    ).value!;
    assert.deepEqual(docs.devices, ["eth0", "eth1"]);
    assert.equal(docs.ipv4, undefined);
    const dual = readCiliumStatus(
      "Masquerading:            BPF   [nm-bond]   172.31.24.0/24 fd85:ee78:d8a6:8607::24:0/128 [IPv4: Enabled, IPv6: Enabled]\n",
      "s",
    ).value!;
    assert.equal(formatCidr(dual.snatExclusionCidrV6!), "fd85:ee78:d8a6:8607::24:0/128");
    assert.equal(readCiliumStatus(fixture("status-iptables.txt"), "s").value?.mode, "IPTables");
    assert.equal(readCiliumStatus("Masquerading:  Disabled\n", "s").value?.mode, "Disabled");
  });
  it("a line it cannot read is a diagnostic with its line, not a guess", () => {
    const r = readCiliumStatus("Cilium:  Ok\nMasquerading:   eBPF-ish\n", "s");
    assert.equal(r.value, undefined);
    assert.deepEqual(
      [r.diagnostics[0]?.code, r.diagnostics[0]?.source?.line],
      ["CILIUM_STATUS_MASQ", 2],
    );
  });
});

const CONFIG = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cilium-config
  namespace: kube-system
data:
  enable-bpf-masquerade: "true"
  enable-ip-masq-agent: "true"
  native-routing-cidr: 10.0.0.0/16
  routing-mode: native
  enable-ipv6-masquerade: "maybe"
`;

describe("cilium-config", () => {
  it("reads the masquerade keys with their lines, the older key name, and defaults", () => {
    const r = readCiliumConfig(objects(CONFIG));
    const c = r.value!;
    assert.equal(c.settings.bpfMasquerade, true);
    assert.equal(c.settings.ipMasqAgent, true);
    assert.equal(c.settings.ipv4Masquerade, true, "default true");
    assert.equal(c.settings.nativeRouting, true);
    assert.equal(formatCidr(c.settings.ipv4NativeRoutingCidr!), "10.0.0.0/16");
    assert.deepEqual(
      [c.nativeRoutingEntry?.key, c.nativeRoutingEntry?.source.line],
      ["native-routing-cidr", 9],
    );
    assert.deepEqual(
      [r.diagnostics[0]?.code, r.diagnostics[0]?.source?.line],
      ["CILIUM_CONFIG_BOOL", 11],
    );
  });
});

const ipMasqCm = (config: string) => `apiVersion: v1
kind: ConfigMap
metadata:
  name: ip-masq-agent
  namespace: kube-system
data:
  config: |
${config
  .split("\n")
  .map((l) => `    ${l}`)
  .join("\n")}
`;

describe("Cilium's ip-masq-agent reading (pkg/ipmasq)", () => {
  it("without a ConfigMap: the eleven defaults and link-local", () => {
    const r = readCiliumIpMasqIntent([]);
    assert.equal(r.value.usesDefaults, true);
    const texts = r.value.entries!.map((e) => e.text);
    for (const c of CILIUM_DEFAULT_NON_MASQ_CIDRS) assert.ok(texts.includes(c), c);
    assert.ok(texts.includes("169.254.0.0/16") && texts.includes("fe80::/10"));
    assert.equal(nonMasqEntryFor(r.value.entries!, parseIp("100.64.3.4"))?.origin, "default");
  });
  it("a list replaces the defaults (even an empty one); masqLinkLocal drops 169.254/16; keys match case-insensitively", () => {
    const r = readCiliumIpMasqIntent(
      objects(
        ipMasqCm("NonMasqueradeCIDRs:\n- 10.20.0.0/16\nmasqLinkLocal: true\nresyncInterval: 60s"),
      ),
    );
    assert.deepEqual(
      r.value.entries!.map((e) => [e.text, e.origin]),
      [
        ["10.20.0.0/16", "config"],
        ["fe80::/10", "link-local"],
      ],
    );
    assert.equal(r.value.entries![0]?.source?.line, 9, "the list line in the ConfigMap file");
    const empty = readCiliumIpMasqIntent(objects(ipMasqCm("nonMasqueradeCIDRs: []")));
    assert.deepEqual(
      empty.value.entries!.map((e) => e.origin),
      ["link-local", "link-local"],
    );
  });
  it("a CIDR it refuses leaves the map unknown, with the line", () => {
    const r = readCiliumIpMasqIntent(
      objects(ipMasqCm("nonMasqueradeCIDRs:\n- 10.20.0.0\n- 10.30.0.0/16")),
    );
    assert.equal(r.value.entries, undefined);
    assert.deepEqual(
      [r.diagnostics[0]?.code, r.diagnostics[0]?.source?.line],
      ["CILIUM_IPMASQ_CONFIG", 9],
    );
  });
});

describe("GKE EgressNATPolicy", () => {
  it("reads NoSNAT destinations with their lines and which are GKE-managed", () => {
    const r = readEgressNatPolicies(
      objects(`apiVersion: networking.gke.io/v1
kind: EgressNATPolicy
metadata:
  name: default
spec:
  action: NoSNAT
  destinations:
  - cidr: 10.0.0.0/8
  - cidr: 172.16.0.0/12
  - cidr: nope
`),
    );
    const d = noSnatDestinationFor(r.value, parseIp("10.20.30.40"));
    assert.deepEqual([d?.text, d?.source.line, d?.managed], ["10.0.0.0/8", 8, false]);
    assert.deepEqual(
      [r.diagnostics[0]?.code, r.diagnostics[0]?.source?.line],
      ["GKE_EGRESS_NAT_CIDR", 10],
    );
  });
});

describe("the BPF datapath's order (bpf/lib/nat.h)", () => {
  const base = {
    exclusion: { cidr: parseCidr("10.0.0.0/16") },
    exclusionKnown: true,
    ipMasqAgent: true,
    map: {
      entries: [{ text: "10.0.0.0/8", cidr: parseCidr("10.0.0.0/8") }],
      from: "node" as const,
    },
    nodeIps: [parseIp("192.168.1.11")],
    nativeRouting: true,
  };
  it("exclusion CIDR, then the ip-masq-agent map, then remote nodes, else masquerade", () => {
    assert.equal(bpfMasqueradeVerdict(base, parseIp("10.0.2.9")).kind, "keep");
    const m = bpfMasqueradeVerdict(base, parseIp("10.20.30.40"));
    assert.ok(m.kind === "keep" && m.why === "ip-masq-agent");
    const n = bpfMasqueradeVerdict(base, parseIp("192.168.1.11"));
    assert.ok(n.kind === "keep" && n.why === "remote-node");
    assert.equal(bpfMasqueradeVerdict(base, parseIp("8.8.8.8")).kind, "masquerade");
    assert.equal(
      bpfMasqueradeVerdict({ ...base, ipMasqAgent: false }, parseIp("10.20.30.40")).kind,
      "masquerade",
    );
    const u = bpfMasqueradeVerdict({ ...base, map: undefined } as never, parseIp("10.20.30.40"));
    assert.deepEqual(u, { kind: "unknown", missing: "map" });
  });
});

describe("the iptables rules as the agent writes them", () => {
  const input = {
    family: 4 as const,
    allocRange: "10.0.0.0/16",
    snatDstExclusionCidr: "192.168.0.0/16",
    masqueradeInterfaces: [],
    randomFully: false,
    nodeIpsetNeeded: false,
    tunneling: false,
    hostMasqueradeIp: "10.0.0.96",
    localDeliveryInterface: "cilium_host",
    endpointRoutes: false,
  };
  it("matches TestAllEgressMasqueradeCmds (no interfaces; eth+ and ens+; --random-fully)", () => {
    const masq = (i: typeof input) =>
      ciliumMasqueradeRules(i)
        .filter((r) => r.comment === "cilium masquerade non-cluster")
        .map((r) => ["-t", "nat", "-A", r.chain, ...r.spec]);
    assert.deepEqual(masq(input), [
      [
        "-t",
        "nat",
        "-A",
        "CILIUM_POST_nat",
        "!",
        "-d",
        "192.168.0.0/16",
        "-s",
        "10.0.0.0/16",
        "!",
        "-o",
        "cilium_+",
        "-m",
        "comment",
        "--comment",
        "cilium masquerade non-cluster",
        "-j",
        "MASQUERADE",
      ],
    ]);
    const two = masq({
      ...input,
      masqueradeInterfaces: ["eth+", "ens+"] as never,
      randomFully: true,
    });
    assert.deepEqual(
      two.map((r) => r.slice(7, 9)),
      [
        ["-o", "eth+"],
        ["-o", "ens+"],
      ],
    );
    assert.ok(two.every((r) => r.at(-1) === "--random-fully"));
  });
  it("native routing adds the node-set ACCEPT first; the chain's fixed tail follows; feeder as getFeedRule", () => {
    const rules = ciliumMasqueradeRules({ ...input, nodeIpsetNeeded: true });
    assert.deepEqual(
      rules.map((r) => r.comment),
      [
        "exclude traffic to cluster nodes from masquerade",
        "cilium masquerade non-cluster",
        "exclude proxy return traffic from masquerade",
        "cilium host->cluster from 127.0.0.1 masquerade",
        "hairpin traffic that originated from a local pod",
      ],
    );
    assert.deepEqual(feederRule("CILIUM_POST_nat", "POSTROUTING").spec, [
      "-m",
      "comment",
      "--comment",
      "cilium-feeder: CILIUM_POST_nat",
      "-j",
      "CILIUM_POST_nat",
    ]);
  });
});
