/**
 * End-to-end: `podpath ipmasq config|rules` as a user runs them, spawned as a process; checks
 * exit codes, stdout (the answer only) and stderr (notes and diagnostics).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixtures = join(root, "src/agents/ip-masq-agent/fixtures");
const fx = (name: string) => join(fixtures, name);
const tmp = mkdtempSync(join(tmpdir(), "podpath-ipmasq-e2e-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

function podpath(...args: string[]) {
  const r = spawnSync(
    process.execPath,
    ["--import", "tsx", join(root, "src/cli/main.ts"), ...args],
    {
      encoding: "utf8",
      cwd: root,
      env: { ...process.env, NO_COLOR: "1" },
    },
  );
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("podpath ipmasq config", () => {
  it("prints the effective config of a ConfigMap with the agent's key names", () => {
    const r = podpath("ipmasq", "config", fx("configmap-onprem.yaml"), "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), {
      nonMasqueradeCIDRs: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
      cidrLimit: 64,
      masqLinkLocal: false,
      masqLinkLocalIPv6: false,
      resyncInterval: "1m0s",
    });
  });

  it("prints the agent's error text and exits 2 on an invalid config, naming file and line", () => {
    const r = podpath("ipmasq", "config", fx("configmap-misaligned.yaml"), "-o", "text");
    assert.equal(r.code, 2);
    assert.equal(
      r.stdout,
      'CIDR "10.20.30.40/16" is not aligned to a CIDR block, ip: "10.20.30.40" network: "10.20.0.0/16"\n',
    );
    assert.match(r.stderr, /configmap-misaligned\.yaml:10: the agent rejects this config/);
    assert.match(r.stderr, /keeps running with its previous config/);
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/, "no stack trace");
  });

  it("shows the previous config the agent keeps when the new one is rejected", () => {
    const prev = join(tmp, "prev.yaml");
    writeFileSync(prev, "nonMasqueradeCIDRs: [10.128.0.0/20]\nresyncInterval: 30s\n");
    const r = podpath(
      "ipmasq",
      "config",
      fx("configmap-misaligned.yaml"),
      "--previous",
      prev,
      "-o",
      "text",
    );
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /the config it keeps: \{"nonMasqueradeCIDRs":\["10\.128\.0\.0\/20"\],"cidrLimit":64,"masqLinkLocal":false,"masqLinkLocalIPv6":false,"resyncInterval":"30s"\}/,
    );
  });

  it("falls back to the defaults when the ConfigMap key is wrong, and says why", () => {
    const r = podpath("ipmasq", "config", fx("configmap-wrong-key.yaml"));
    assert.equal(r.code, 0);
    assert.deepEqual(JSON.parse(r.stdout).nonMasqueradeCIDRs, [
      "10.0.0.0/8",
      "172.16.0.0/12",
      "192.168.0.0/16",
    ]);
    assert.match(r.stderr, /has no data key "config" \(it has: ip-masq-agent\)/);
  });

  it("reads the flags from a DaemonSet, and explicit flags override them", () => {
    const ds = podpath("ipmasq", "config", "--daemonset", fx("daemonset-gce-addon.yaml"));
    assert.equal(ds.code, 0, ds.stderr);
    assert.equal(JSON.parse(ds.stdout).nonMasqueradeCIDRs.length, 11);
    const off = podpath(
      "ipmasq",
      "config",
      "--daemonset",
      fx("daemonset-gce-addon.yaml"),
      "--nomasq-all-reserved-ranges=false",
    );
    assert.equal(JSON.parse(off.stdout).nonMasqueradeCIDRs.length, 3);
  });

  it("reads a raw config file in JSON and reports the agent's JSON error", () => {
    const file = join(tmp, "bad.json");
    writeFileSync(file, '{"nonMasqueradeCIDRs": ["10.0.0.0/8",]}\n');
    const r = podpath("ipmasq", "config", file, "-o", "json");
    assert.equal(r.code, 2);
    assert.equal(
      JSON.parse(r.stdout).error,
      "invalid character ']' looking for beginning of value",
    );
    assert.equal(JSON.parse(r.stdout).line, 1);
  });

  it("takes a boolean flag right before FILE as the flag, and FILE as the file", () => {
    const file = join(tmp, "v6.yaml");
    writeFileSync(file, "nonMasqueradeCIDRs: [fc00::/7]\n");
    const r = podpath("ipmasq", "config", "--enable-ipv6", file);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).nonMasqueradeCIDRs, ["fc00::/7"]);
  });

  it("exits 2 naming the file when it cannot be read", () => {
    const r = podpath("ipmasq", "config", join(tmp, "absent.yaml"));
    assert.equal(r.code, 2);
    assert.match(r.stderr, /cannot read config file .*absent\.yaml: no such file/);
    assert.equal(r.stdout, "");
  });
});

describe("podpath ipmasq rules", () => {
  it("prints exactly the iptables-restore input the agent writes", () => {
    const r = podpath("ipmasq", "rules", fx("configmap-onprem.yaml"));
    assert.equal(r.code, 0, r.stderr);
    const C = "ip-masq-agent: local traffic is not subject to MASQUERADE";
    assert.equal(
      r.stdout,
      [
        "*nat",
        ":IP-MASQ-AGENT - [0:0]",
        `-A IP-MASQ-AGENT -m comment --comment "${C}" -d 169.254.0.0/16 -j RETURN`,
        `-A IP-MASQ-AGENT -m comment --comment "${C}" -d 10.0.0.0/8 -j RETURN`,
        `-A IP-MASQ-AGENT -m comment --comment "${C}" -d 172.16.0.0/12 -j RETURN`,
        `-A IP-MASQ-AGENT -m comment --comment "${C}" -d 192.168.0.0/16 -j RETURN`,
        '-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE --random-fully',
        "COMMIT",
        "",
      ].join("\n"),
    );
    assert.match(r.stderr, /POSTROUTING jump/);
  });

  it("uses the DaemonSet's chain and honours --random-fully=false", () => {
    const r = podpath(
      "ipmasq",
      "rules",
      "--daemonset",
      fx("daemonset-gce-addon.yaml"),
      "--random-fully=false",
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^\*nat\n:IP-MASQ - \[0:0\]\n/);
    assert.match(r.stdout, / -j MASQUERADE\nCOMMIT\n$/);
    assert.equal(r.stdout.split("\n").filter((l) => l.includes("-j RETURN")).length, 12);
  });

  it("drops --random-fully when the agent's iptables is older than 1.6.2", () => {
    const old = podpath("ipmasq", "rules", "--iptables-version", "1.6.1");
    assert.equal(old.code, 0, old.stderr);
    assert.doesNotMatch(old.stdout, /--random-fully/);
    const current = podpath("ipmasq", "rules", "--iptables-version", "v1.8.9");
    assert.match(current.stdout, /-j MASQUERADE --random-fully\n/);
  });

  it("prints the rules and their saved form as JSON", () => {
    const r = podpath("ipmasq", "rules", fx("configmap-onprem.yaml"), "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.ip6tables, undefined);
    assert.equal(out.iptables.savedLines[0], ":IP-MASQ-AGENT - [0:0]");
    assert.match(
      out.iptables.postroutingJump,
      /^-A POSTROUTING -m comment --comment ip-masq-agent: ensure/,
    );
  });

  it("refuses a bad --to-ports as the agent does at startup", () => {
    const r = podpath("ipmasq", "rules", "--to-ports", "1024-80");
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /Invalid --to-ports flag "1024-80": first is greater than last in "1024-80"/,
    );
  });

  it("writes no rules for a rejected config", () => {
    const r = podpath("ipmasq", "rules", fx("configmap-misaligned.yaml"));
    assert.equal(r.code, 2);
    assert.equal(r.stdout, "");
  });
});
