/**
 * Tests of `verifyChange` (the change record) on the example replica pair and on hand-written
 * before/after snapshots. The captures are `tcpdump -nn -r` text of a two-pool lab replica
 * (`podpath lab run masquerade --pools default:agent,legacy:no-agent`, before, and after with
 * `--non-masquerade 10.4.0.0/14`), with the interface names as the node sees them; the node
 * dumps are the example replica's own iptables-save files.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import {
  agentPodYaml,
  appPodYaml,
  configMapYaml,
  DAEMONSET_NOT_ON_LEGACY,
  ip,
  memorySnapshot,
  nodeYaml,
} from "./plan-fixtures.test.ts";
import { type ChangeRecord, isIntendedVerdict, verifyChange } from "./proof.ts";
import { renderChangeRecordMarkdown, renderChangeRecordText } from "./proof-render.ts";

const ROOT = join(import.meta.dirname, "../../..");
const EXAMPLE = join(ROOT, "examples/snat-exception-list");
const FIXED = join(ROOT, "examples/snat-exception-list-allowlisted");
const DUMP_BROAD = readFileSync(join(EXAMPLE, "nodes/gke-lab-default-0/iptables-save.txt"), "utf8");
const DUMP_NARROW = readFileSync(join(FIXED, "nodes/gke-lab-default-0/iptables-save.txt"), "utf8");
const DEST = { ip: ip("10.20.30.40"), port: 5432, text: "10.20.30.40:5432" };

const BROAD =
  "nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 172.16.0.0/12\n  - 192.168.0.0/16\nmasqLinkLocal: false\nresyncInterval: 60s\n";
const NARROW = "nonMasqueradeCIDRs:\n  - 10.4.0.0/14\nmasqLinkLocal: false\nresyncInterval: 60s\n";

const CAP = {
  beforeDefault: `16:28:09.593359 gkeveth0 In  IP 10.4.0.5.54220 > 10.20.30.40.5432: Flags [S], seq 1653560520, win 64240, options [mss 1460,sackOK,TS val 4103621077 ecr 0,nop,wscale 10], length 0
16:28:09.593388 eth0  Out IP 10.4.0.5.54220 > 10.20.30.40.5432: Flags [S], seq 1653560520, win 64240, options [mss 1460,sackOK,TS val 4103621077 ecr 0,nop,wscale 10], length 0
16:28:10.621980 gkeveth0 In  IP 10.4.0.5.54220 > 10.20.30.40.5432: Flags [S], seq 1653560520, win 64240, options [mss 1460,sackOK,TS val 4103622104 ecr 0,nop,wscale 10], length 0
16:28:10.622004 eth0  Out IP 10.4.0.5.54220 > 10.20.30.40.5432: Flags [S], seq 1653560520, win 64240, options [mss 1460,sackOK,TS val 4103622104 ecr 0,nop,wscale 10], length 0
`,
  legacy: `16:28:13.484671 gkeveth0 In  IP 10.4.1.5.55410 > 10.20.30.40.5432: Flags [S], seq 2642842123, win 64240, options [mss 1460,sackOK,TS val 4290835735 ecr 0,nop,wscale 10], length 0
16:28:13.484700 eth0  Out IP 10.4.1.5.55410 > 10.20.30.40.5432: Flags [S], seq 2642842123, win 64240, options [mss 1460,sackOK,TS val 4290835735 ecr 0,nop,wscale 10], length 0
16:28:14.496118 gkeveth0 In  IP 10.4.1.5.55410 > 10.20.30.40.5432: Flags [S], seq 2642842123, win 64240, options [mss 1460,sackOK,TS val 4290836743 ecr 0,nop,wscale 10], length 0
16:28:14.496144 eth0  Out IP 10.4.1.5.55410 > 10.20.30.40.5432: Flags [S], seq 2642842123, win 64240, options [mss 1460,sackOK,TS val 4290836743 ecr 0,nop,wscale 10], length 0
`,
  afterDefault: `16:28:20.176522 gkeveth0 In  IP 10.4.0.5.60102 > 10.20.30.40.5432: Flags [S], seq 3128723022, win 64240, options [mss 1460,sackOK,TS val 3245556738 ecr 0,nop,wscale 10], length 0
16:28:20.176559 eth0  Out IP 10.128.0.2.32753 > 10.20.30.40.5432: Flags [S], seq 3128723022, win 64240, options [mss 1460,sackOK,TS val 3245556738 ecr 0,nop,wscale 10], length 0
16:28:20.176598 eth0  In  IP 10.20.30.40.5432 > 10.128.0.2.32753: Flags [S.], seq 3135100896, ack 3128723023, win 65160, options [mss 1460,sackOK,TS val 3746959090 ecr 3245556738,nop,wscale 10], length 0
16:28:20.176602 gkeveth0 Out IP 10.20.30.40.5432 > 10.4.0.5.60102: Flags [S.], seq 3135100896, ack 3128723023, win 65160, options [mss 1460,sackOK,TS val 3746959090 ecr 3245556738,nop,wscale 10], length 0
16:28:20.176615 gkeveth0 In  IP 10.4.0.5.60102 > 10.20.30.40.5432: Flags [.], ack 1, win 63, options [nop,nop,TS val 3245556738 ecr 3746959090], length 0
16:28:20.176618 eth0  Out IP 10.128.0.2.32753 > 10.20.30.40.5432: Flags [.], ack 1, win 63, options [nop,nop,TS val 3245556738 ecr 3746959090], length 0
16:28:20.180314 gkeveth0 In  IP 10.4.0.5.60102 > 10.20.30.40.5432: Flags [F.], seq 1, ack 1, win 63, options [nop,nop,TS val 3245556742 ecr 3746959090], length 0
16:28:20.180333 eth0  Out IP 10.128.0.2.32753 > 10.20.30.40.5432: Flags [F.], seq 1, ack 1, win 63, options [nop,nop,TS val 3245556742 ecr 3746959090], length 0
16:28:20.184164 eth0  In  IP 10.20.30.40.5432 > 10.128.0.2.32753: Flags [.], ack 2, win 64, options [nop,nop,TS val 3746959098 ecr 3245556742], length 0
16:28:20.184176 gkeveth0 Out IP 10.20.30.40.5432 > 10.4.0.5.60102: Flags [.], ack 2, win 64, options [nop,nop,TS val 3746959098 ecr 3245556742], length 0
16:28:20.185122 eth0  In  IP 10.20.30.40.5432 > 10.128.0.2.32753: Flags [P.], seq 1:6, ack 2, win 64, options [nop,nop,TS val 3746959099 ecr 3245556742], length 5
16:28:20.185137 gkeveth0 Out IP 10.20.30.40.5432 > 10.4.0.5.60102: Flags [P.], seq 1:6, ack 2, win 64, options [nop,nop,TS val 3746959099 ecr 3245556742], length 5
16:28:20.185177 gkeveth0 In  IP 10.4.0.5.60102 > 10.20.30.40.5432: Flags [.], ack 6, win 63, options [nop,nop,TS val 3245556747 ecr 3746959099], length 0
16:28:20.185183 eth0  Out IP 10.128.0.2.32753 > 10.20.30.40.5432: Flags [.], ack 6, win 63, options [nop,nop,TS val 3245556747 ecr 3746959099], length 0
16:28:20.185487 eth0  In  IP 10.20.30.40.5432 > 10.128.0.2.32753: Flags [F.], seq 6, ack 2, win 64, options [nop,nop,TS val 3746959099 ecr 3245556747], length 0
16:28:20.185492 gkeveth0 Out IP 10.20.30.40.5432 > 10.4.0.5.60102: Flags [F.], seq 6, ack 2, win 64, options [nop,nop,TS val 3746959099 ecr 3245556747], length 0
16:28:20.185520 gkeveth0 In  IP 10.4.0.5.60102 > 10.20.30.40.5432: Flags [.], ack 7, win 63, options [nop,nop,TS val 3245556747 ecr 3746959099], length 0
16:28:20.185523 eth0  Out IP 10.128.0.2.32753 > 10.20.30.40.5432: Flags [.], ack 7, win 63, options [nop,nop,TS val 3245556747 ecr 3746959099], length 0
`,
};

const SITE = `kind: RemoteSite
name: onprem-dc1
prefixes: [10.20.0.0/16]
routesBack: [10.128.0.0/20]
allowlists:
  - name: db-firewall
    sources: [10.4.0.0/14]
    destinations: [10.20.30.40/32]
    ports: [tcp/5432]
`;

/** A conntrack line for the pod's connection: `natted` says whether the reply goes to the node. */
const conntrackLine = (pod: string, node: string, natted: boolean, sport: number) =>
  `tcp      6 431999 ESTABLISHED src=${pod} dst=10.20.30.40 sport=${sport} dport=5432 src=10.20.30.40 dst=${natted ? node : pod} sport=5432 dport=${natted ? 20000 + sport : sport} [ASSURED] mark=0 use=1\n`;

interface NodeState {
  readonly dump?: string;
  readonly capture?: string;
  readonly conntrack?: string;
}

function replica(
  name: string,
  config: string,
  phase: "before" | "after",
  state: { default: NodeState; legacy?: NodeState },
): ReturnType<typeof memorySnapshot> {
  const files: Record<string, string> = {
    "cluster/nodes.yaml": `${nodeYaml("gke-lab-default-0", "default", "10.4.0.0/24", "10.128.0.2")}${
      state.legacy
        ? `---\n${nodeYaml("gke-lab-legacy-1", "legacy", "10.4.1.0/24", "10.128.0.3")}`
        : ""
    }`,
    "cluster/ip-masq-agent.yaml": `${configMapYaml(config)}---\n${DAEMONSET_NOT_ON_LEGACY}`,
    "cluster/pods.yaml": `${agentPodYaml("gke-lab-default-0")}---\n${appPodYaml("billing-default", "gke-lab-default-0", "10.4.0.5")}${
      state.legacy ? `---\n${appPodYaml("billing-legacy", "gke-lab-legacy-1", "10.4.1.5")}` : ""
    }`,
    "remote/onprem-dc1.yaml": SITE,
  };
  const nodes: [string, NodeState | undefined][] = [
    ["gke-lab-default-0", state.default],
    ["gke-lab-legacy-1", state.legacy],
  ];
  for (const [node, s] of nodes) {
    if (!s) continue;
    if (s.dump) files[`nodes/${node}/iptables-save.txt`] = s.dump;
    if (s.conntrack !== undefined) files[`nodes/${node}/conntrack.txt`] = s.conntrack;
    if (s.capture) {
      files[`captures/node-${node}.txt`] = s.capture;
      files[`captures/node-${node}.yaml`] = `point: node/${node}\nphase: ${phase}\n`;
    }
  }
  return memorySnapshot(name, files);
}

const before2 = () =>
  replica("before", BROAD, "before", {
    default: { dump: DUMP_BROAD, capture: CAP.beforeDefault },
    legacy: { dump: DUMP_BROAD, capture: CAP.legacy },
  });
const afterPartly = () =>
  replica("after", NARROW, "after", {
    default: {
      dump: DUMP_NARROW,
      capture: CAP.afterDefault,
      conntrack:
        conntrackLine("10.4.0.5", "10.128.0.2", false, 41000) +
        conntrackLine("10.4.0.5", "10.128.0.2", true, 60102),
    },
    legacy: {
      dump: DUMP_BROAD,
      capture: CAP.legacy,
      conntrack: conntrackLine("10.4.1.5", "10.128.0.3", false, 41196),
    },
  });

const PROOF =
  /^tcp 10\.4\.0\.5 → 10\.20\.30\.40:5432: before 10\.4\.0\.5 \(SYN only, no reply\) · after 10\.128\.0\.2 \(handshake and data completed\)$/;

describe("verifyChange on the example replica pair", () => {
  const before = loadSnapshot(openSnapshot(EXAMPLE));
  const after = loadSnapshot(openSnapshot(FIXED));

  it("says FIXED with the one-line proof", async () => {
    const r = await verifyChange(before, after);
    assert.equal(r.verdict, "fixed", r.verdictText);
    assert.match(r.proof, PROOF);
    assert.equal(r.intended, "masquerade");
    assert.deepEqual(r.configMap.removed, ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]);
    assert.deepEqual(r.configMap.added, ["10.4.0.0/14"]);
    assert.deepEqual(r.configMap.otherKeysChanged, []);
    assert.equal(r.nodes.length, 1);
    assert.equal(r.nodes[0]!.pickedUp, "yes");
    assert.equal(r.nodes[0]!.rulesChanged, true);
    assert.match(
      r.reverse,
      /^The replies reach the sender 10\.4\.0\.5: seen going back to it after de-NAT \(captures\/node-gke-lab-default-0\.pcap:\d+\)/,
    );
    assert.deepEqual(r.staleConnections, []);
    assert.ok(isIntendedVerdict(r));
  });

  it("says ROLLED BACK for the pair the other way round (capture phase labels notwithstanding)", async () => {
    const r = await verifyChange(after, before);
    assert.equal(r.verdict, "rolled-back", r.verdictText);
    assert.equal(r.intended, "keep-pod-source");
    assert.match(
      r.proof,
      /^tcp 10\.4\.0\.5 → 10\.20\.30\.40:5432: before 10\.128\.0\.2 \(handshake and data completed\) · after 10\.4\.0\.5 \(SYN only, no reply\)$/,
    );
    assert.equal(r.nodes[0]!.pickedUp, "yes");
  });

  it("a ping as the known request: the node's own ping is not taken for the pod's", async () => {
    const dest = { ip: ip("10.20.30.40"), text: "10.20.30.40" };
    const r = await verifyChange(before, after, { dest });
    assert.equal(r.verdict, "fixed", r.verdictText);
    assert.equal(
      r.proof,
      "icmp 10.4.0.5 → 10.20.30.40: before 10.4.0.5 (no reply) · after 10.128.0.2 (replied)",
    );
    const back = await verifyChange(after, before, { dest });
    assert.equal(back.verdict, "rolled-back", back.verdictText);
    assert.equal(
      back.proof,
      "icmp 10.4.0.5 → 10.20.30.40: before 10.128.0.2 (replied) · after 10.4.0.5 (no reply)",
    );
  });

  it("writes Markdown whose first evidence line is the proof", async () => {
    const r = await verifyChange(before, after);
    const md = renderChangeRecordMarkdown(r).split("\n");
    assert.equal(md[0], "# Change record: ip-masq-agent non-masquerade list");
    assert.equal(md[2], `- Proof: \`${r.proof}\``);
    assert.match(md[3]!, /^- Verdict: \*\*FIXED\*\*/);
    const text = md.join("\n");
    // the ConfigMap diff and the node's chain diff
    assert.ok(text.includes("```diff\n nonMasqueradeCIDRs:\n-  - 10.0.0.0/8\n"), text);
    assert.ok(text.includes("\n+  - 10.4.0.0/14\n"));
    assert.match(text, /\n- -A IP-MASQ-AGENT -d 10\.0\.0\.0\/8 .* -j RETURN\n/);
    assert.match(text, /\n\+ -A IP-MASQ-AGENT -d 10\.4\.0\.0\/14 .* -j RETURN\n/);
    assert.match(text, /\| gke-lab-default-0 \| yes \| yes \|/);
    const json = JSON.parse(
      JSON.stringify(r, (_k, v) => (typeof v === "bigint" ? v.toString() : v)),
    ) as ChangeRecord;
    assert.equal(json.proof, r.proof);
    // text: the same document; the proof whole on one line under its label
    const lines = renderChangeRecordText(r).split("\n");
    assert.equal(lines[0], "Change record: ip-masq-agent non-masquerade list");
    assert.equal(lines[2], "- Proof:");
    assert.equal(lines[3], `  ${r.proof}`);
  });
});

describe("verifyChange on hand-written replicas", () => {
  it("catches the partly applied change and names the node whose capture still shows the pod", async () => {
    const r = await verifyChange(before2(), afterPartly(), { dest: DEST });
    assert.equal(r.verdict, "partly-applied", r.verdictText);
    assert.match(
      r.verdictText,
      /reached gke-lab-default-0 but not gke-lab-legacy-1: a node-level capture after the change \(captures\/node-gke-lab-legacy-1\.txt\) still shows the pod address 10\.4\.1\.5: the rules never changed on gke-lab-legacy-1, whatever the ConfigMap says/,
    );
    assert.match(r.proof, PROOF);
    assert.equal(r.nodeProofs.length, 2);
    assert.match(
      r.nodeProofs[1]!,
      /^gke-lab-legacy-1: tcp 10\.4\.1\.5 → 10\.20\.30\.40:5432: before 10\.4\.1\.5 \(SYN only, no reply\) · after 10\.4\.1\.5 \(SYN only, no reply\)$/,
    );
    const byNode = new Map(r.nodes.map((n) => [n.node, n]));
    assert.equal(byNode.get("gke-lab-default-0")?.pickedUp, "yes");
    assert.equal(byNode.get("gke-lab-legacy-1")?.pickedUp, "no");
    assert.equal(byNode.get("gke-lab-legacy-1")?.rulesChanged, false);
    // the reverse direction: the SYN-ACK going back out to the pod is line 4 of the capture
    assert.match(
      r.reverse,
      /^The replies reach the sender 10\.4\.0\.5: seen going back to it after de-NAT \(captures\/node-gke-lab-default-0\.txt:4\)/,
    );
    assert.equal(isIntendedVerdict(r), false);
  });

  it("lists old translations only on nodes whose rules changed, with how to clear them", async () => {
    const r = await verifyChange(before2(), afterPartly(), { dest: DEST });
    assert.deepEqual(
      r.staleConnections.map((s) => [s.node, s.entry]),
      [
        [
          "gke-lab-default-0",
          "tcp 10.4.0.5:41000 → 10.20.30.40:5432 ESTABLISHED (expires in 431999s)",
        ],
      ],
    );
    assert.equal(r.staleConnections[0]!.evidence.line, 1);
    assert.match(renderChangeRecordMarkdown(r), /conntrack -D -s POD_IP -d DEST/);
  });

  it("says which node never changed when the capture contradicts the ConfigMap", async () => {
    // the ConfigMap changed, no dump was collected after, and the node's capture still shows the pod
    const after = replica("after", NARROW, "after", { default: { capture: CAP.beforeDefault } });
    const before = replica("before", BROAD, "before", {
      default: { dump: DUMP_BROAD, capture: CAP.beforeDefault },
    });
    const r = await verifyChange(before, after, { dest: DEST });
    assert.equal(r.verdict, "not-applied-on-node", r.verdictText);
    assert.equal(
      r.verdictText,
      "A node-level capture after the change (captures/node-gke-lab-default-0.txt) still shows the pod address 10.4.0.5: the rules never changed on gke-lab-default-0, whatever the ConfigMap says.",
    );
  });

  it("rolls back the partly applied change: the node that never changed counts as back", async () => {
    const r = await verifyChange(afterPartly(), before2(), { dest: DEST });
    assert.equal(r.verdict, "rolled-back", r.verdictText);
    assert.match(
      r.proof,
      /before 10\.128\.0\.2 \(handshake and data completed\) · after 10\.4\.0\.5/,
    );
    // after a rollback, masqueraded connections are the old translation
    assert.deepEqual(r.staleConnections, []);
  });

  it("a rollback lists the connections still masqueraded", async () => {
    const rolledBack = replica("rolled-back", BROAD, "after", {
      default: {
        dump: DUMP_BROAD,
        capture: CAP.beforeDefault,
        conntrack: conntrackLine("10.4.0.5", "10.128.0.2", true, 60102),
      },
    });
    const applied = replica("applied", NARROW, "before", {
      default: { dump: DUMP_NARROW, capture: CAP.afterDefault },
    });
    const r = await verifyChange(applied, rolledBack, { dest: DEST });
    assert.equal(r.verdict, "rolled-back", r.verdictText);
    assert.equal(r.staleConnections.length, 1);
    assert.match(r.staleConnections[0]!.entry, /^tcp 10\.4\.0\.5:60102 → 10\.20\.30\.40:5432/);
  });

  it("no change in the list: NO CHANGE", async () => {
    const r = await verifyChange(before2(), before2(), { dest: DEST });
    assert.equal(r.verdict, "no-change");
    assert.deepEqual(r.configMap.removed, []);
  });

  it("an after ConfigMap the agent refuses is reported as not applied", async () => {
    const refused = replica("after", "nonMasqueradeCIDRs:\n  - 10.4.0.1/14\n", "after", {
      default: { dump: DUMP_BROAD, capture: CAP.beforeDefault },
    });
    const before = replica("before", BROAD, "before", {
      default: { dump: DUMP_BROAD, capture: CAP.beforeDefault },
    });
    const r = await verifyChange(before, refused, { dest: DEST });
    assert.equal(r.verdict, "not-applied-on-node");
    assert.match(
      r.verdictText,
      /refuses the after ConfigMap \(CIDR "10\.4\.0\.1\/14" is not aligned/,
    );
    assert.ok(r.diagnostics.some((d) => d.code === "VERIFY_CONFIG_REFUSED"));
    assert.deepEqual(r.configMap.added, ["10.4.0.1/14"]);
  });

  it("without captures: undecided, and says what to capture", async () => {
    const b = replica("b", BROAD, "before", { default: { dump: DUMP_BROAD } });
    const a = replica("a", NARROW, "after", { default: { dump: DUMP_NARROW } });
    const r = await verifyChange(b, a, { dest: DEST });
    assert.equal(r.verdict, "undecided");
    assert.match(r.proof, /before not captured · after not captured/);
    assert.ok(r.missing.some((m) => m.command?.startsWith("tcpdump -ni any host 10.20.30.40")));
    assert.equal(r.nodes[0]!.pickedUp, "yes");
  });
});
