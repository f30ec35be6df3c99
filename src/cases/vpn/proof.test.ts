/**
 * The VPN change record on the committed lab snapshots (real OpenVPN, real sysctl, real probes;
 * see testdata/vpn-lab/README.md). `forwarding-off` and `fixed` are the same pod
 * (vpn/vpn-openvpn-6d9c7b5f4-x2x7k) before and after the fix: ip_forward 0 → 1 and the chart's
 * init container added. The expected lines and values are read from the snapshots' files.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { verifyVpnChange } from "./proof.ts";
import { renderVpnChangeRecordMarkdown, renderVpnChangeRecordText } from "./proof-render.ts";

const lab = (v: string) => new URL(`./testdata/vpn-lab/${v}/`, import.meta.url).pathname;
const POD = "vpn/vpn-openvpn-6d9c7b5f4-x2x7k";
const SYSCTL = `pods/${POD}/sysctl.txt`;
const load = (dir: string) => loadSnapshot(openSnapshot(dir));

/** The 1-based line of the first line of `rel` in snapshot `v` that matches `re`. */
function lineOf(dir: string, rel: string, re: RegExp): number {
  const i = readFileSync(join(dir, rel), "utf8")
    .split("\n")
    .findIndex((l) => re.test(l));
  assert.ok(i >= 0, `${rel}: no line matches ${re}`);
  return i + 1;
}

const tmp = mkdtempSync(join(tmpdir(), "podpath-vpn-proof-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

describe("verifyVpnChange", () => {
  it("forwarding-off → fixed: intended, with the one-line proof", () => {
    const r = verifyVpnChange(load(lab("forwarding-off")), load(lab("fixed")));
    assert.ok(r);
    const fwdB = lineOf(lab("forwarding-off"), SYSCTL, /^net\.ipv4\.ip_forward\s*=\s*0/);
    const fwdA = lineOf(lab("fixed"), SYSCTL, /^net\.ipv4\.ip_forward\s*=\s*1/);
    const silentB = lineOf(lab("forwarding-off"), "probes/laptop.txt", /^2 packets .* 0 received/);
    const answersA = lineOf(lab("fixed"), "probes/laptop.txt", /^64 bytes from 10\.244\.2\.20/);
    assert.equal(
      r.proof,
      `net.ipv4.ip_forward 0 → 1 in pod ${POD} (${SYSCTL}:${fwdB} → …:${fwdA}); the pod IP 10.244.2.20 now answers the client (probes/laptop.txt:${answersA})`,
    );
    assert.equal(r.verdict, "intended");
    assert.equal(r.forwarding.before.state, "off");
    assert.equal(r.forwarding.after.state, "on");
    assert.deepEqual(r.forwarding.before.evidence, {
      file: SYSCTL,
      line: fwdB,
      text: "net.ipv4.ip_forward = 0",
    });
    // the first silent hop before was the pod IP; none is silent after
    assert.equal(r.firstSilentHop.before?.hop, "pod-ip");
    assert.equal(r.firstSilentHop.before?.evidence.line, silentB);
    assert.equal(r.firstSilentHop.after, undefined);
    assert.equal(r.firstSilentHop.moved, "vanished");
    assert.deepEqual(
      r.client.after.map((h) => [h.hop, h.state]),
      [
        ["peer", "answered"],
        ["pod-ip", "answered"],
        ["service-ip", "answered"],
        ["public", "answered"],
      ],
    );
    assert.ok(r.client.before.filter((h) => h.hop !== "peer").every((h) => h.state === "silent"));
    // durable: the init container the fixed Deployment gained
    assert.equal(r.durable.state, "yes");
    const init = lineOf(lab("fixed"), "cluster/vpn-deployment.yaml", /- name: enable-ip-forward/);
    assert.deepEqual(
      r.durable.setters.map((s) => [s.kind, s.evidence.file, s.evidence.line]),
      [["init-container", "cluster/vpn-deployment.yaml", init]],
    );
    // the pool's masquerade, read in the pod's nat table on both sides
    const masq = lineOf(lab("fixed"), `pods/${POD}/iptables-save.txt`, /MASQUERADE/);
    assert.equal(r.masquerade.pool, "10.8.0.0/24");
    assert.equal(r.masquerade.before.state, "masqueraded");
    assert.equal(r.masquerade.after.state, "masqueraded");
    assert.equal(r.masquerade.after.evidence?.line, masq);
    assert.deepEqual(r.missing, []);
    assert.ok(r.evidence.some((e) => e.file === `before:${SYSCTL}` && e.line === fwdB));
    assert.ok(r.evidence.some((e) => e.file === "after:probes/laptop.txt" && e.line === answersA));
  });

  it("fixed → forwarding-off: not intended, naming the value that reads 0", () => {
    const r = verifyVpnChange(load(lab("fixed")), load(lab("forwarding-off")));
    assert.ok(r);
    assert.equal(r.verdict, "not-intended");
    assert.match(r.verdictText, /net\.ipv4\.ip_forward reads 0 in vpn\/vpn-openvpn/);
    assert.match(r.verdictText, new RegExp(`${SYSCTL}:\\d+`));
    assert.equal(r.firstSilentHop.moved, "appeared");
    assert.equal(r.durable.state, "no");
  });

  it("set by hand: intended, but not durable, and the record says so", () => {
    const r = verifyVpnChange(load(lab("forwarding-off")), load(lab("set-by-hand")));
    assert.ok(r);
    assert.equal(r.verdict, "intended");
    assert.equal(r.durable.state, "no");
    assert.match(r.verdictText, /next restart/);
  });

  it("forwarding on but no masquerade of the pool: the hop stays silent, not intended", () => {
    const r = verifyVpnChange(load(lab("forwarding-off")), load(lab("no-masquerade")));
    assert.ok(r);
    assert.equal(r.forwarding.after.state, "on");
    assert.equal(r.firstSilentHop.moved, "same");
    assert.equal(r.masquerade.after.state, "not-masqueraded");
    assert.equal(r.verdict, "not-intended");
    assert.match(r.proof, /the pod IP 10\.244\.2\.20 still does not answer the client/);
    assert.match(r.verdictText, /does not masquerade the client pool/);
  });

  it("no change (fixed → fixed): nothing moved, not intended", () => {
    const r = verifyVpnChange(load(lab("fixed")), load(lab("fixed")));
    assert.ok(r);
    assert.equal(r.firstSilentHop.moved, "none");
    assert.equal(r.verdict, "not-intended");
  });

  it("after without the pod's sysctl.txt: forwarding unknown, the file is missing", () => {
    const dir = join(tmp, "no-sysctl");
    cpSync(lab("fixed"), dir, { recursive: true });
    rmSync(join(dir, SYSCTL));
    const r = verifyVpnChange(load(lab("forwarding-off")), load(dir));
    assert.ok(r);
    assert.equal(r.forwarding.after.state, "unknown");
    assert.equal(r.verdict, "not-intended");
    assert.ok(r.missing.some((m) => m.file === `after: ${SYSCTL}`));
    // the node's own sysctl is not read in the pod's place
    assert.match(r.proof, /^net\.ipv4\.ip_forward 0 → \?/);
  });

  it("a snapshot without a VPN pod: nothing to compare", () => {
    const ex = new URL("../../../examples/snat-exception-list/", import.meta.url).pathname;
    const fx = new URL("../../../examples/snat-exception-list-fixed/", import.meta.url).pathname;
    assert.equal(verifyVpnChange(load(ex), load(fx)), undefined);
  });

  it("renders the proof first, in text and Markdown", () => {
    const r = verifyVpnChange(load(lab("forwarding-off")), load(lab("fixed")));
    assert.ok(r);
    const text = renderVpnChangeRecordText(r).split("\n");
    assert.equal(text[0], "Change record: VPN pod forwarding");
    assert.equal(`${text[2]}\n${text[3]}`, `- Proof:\n  ${r.proof}`);
    assert.ok(text.some((l) => /^- Verdict: INTENDED: /.test(l)));
    const md = renderVpnChangeRecordMarkdown(r).split("\n");
    assert.equal(md[2], `- Proof: \`${r.proof}\``);
    assert.match(md[3]!, /^- Verdict: \*\*INTENDED\*\*/);
    assert.ok(md.some((l) => /^\| pod-ip \| silent: .* \| answered: /.test(l)));
  });
});
