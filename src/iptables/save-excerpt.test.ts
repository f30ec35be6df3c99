import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import type { IptablesDump } from "./dump.ts";
import { parseIptablesSave } from "./save-parser.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const partial = (d: IptablesDump) =>
  [...d.tables.get("nat")!.chains.values()].filter((c) => c.partial).map((c) => c.name);

describe("parseIptablesSave: excerpts", () => {
  it("a whole iptables-save or iptables -S dump is no excerpt", () => {
    assert.equal(
      parseIptablesSave(fixture("list/kube-proxy.save-c.txt"), "f").value.excerpt,
      undefined,
    );
    const s = fixture("gke-dpv2-1.29_iptables-S-nat_IP-MASQ-default-snat_cilium.txt");
    const d = parseIptablesSave(s, "f").value;
    assert.equal(d.excerpt, undefined);
    assert.deepEqual(partial(d), []);
  });

  it("a grep of rule lines (no header, no declarations): every chain may be missing rules", () => {
    const text = "-A POSTROUTING -j IP-MASQ-AGENT\n-A IP-MASQ-AGENT -d 10.0.0.0/8 -j RETURN\n";
    const d = parseIptablesSave(text, "f").value;
    assert.match(d.excerpt?.reasons[0] ?? "", /a grep of a dump/);
    assert.deepEqual(partial(d).sort(), [
      "INPUT",
      "IP-MASQ-AGENT",
      "OUTPUT",
      "POSTROUTING",
      "PREROUTING",
    ]);
    // the same lines handed over by a caller that names their table: whole chains it wrote
    assert.equal(parseIptablesSave(text, "f", { table: "nat" }).value.excerpt, undefined);
    // ... unless they are a file as handed over
    const asFile = parseIptablesSave(text, "f", { table: "nat", asHandedOver: true }).value;
    assert.ok(asFile.excerpt);
  });

  it("iptables-save lines without a *table line (kubernetes#64212's grep): every chain partial", () => {
    const d = parseIptablesSave(
      fixture("k8s-issue-64212_gke-1.10_IP-MASQ-plus-IP-MASQ-AGENT_grep.txt"),
      "f",
    ).value;
    assert.match(d.excerpt?.reasons[0] ?? "", /without a "\*nat" line/);
    assert.ok(partial(d).includes("IP-MASQ"));
    assert.ok(partial(d).includes("POSTROUTING"));
  });

  it("iptables -S CHAIN: that chain whole, the others unknown", () => {
    const d = parseIptablesSave(fixture("list/kube-proxy.nat-S-POSTROUTING.txt"), "f", {
      table: "nat",
      asHandedOver: true,
    }).value;
    assert.match(d.excerpt?.reasons[0] ?? "", /only chain POSTROUTING is listed/);
    assert.deepEqual(partial(d).sort(), ["INPUT", "OUTPUT", "PREROUTING"]);
    assert.equal(d.tables.get("nat")?.chains.get("POSTROUTING")?.rules.length, 3);
  });

  it("a table cut before COMMIT: the last chain read and the chains after it", () => {
    const r = parseIptablesSave(
      fixture("kubeadm-docker_k8s-pr-75893_iptables-save-nat-header.txt"),
      "f",
    );
    assert.ok(r.diagnostics.some((x) => x.code === "IPTABLES_TRUNCATED"));
    const p = partial(r.value);
    assert.equal(p[0], "KUBE-MARK-DROP");
    assert.ok(p.includes("KUBE-SERVICES") && p.includes("KUBE-POSTROUTING"));
    assert.ok(!p.includes("POSTROUTING") && !p.includes("DOCKER"));
    assert.match(r.value.excerpt?.reasons[0] ?? "", /no COMMIT/);
  });

  it("iptables -S cut in the middle of its last rule: that chain and the ones after it", () => {
    const s = fixture("gke-legacy-kubenet_iptables-S-nat_kube-proxy_kubenet-snat.txt");
    // cut inside the quoted comment: the line is not a whole rule
    const at = s.indexOf("-A KUBE-SERVICES -d 10.51.240.10/32 -p udp");
    const cut = s.slice(0, s.indexOf('"kube-system', at) + 5);
    const r = parseIptablesSave(cut, "f");
    assert.ok(partial(r.value).includes("KUBE-SERVICES"));
    assert.ok(!partial(r.value).includes("KUBE-POSTROUTING"));
    assert.match(r.value.excerpt?.reasons.join(" ") ?? "", /not a whole rule/);
  });

  it("jumps to chains an excerpt does not show are information, not warnings", () => {
    const r = parseIptablesSave(fixture("list/kube-proxy.nat-S-POSTROUTING.txt"), "f", {
      table: "nat",
      asHandedOver: true,
    });
    const jumps = r.diagnostics.filter((d) => d.code === "IPTABLES_UNDECLARED_CHAIN");
    assert.ok(jumps.length > 0);
    assert.ok(jumps.every((d) => d.severity === "info" && /not missing/.test(d.message)));
  });
});
