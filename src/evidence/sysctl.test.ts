/** @module evidence/sysctl.test — readSysctl on real sysctl/procfs output and hand-made edge cases. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { readSysctl } from "./sysctl.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`fixtures/${name}`, import.meta.url), "utf8");

describe("readSysctl", () => {
  it("reads `sysctl -a` with the line of every key", () => {
    const text = fixture("sysctl-a.txt");
    const { value, diagnostics } = readSysctl(text, "pods/vpn/p/sysctl.txt");
    assert.deepEqual(diagnostics, []);
    const lines = text.split("\n");
    const e = value.get("net.ipv4.ip_forward");
    assert.ok(e);
    assert.equal(e.value, "0");
    assert.equal(lines[e.source.line - 1], "net.ipv4.ip_forward = 0");
    assert.equal(e.source.file, "pods/vpn/p/sysctl.txt");
    // Every key line of the file is read (multi-line values share one key).
    const keys = new Set(lines.filter((l) => l.includes(" = ")).map((l) => l.split(" = ")[0]));
    assert.equal(value.size, keys.size);
  });

  it("keeps tab-separated values and joins multi-line values", () => {
    const { value } = readSysctl(fixture("sysctl-a.txt"), "s");
    assert.match(value.get("net.ipv4.tcp_rmem")?.value ?? "", /^\d+\t\d+\t\d+$/);
    const modes = value.get("kernel.core_modes");
    if (modes) assert.ok(modes.value.split("\n").length >= 2);
    const text = "kernel.core_modes = file\nkernel.core_modes = pipe\nkernel.core_modes = socket\n";
    assert.equal(readSysctl(text, "s").value.get("kernel.core_modes")?.value, "file\npipe\nsocket");
  });

  it("reads `sysctl KEY`", () => {
    const { value, diagnostics } = readSysctl(fixture("sysctl-key.txt"), "k");
    assert.deepEqual(diagnostics, []);
    assert.equal(value.get("net.ipv4.ip_forward")?.value, "1");
  });

  it("needs a key for a bare `sysctl -n` value, and says so", () => {
    const bare = fixture("sysctl-n.txt");
    const without = readSysctl(bare, "n.txt");
    assert.equal(without.value.size, 0);
    assert.equal(without.diagnostics.length, 1);
    assert.match(without.diagnostics[0]!.message, /expected "key = value".*needs its key/);
    assert.equal(without.diagnostics[0]!.source?.line, 1);
    const withKey = readSysctl(bare, "n.txt", { keys: ["net.ipv4.ip_forward"] });
    assert.equal(withKey.value.get("net.ipv4.ip_forward")?.value, "1");
  });

  it("names a bare value from its /proc/sys path", () => {
    const { value } = readSysctl(
      fixture("proc-ip-forward.txt"),
      "nodes/n1/proc/sys/net/ipv4/ip_forward",
    );
    assert.equal(value.get("net.ipv4.ip_forward")?.value, "0");
  });

  it("reads several `sysctl -n` values in key order", () => {
    const { value } = readSysctl("1\n0\n", "n", {
      keys: ["net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter"],
    });
    assert.equal(value.get("net.ipv4.ip_forward")?.value, "1");
    assert.equal(value.get("net.ipv4.conf.all.rp_filter")?.value, "0");
  });

  it("reads key=value, slash keys and comments as sysctl.conf has them", () => {
    const text =
      "# forwarding\n; old style\nnet.ipv4.ip_forward=1\nnet/ipv4/conf/all/rp_filter = 2\n\nnet.ipv4.conf.eth0/100.rp_filter = 0\n";
    const { value, diagnostics } = readSysctl(text, "c");
    assert.deepEqual(diagnostics, []);
    assert.equal(value.get("net.ipv4.ip_forward")?.source.line, 3);
    assert.equal(value.get("net.ipv4.conf.all.rp_filter")?.value, "2");
    assert.equal(value.get("net.ipv4.conf.eth0/100.rp_filter")?.value, "0");
  });

  it("reports garbage and sysctl's own errors with the line, and keeps going", () => {
    const text =
      "net.ipv4.ip_forward = 1\nthis is not sysctl\nsysctl: permission denied on key 'fs.protected_hardlinks'\n= 3\nnet.ipv4.ip_forward = 0\n";
    const { value, diagnostics } = readSysctl(text, "g.txt");
    assert.deepEqual(
      diagnostics.map((d) => [d.code, d.severity, d.source?.line]),
      [
        ["SYSCTL_SYNTAX", "warning", 2],
        ["SYSCTL_TOOL_ERROR", "info", 3],
        ["SYSCTL_SYNTAX", "warning", 4],
        ["SYSCTL_DUPLICATE", "warning", 5],
      ],
    );
    assert.match(diagnostics[0]!.message, /expected "key = value"/);
    assert.equal(value.get("net.ipv4.ip_forward")?.value, "0");
  });

  it("reads CRLF files", () => {
    const { value } = readSysctl("net.ipv4.ip_forward = 1\r\n", "w");
    assert.equal(value.get("net.ipv4.ip_forward")?.value, "1");
  });
});
