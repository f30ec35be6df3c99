import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import type { PathHop, PathView } from "../../model/answer.ts";
import { decideVerdict, isPathUndecided } from "../../model/verdict.ts";
import { formatIp } from "../../net/cidr.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { analyzeVpn } from "./analyze.ts";
import { explainVpn } from "./explain.ts";
import type { VpnInput } from "./input.ts";
import { vpnPaths } from "./paths.ts";
import { vpnInputFromSnapshot } from "./snapshot-input.ts";

// Snapshots written by `podpath lab run vpn` (real OpenVPN, sysctl, iptables and probes): see
// testdata/vpn-lab/*/README.md for each variant's command line.
const VARIANTS = [
  "forwarding-off",
  "no-masquerade",
  "pool-policy",
  "fixed",
  "dns-broken",
  "set-by-hand",
  "baseline-ns",
] as const;
const lab = (v: string) => new URL(`./testdata/vpn-lab/${v}/`, import.meta.url).pathname;
const inputOf = (v: string) => vpnInputFromSnapshot(loadSnapshot(openSnapshot(lab(v)))).input;

function drawn(input: VpnInput) {
  const answer = analyzeVpn(input);
  return { answer, paths: vpnPaths(input, answer) };
}

/** The text at a cited line, read from the snapshot file itself. */
function citedLine(v: string, e: NonNullable<PathHop["evidence"]>): string {
  const lines = readFileSync(`${lab(v)}${e.file}`, "utf8").split(/\r?\n/);
  assert.ok(e.line >= 1 && e.line <= lines.length, `${e.file}:${e.line} exists`);
  return lines[e.line - 1]!;
}

const last = (p: PathView) => p.hops.at(-1)!;
const podHops = (p: PathView, pod: string) => p.hops.filter((h) => h.at === pod);

describe("vpnPaths on the lab replicas", () => {
  for (const v of VARIANTS) {
    it(`${v}: every path starts at the client, and every cited line holds the cited text`, () => {
      const input = inputOf(v);
      const { answer, paths } = drawn(input);
      assert.ok(paths.length > 0, "paths drawn");
      const client = input.probes.find((p) => p.client)?.client;
      assert.ok(client?.vpnAddress, "the transcript names the client's VPN address");
      for (const p of paths) {
        assert.equal(p.from, `client/${client.name}`);
        assert.equal(p.hops[0]!.source, formatIp(client.vpnAddress));
        assert.ok(p.verdict.length > 0 && !p.verdict.includes("\n"), "one sentence");
        // a stop ends the path
        const stop = p.hops.findIndex((h) => h.state === "stops");
        assert.ok(stop === -1 || stop === p.hops.length - 1, `${p.to}: nothing after a stop`);
        for (const h of p.hops) {
          if (h.state !== "unknown") assert.ok(h.evidence, `${p.to} ${h.at}: ${h.state} cites`);
          if (!h.evidence) continue;
          const text = citedLine(v, h.evidence);
          if (h.evidence.text !== undefined) assert.equal(text.trim(), h.evidence.text.trim());
        }
      }
      // the pod the paths pass is the one the findings are about
      const pod = `pod/${answer.context!.namespace}/${answer.context!.name}`;
      assert.ok(paths.every((p) => podHops(p, pod).length > 0));
    });
  }

  for (const v of ["forwarding-off", "baseline-ns"]) {
    it(`${v}: each path stops at the VPN pod, on the ip_forward line`, () => {
      const { answer, paths } = drawn(inputOf(v));
      const pod = `pod/${answer.context!.namespace}/${answer.context!.name}`;
      assert.ok(answer.findings.some((f) => f.id === "vpn/forwarding-disabled"));
      for (const p of paths) {
        assert.equal(p.hops.length, 3, "client, tunnel, the pod");
        assert.equal(p.hops[1]!.state, "ok", "the tunnel address answers");
        const stop = last(p);
        assert.equal(stop.at, pod);
        assert.equal(stop.state, "stops");
        assert.match(citedLine(v, stop.evidence!), /^net\.ipv4\.ip_forward\s*=\s*0$/);
        assert.match(stop.evidence!.file, /^pods\/vpn\/[^/]+\/sysctl\.txt$/);
        assert.match(p.verdict, /ip_forward = 0/);
        assert.equal(p.sourceOnWire, undefined, "no packet reaches the far side");
      }
      const verdict = decideVerdict(answer.findings, paths);
      assert.equal(verdict.state, "broken");
      assert.equal(verdict.finding, "vpn/forwarding-disabled");
    });
  }

  it("fixed: every probed hop is ok, the source rewritten to the pod's eth0 address", () => {
    const input = inputOf("fixed");
    const { answer, paths } = drawn(input);
    const podIp = formatIp(answer.context!.podIp!.value);
    const probed = answer
      .walk!.hops.filter((h) => h.hop !== "peer")
      .flatMap((h) => h.commands.map((c) => formatIp(c.targetIp!)));
    for (const t of probed)
      assert.ok(
        paths.some((p) => p.to === t),
        `a path to ${t}`,
      );
    for (const p of paths) {
      assert.deepEqual(
        p.hops.filter((h) => h.state !== "ok" && h.state !== "changes"),
        [],
        `${p.to}: no hop stops or is unknown`,
      );
      const changes = p.hops.filter((h) => h.state === "changes");
      assert.equal(changes.length, 1, "one rewrite: the pod's masquerade");
      assert.equal(changes[0]!.source, podIp);
      assert.match(citedLine("fixed", changes[0]!.evidence!), /-j MASQUERADE/);
      assert.equal(p.sourceOnWire, podIp);
      assert.equal(last(p).source, podIp);
      assert.equal(isPathUndecided(p), false);
    }
    const verdict = decideVerdict(answer.findings, paths);
    assert.equal(verdict.state, "healthy");
    assert.match(verdict.summary, /traced paths are decided/);
  });

  it("no-masquerade: the source leaves the pod as the client address; the far hops stop as the probes say", () => {
    const input = inputOf("no-masquerade");
    const { answer, paths } = drawn(input);
    const client = formatIp(input.probes.find((p) => p.client)!.client!.vpnAddress!);
    const pod = `pod/${answer.context!.namespace}/${answer.context!.name}`;
    assert.ok(answer.findings.some((f) => f.id === "vpn/client-pool-unroutable"));
    const silent = new Set(
      answer
        .walk!.hops.filter((h) => h.state === "silent")
        .flatMap((h) => h.commands.map((c) => formatIp(c.targetIp!))),
    );
    assert.ok(silent.size > 0);
    for (const p of paths) {
      const leaving = podHops(p, pod).at(-1)!;
      assert.equal(leaving.source, client, `${p.to}: leaves the pod as ${client}`);
      assert.equal(leaving.state, "ok");
      assert.ok(!p.hops.some((h) => h.state === "changes"), "nothing rewrites the source");
      const far = last(p);
      assert.ok(far.state === "stops" || far.state === "unknown", `${p.to}: ${far.state}`);
      if (silent.has(p.to)) {
        assert.equal(far.state, "stops");
        assert.match(citedLine("no-masquerade", far.evidence!), /\b0 received|timed out/);
        assert.match(p.verdict, /no way back/);
      }
      assert.equal(p.sourceOnWire, client);
    }
  });

  it("pool-policy: the public target answers the translated source, the policed pod does not", () => {
    const { answer, paths } = drawn(inputOf("pool-policy"));
    const podIp = formatIp(answer.context!.podIp!.value);
    const byHop = new Map(answer.walk!.hops.map((h) => [h.hop, h]));
    const publicPath = paths.find(
      (p) => p.to === formatIp(byHop.get("public")!.commands[0]!.targetIp!),
    )!;
    const podPath = paths.find(
      (p) => p.to === formatIp(byHop.get("pod-ip")!.commands[0]!.targetIp!),
    )!;
    assert.equal(last(publicPath).state, "ok");
    assert.equal(publicPath.sourceOnWire, podIp);
    assert.equal(last(podPath).state, "stops");
    assert.equal(last(podPath).at, "pod/demo/web-0");
    assert.equal(podPath.sourceOnWire, podIp);
    assert.match(podPath.verdict, /another destination answers/);
  });

  it("dns-broken: the lookup's path stops at the DNS server, and the verdict names it", () => {
    const { answer, paths } = drawn(inputOf("dns-broken"));
    const dns = paths.find((p) => p.port === 53 && p.protocol === "udp")!;
    assert.ok(dns, "a path to the DNS server");
    assert.equal(last(dns).state, "stops");
    assert.match(citedLine("dns-broken", last(dns).evidence!), /refused|timed out|no servers/);
    for (const p of paths.filter((x) => x !== dns)) assert.equal(last(p).state, "ok");
    const verdict = decideVerdict(answer.findings, paths);
    assert.equal(verdict.finding, "vpn/dns-layer");
    assert.equal(verdict.subject, `${dns.from} → ${dns.to}:53`);
  });
});

describe("vpnPaths on partial evidence", () => {
  it("draws nothing without probes", () => {
    const input = { ...inputOf("fixed"), probes: [] };
    assert.deepEqual(drawn(input).paths, []);
  });

  it("without the pod's sysctl: forwarding rests on an answer past the pod when there is one", () => {
    const base = inputOf("fixed");
    const input: VpnInput = {
      ...base,
      pods: base.pods.map(({ sysctl: _drop, ...rest }) => rest),
    };
    const { answer, paths } = drawn(input);
    assert.equal(answer.forwarding, "unknown");
    const pod = `pod/${answer.context!.namespace}/${answer.context!.name}`;
    for (const p of paths) {
      const fwd = podHops(p, pod)[0]!;
      assert.equal(fwd.state, "ok");
      assert.equal(fwd.evidence!.file, "probes/laptop.txt");
      assert.match(fwd.label, /not read/);
    }
  });

  it("without the pod's sysctl and nothing past the tunnel answering: not decided", () => {
    const base = inputOf("forwarding-off");
    const input: VpnInput = {
      ...base,
      pods: base.pods.map(({ sysctl: _drop, ...rest }) => rest),
    };
    const { answer, paths } = drawn(input);
    const pod = `pod/${answer.context!.namespace}/${answer.context!.name}`;
    for (const p of paths) {
      assert.equal(podHops(p, pod)[0]!.state, "unknown");
      assert.equal(isPathUndecided(p), true);
      assert.equal(last(p).state, "stops", "the probe's silence still shows");
    }
  });

  it("without the pod's iptables-save: the source past the pod is not decided, and the verdict says so", () => {
    const base = inputOf("fixed");
    const input: VpnInput = {
      ...base,
      pods: base.pods.map(({ iptables: _drop, ...rest }) => rest),
    };
    const { answer, paths } = drawn(input);
    const pod = `pod/${answer.context!.namespace}/${answer.context!.name}`;
    for (const p of paths) {
      const nat = podHops(p, pod).at(-1)!;
      assert.equal(nat.state, "unknown");
      assert.equal(nat.source, undefined);
      assert.equal(p.sourceOnWire, undefined);
      assert.equal(last(p).state, "ok", "the destination still answers");
      assert.match(p.verdict, /not decided: the source the destination sees/);
    }
    const verdict = decideVerdict(answer.findings, paths);
    assert.equal(verdict.state, "undecided");
    assert.match(verdict.summary, /not decided/);
  });

  it("a tunnel address that does not answer ends every path at the tunnel", () => {
    const base = inputOf("fixed");
    const peerLine = base.probes[0]!.commands.find(
      (c) => c.targetIp && formatIp(c.targetIp) === "10.8.0.1",
    );
    assert.ok(peerLine);
    const input: VpnInput = {
      ...base,
      probes: base.probes.map((t) => ({
        ...t,
        commands: t.commands.map((c) =>
          c === peerLine ? { ...c, result: "timeout" as const } : c,
        ),
      })),
    };
    const { paths } = drawn(input);
    for (const p of paths) {
      assert.equal(last(p).at, "tunnel/10.8.0.1");
      assert.equal(last(p).state, "stops");
      assert.match(p.verdict, /tunnel does not answer/);
    }
  });
});

describe("explainVpn", () => {
  it("returns the paths beside the findings, the findings as analyzeVpn decides them", async () => {
    const snap = loadSnapshot(openSnapshot(lab("pool-policy")));
    const result = await explainVpn(snap, {});
    const input = vpnInputFromSnapshot(snap).input;
    const { answer, paths } = drawn(input);
    assert.deepEqual(result.findings, answer.findings);
    assert.deepEqual(result.paths, paths);
  });
});
