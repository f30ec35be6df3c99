/**
 * kubenet's semantics: the kubelet's command line in the forms a node shows it (ps, /proc cmdline,
 * systemd unit, /etc/default/kubelet), the flag's default and its bad values with their lines, the
 * rule kubenet writes (argv and iptables-save form, IPv4 and IPv6, none for 0.0.0.0/0), and the
 * reader fuzzed: never throws, every diagnostic names the file and a line of the input.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { mutatedText } from "../../lab/test-helpers/text-mutations.ts";
import { parseCidr } from "../../net/cidr.ts";
import { DEFAULT_NON_MASQUERADE_CIDR, readKubeletFlags } from "./flags.ts";
import { KUBENET_COMMENT, kubenetMasqRule } from "./rules.ts";

const FILE = "nodes/n1/kubelet-flags.txt";

describe("readKubeletFlags", () => {
  it("reads `ps -o args` output with its header, --flag=value form", () => {
    const r = readKubeletFlags(
      "COMMAND\n/usr/bin/kubelet --network-plugin=kubenet --non-masquerade-cidr=10.244.0.0/16 --v=2\n",
      FILE,
    );
    assert.deepEqual(r.diagnostics, []);
    assert.equal(r.value.nonMasqueradeCidr.text, "10.244.0.0/16");
    assert.equal(r.value.nonMasqueradeCidr.defaulted, false);
    assert.deepEqual(r.value.nonMasqueradeCidr.source, {
      file: FILE,
      line: 2,
      text: "--non-masquerade-cidr=10.244.0.0/16",
    });
    assert.equal(r.value.networkPlugin?.value, "kubenet");
  });

  it("reads /proc/<pid>/cmdline (NULs, `--flag value` form)", () => {
    const r = readKubeletFlags(
      [
        "/usr/bin/kubelet",
        "--network-plugin",
        "kubenet",
        "--non-masquerade-cidr",
        "172.16.0.0/12",
        "",
      ].join("\u0000"),
      FILE,
    );
    assert.equal(r.value.nonMasqueradeCidr.text, "172.16.0.0/12");
    assert.equal(r.value.nonMasqueradeCidr.source?.text, "--non-masquerade-cidr 172.16.0.0/12");
    assert.equal(r.value.networkPlugin?.value, "kubenet");
  });

  it("reads a systemd unit (Environment= quoted, ExecStart continuations); the last flag wins", () => {
    const unit = [
      "[Service]",
      'Environment="KUBELET_EXTRA_ARGS=--network-plugin=kubenet --non-masquerade-cidr=10.0.0.0/8"',
      "ExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS \\",
      "  --non-masquerade-cidr 10.244.0.0/16 \\",
      "  --v=2",
    ].join("\n");
    const r = readKubeletFlags(unit, FILE);
    assert.equal(r.value.nonMasqueradeCidr.text, "10.244.0.0/16");
    assert.equal(r.value.nonMasqueradeCidr.source?.line, 4);
    const rep = r.diagnostics.find((d) => d.code === "KUBELET_FLAG_REPEATED");
    assert.equal(rep?.source?.line, 4);
    assert.match(rep?.message ?? "", /first on line 2/);
  });

  it("reads /etc/default/kubelet; without the flag the kubelet's default applies", () => {
    const r = readKubeletFlags("KUBELET_EXTRA_ARGS=--network-plugin=kubenet --v=2\n", FILE);
    assert.equal(r.value.nonMasqueradeCidr.text, DEFAULT_NON_MASQUERADE_CIDR);
    assert.equal(r.value.nonMasqueradeCidr.defaulted, true);
    assert.equal(r.value.nonMasqueradeCidr.source, undefined);
    assert.equal(r.value.isKubelet, true);
  });

  it("a bad CIDR and a flag without value are diagnostics with their line", () => {
    const r = readKubeletFlags(
      "/usr/bin/kubelet \\\n --non-masquerade-cidr=10.0.0/33 \\\n --pod-cidr\n",
      FILE,
    );
    const bad = r.diagnostics.find((d) => d.code === "KUBELET_NON_MASQ_CIDR_INVALID");
    assert.equal(bad?.source?.line, 2);
    assert.equal(r.value.nonMasqueradeCidr.cidr, undefined);
    const none = r.diagnostics.find((d) => d.code === "KUBELET_FLAG_NO_VALUE");
    assert.equal(none?.source?.line, 3);
  });

  it("a file that is not the kubelet's command line is cited at its first line with text", () => {
    const r = readKubeletFlags("\n\n  {{{ garbage\nmore\n", FILE);
    const d = r.diagnostics.find((x) => x.code === "KUBELET_FLAGS_UNRECOGNIZED");
    assert.deepEqual(d?.source, { file: FILE, line: 3, text: "{{{ garbage" });
  });

  it("never throws; every diagnostic names the file and a line of the input", () => {
    const corpus = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc
        .array(
          fc.constantFrom(
            "--non-masquerade-cidr",
            "--non-masquerade-cidr=",
            "10.0.0.0/8",
            "::/0",
            "--network-plugin",
            "kubenet",
            "Environment=",
            '"',
            "'",
            "\\",
            "\n",
            " ",
            "\0",
            "KUBELET_EXTRA_ARGS=",
            "--pod-cidr",
            "#",
          ),
          { maxLength: 60 },
        )
        .map((p) => p.join("")),
    );
    const real = [
      "/usr/bin/kubelet --network-plugin=kubenet --non-masquerade-cidr=10.0.0.0/8 --v=2\n",
      '[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--non-masquerade-cidr=10.244.0.0/16"\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS \\\n  --network-plugin kubenet\n',
      "KUBELET_EXTRA_ARGS=--non-masquerade-cidr fd00::/8 --pod-cidr=10.244.1.0/24\n",
    ];
    const inputs = fc.oneof(corpus, mutatedText(real, ["\n", "=", "/", '"', "\\", " ", "--"], 40));
    fc.assert(
      fc.property(inputs, (text) => {
        const r = readKubeletFlags(text, FILE);
        const lines = text.split(/\r?\n/).length;
        for (const d of r.diagnostics) {
          assert.match(d.code, /^[A-Z][A-Z0-9_]*$/);
          assert.equal(d.source?.file, FILE);
          assert.ok((d.source?.line ?? 0) >= 1 && (d.source?.line ?? 0) <= lines);
        }
      }),
      { numRuns: 400 },
    );
  });
});

describe("kubenetMasqRule", () => {
  it("is kubenet's EnsureRule argv and its iptables-save form", () => {
    const r = kubenetMasqRule("10.0.0.0/8", parseCidr("10.0.0.0/8"));
    assert.deepEqual(r?.spec, [
      "-m",
      "comment",
      "--comment",
      KUBENET_COMMENT,
      "-m",
      "addrtype",
      "!",
      "--dst-type",
      "LOCAL",
      "!",
      "-d",
      "10.0.0.0/8",
      "-j",
      "MASQUERADE",
    ]);
    assert.equal(
      r?.saved,
      '-A POSTROUTING ! -d 10.0.0.0/8 -m comment --comment "kubenet: SNAT for outbound traffic from cluster" -m addrtype ! --dst-type LOCAL -j MASQUERADE',
    );
  });
  it("goes to ip6tables for an IPv6 CIDR, keeps the network iptables prints; none for /0", () => {
    const v6 = kubenetMasqRule("fd00:10::5/64", parseCidr("fd00:10::5/64"));
    assert.equal(v6?.family, 6);
    assert.match(v6?.saved ?? "", /! -d fd00:10::\/64 /);
    assert.equal(kubenetMasqRule("0.0.0.0/0", parseCidr("0.0.0.0/0")), undefined);
    assert.equal(kubenetMasqRule("::/0", parseCidr("::/0")), undefined);
  });
});
