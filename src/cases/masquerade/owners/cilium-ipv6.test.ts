/**
 * The masquerade case on Cilium's BPF masquerade for IPv6 flows (no root needed): the BPF fixture
 * made dual stack (`enable-ipv6-masquerade`, `ipv6-native-routing-cidr`, the status line's IPv6
 * exclusion CIDR, IPv6 entries in `cilium-dbg bpf ipmasq list` beside the IPv4 ones), decided from
 * the IPv6 entries only, worded and fixed in Cilium's IPv6 terms, and attribution tested by taking
 * the owner away.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseIp } from "../../../net/cidr.ts";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import type { DiagnoseOptions } from "../../case.ts";
import { explainMasquerade } from "../explain.ts";
import { planMasquerade } from "../plan.ts";
import { SOURCE_OWNERS } from "./index.ts";

const FIXTURE = join(import.meta.dirname, "../fixtures/cilium/bpf-ip-masq-agent");
const LIST = "nodes/worker-1/cilium-bpf-ipmasq.txt";
const STATUS = "nodes/worker-1/cilium-status.txt";
const CONFIG = "cluster/cilium.yaml";
const tmp = mkdtempSync(join(tmpdir(), "pp-cilium6-"));
after(() => rmSync(tmp, { recursive: true, force: true }));
const load = (p: string) => loadSnapshot(openSnapshot(p));
const dest = (ip: string): DiagnoseOptions => ({ dest: { ip: parseIp(ip), text: ip } });
const without = SOURCE_OWNERS.filter((o) => o.id !== "cilium");
const read = (rel: string) => readFileSync(join(FIXTURE, rel), "utf8");

/** The node's map as `cilium-dbg bpf ipmasq list` prints both families (v4 entries, then v6). */
const LIST6 = `${read(LIST).trimEnd()}\nfd00::/8\nfe80::/10\n`;

/** The BPF fixture made dual stack, with `edits` on top (null removes a file). */
function dualStack(edits: Record<string, string | null> = {}): string {
  const root = mkdtempSync(join(tmp, "s-"));
  cpSync(FIXTURE, root, { recursive: true });
  const files: Record<string, string | null> = {
    [CONFIG]: read(CONFIG)
      .replace('enable-ipv6: "false"', 'enable-ipv6: "true"')
      .replace('enable-ipv6-masquerade: "false"', 'enable-ipv6-masquerade: "true"')
      .replace(
        "ipv4-native-routing-cidr: 10.0.0.0/16\n",
        "ipv4-native-routing-cidr: 10.0.0.0/16\n    ipv6-native-routing-cidr: fd00:10::/48\n",
      )
      .replace("      - 192.168.0.0/16\n", "      - 192.168.0.0/16\n      - fd00::/8\n"),
    [STATUS]: read(STATUS).replace(
      "10.0.0.0/16 [IPv4: Enabled, IPv6: Disabled]",
      "10.0.0.0/16 fd00:10::/48 [IPv4: Enabled, IPv6: Enabled]",
    ),
    [LIST]: LIST6,
    "cluster/nodes.yaml": read("cluster/nodes.yaml")
      .replace("    - 10.0.1.0/24\n", "    - 10.0.1.0/24\n    - fd00:10:0:1::/64\n")
      .replace(
        "    - address: 192.168.1.10\n      type: InternalIP\n",
        "    - address: 192.168.1.10\n      type: InternalIP\n    - address: fd00:192:168:1::10\n      type: InternalIP\n",
      ),
    "cluster/pods.yaml": read("cluster/pods.yaml").replace(
      "    - ip: 10.0.1.23\n",
      "    - ip: 10.0.1.23\n    - ip: fd00:10:0:1::23\n",
    ),
    "remote/onprem-dc1.yaml": read("remote/onprem-dc1.yaml").replace(
      "prefixes: [10.20.0.0/16]",
      "prefixes: [10.20.0.0/16, fd00:20::/64]",
    ),
    ...edits,
  };
  for (const [rel, text] of Object.entries(files)) {
    if (text === null) rmSync(join(root, rel));
    else writeFileSync(join(root, rel), text);
  }
  return root;
}

const ONPREM6 = "fd00:20::30:40";
const podPath = (r: Awaited<ReturnType<typeof explainMasquerade>>) =>
  r.paths.find((p) => p.from.startsWith("pod/"));

describe("Cilium BPF masquerade for IPv6 flows", () => {
  it("the fixture is dual stack as meant (the edits took)", () => {
    const root = dualStack();
    assert.match(
      readFileSync(join(root, CONFIG), "utf8"),
      /ipv6-native-routing-cidr: fd00:10::\/48/,
    );
    assert.match(readFileSync(join(root, CONFIG), "utf8"), /- fd00::\/8\n/);
    assert.match(readFileSync(join(root, "cluster/pods.yaml"), "utf8"), /fd00:10:0:1::23/);
    assert.match(readFileSync(join(root, "cluster/nodes.yaml"), "utf8"), /fd00:192:168:1::10/);
  });

  it("keeps the pod's IPv6 address toward on-prem: the map's fd00::/8 line, not an IPv4 entry", async () => {
    const r = await explainMasquerade(load(dualStack()), dest(ONPREM6));
    const path = podPath(r);
    assert.equal(path?.sourceOnWire, "fd00:10:0:1::23");
    const hop = path?.hops.find((h) => h.at === "node/worker-1");
    assert.match(hop?.label ?? "", /^Cilium BPF ip-masq-agent: fd00:20::30:40 is in fd00::\/8/);
    const line = LIST6.split("\n").indexOf("fd00::/8") + 1;
    assert.deepEqual([hop?.evidence?.file, hop?.evidence?.line], [LIST, line]);
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.match(
      f.title,
      /fd00:10:0:1::23 \(Cilium ip-masq-agent: nonMasqueradeCIDRs entry fd00::\/8\)/,
    );
    assert.deepEqual([f.evidence[0]?.file, f.evidence[0]?.line], [LIST, line]);
    // the fix: the ConfigMap Cilium reads without fd00::/8, its IPv4 entries kept
    assert.ok(
      f.next.some((n) =>
        /edit configmap ip-masq-agent +# nonMasqueradeCIDRs: 10\.0\.0\.0\/8, 172\.16\.0\.0\/12, 192\.168\.0\.0\/16$/.test(
          n,
        ),
      ),
      f.next.join("\n"),
    );
    assert.doesNotMatch(JSON.stringify(r.findings), /GKE's node startup|IP-MASQ|plan masquerade/);
  });

  it("attribution: without Cilium's knowledge the IPv6 answer is not Cilium's", async () => {
    const r = await explainMasquerade(load(dualStack()), dest(ONPREM6), without);
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.doesNotMatch(f?.title ?? "", /Cilium/);
    const hop = podPath(r)?.hops.find((h) => h.at === "node/worker-1");
    assert.doesNotMatch(hop?.label ?? "", /Cilium|fd00::\/8/);
    assert.notEqual(hop?.evidence?.file, LIST, "the map's line is Cilium's evidence only");
  });

  it("an IPv6 destination outside the map is masqueraded to the node's IPv6 address; inside the IPv6 exclusion CIDR it keeps the pod's", async () => {
    const pub = await explainMasquerade(load(dualStack()), dest("2001:db8:5::9"));
    const p = podPath(pub);
    assert.equal(p?.sourceOnWire, "fd00:192:168:1::10");
    assert.match(p?.hops[1]?.label ?? "", /MASQUERADE → fd00:192:168:1::10/);
    const pod = await explainMasquerade(load(dualStack()), dest("fd00:10:0:2::9"));
    const q = podPath(pod);
    assert.equal(q?.sourceOnWire, "fd00:10:0:1::23");
    assert.match(q?.hops[1]?.label ?? "", /SNAT exclusion CIDR fd00:10::\/48/);
    assert.deepEqual([q?.hops[1]?.evidence?.file], [STATUS]);
    assert.ok(!pod.findings.some((x) => x.id === "masq/exempt-destination"));
  });

  it("without the status line, the exclusion CIDR is cilium-config's ipv6-native-routing-cidr", async () => {
    const r = await explainMasquerade(load(dualStack({ [STATUS]: null })), dest("fd00:10:0:2::9"));
    const hop = podPath(r)?.hops[1];
    assert.match(hop?.label ?? "", /SNAT exclusion CIDR fd00:10::\/48/);
    assert.equal(hop?.evidence?.file, CONFIG);
    assert.match(hop?.evidence?.text ?? "", /ipv6-native-routing-cidr/);
  });

  it('enable-ipv6-masquerade: "false" keeps every IPv6 source; the finding and fix name that key', async () => {
    const off = dualStack({ [STATUS]: null });
    const cfg = readFileSync(join(off, CONFIG), "utf8").replace(
      'enable-ipv6-masquerade: "true"',
      'enable-ipv6-masquerade: "false"',
    );
    writeFileSync(join(off, CONFIG), cfg);
    const snap = load(off);
    const r = await explainMasquerade(snap, dest(ONPREM6));
    assert.equal(podPath(r)?.sourceOnWire, "fd00:10:0:1::23");
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.match(f?.title ?? "", /\(Cilium: enable-ipv6-masquerade false\)/);
    assert.ok(
      f?.evidence.some((e) => e.file === CONFIG && /enable-ipv6-masquerade/.test(e.text ?? "")),
    );
    assert.ok(f?.next.some((n) => /"enable-ipv6-masquerade":"true"/.test(n)));
    assert.doesNotMatch(JSON.stringify(f), /enable-ipv4-masquerade/);
    // the IPv4 flow of the same pod is unaffected
    const v4 = await explainMasquerade(snap, dest("203.0.114.9"));
    assert.equal(podPath(v4)?.sourceOnWire, "192.168.1.10");
    const plan = planMasquerade(snap, { strategy: "narrow", ...dest(ONPREM6) } as never);
    assert.equal(plan.owner?.knob, "cilium-config enable-ipv6-masquerade");
    assert.ok(
      plan.owner?.change.after.some(
        (s) => s.key === "cilium-config enable-ipv6-masquerade" && s.value === "true",
      ),
    );
  });

  it("plans in Cilium's terms: the ConfigMap without fd00::/8, the IPv4 entries kept", () => {
    const plan = planMasquerade(load(dualStack()), {
      strategy: "narrow",
      ...dest(ONPREM6),
    } as never);
    assert.equal(plan.owner?.owner, "cilium");
    assert.equal(plan.owner?.knob, "the ip-masq-agent ConfigMap Cilium reads (nonMasqueradeCIDRs)");
    assert.deepEqual(plan.owner?.nowMasqueraded, ["fd00::/8"]);
    const after = plan.owner?.change.after.find((s) => s.key.startsWith("ip-masq-agent"));
    assert.equal(after?.value, "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16");
    assert.doesNotMatch(plan.owner?.files[0]?.content ?? "", /fd00::\/8/);
  });
});
