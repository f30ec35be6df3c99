import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PathHop, PathView } from "./answer.ts";
import type { Finding, FindingId, Severity } from "./types.ts";
import { decideVerdict, isPathUndecided, pathName, pathOfFinding } from "./verdict.ts";

const finding = (
  id: FindingId,
  severity: Severity,
  subject: string,
  evidence: { file: string; line: number }[] = [{ file: "x.txt", line: 1 }],
): Finding => ({
  id,
  severity,
  title: `${id} on ${subject}`,
  subject,
  explanation: "",
  evidence,
  next: [],
});

const hop = (
  at: string,
  state: PathHop["state"],
  ev?: { file: string; line: number },
): PathHop => ({
  at,
  label: at,
  state,
  ...(ev ? { evidence: ev } : {}),
});

const podPath: PathView = {
  from: "pod/default/app",
  to: "10.20.30.40",
  port: 5432,
  hops: [
    hop("pod/default/app", "ok", { file: "cluster/pods.yaml", line: 23 }),
    hop("node/n1", "ok", { file: "nodes/n1/iptables-save.txt", line: 10 }),
    hop("remote/dc1", "stops"),
  ],
  verdict: "replies to 10.4.0.5 have no way back from dc1",
};
const nodePath: PathView = {
  from: "node/n1",
  to: "10.20.30.40",
  port: 5432,
  hops: [
    hop("node/n1", "ok"),
    hop("node/n1", "ok", { file: "nodes/n1/iptables-save.txt", line: 10 }),
    hop("remote/dc1", "ok"),
  ],
  verdict: "10.20.30.40:5432 sees 10.128.0.2, and the far side routes it back",
};
const openPath: PathView = {
  from: "pod/default/app",
  to: "10.20.30.41",
  hops: [hop("pod/default/app", "ok"), hop("10.20.30.41", "unknown")],
  verdict: "10.20.30.41 sees 10.4.0.5; whether replies come back depends on the far side",
};

describe("decideVerdict", () => {
  it("is broken when an error finding exists; the first in sorted order decides", () => {
    const v = decideVerdict(
      [
        finding("evidence/unplaced", "info", "node/n2"),
        finding("masq/no-return-route", "error", "remote/dc1"),
        finding("masq/exempt-destination", "error", "node/n1", [
          { file: "nodes/n1/iptables-save.txt", line: 10 },
          { file: "cluster/pods.yaml", line: 23 },
        ]),
      ],
      [nodePath, podPath, openPath],
    );
    assert.equal(v.state, "broken");
    assert.equal(v.finding, "masq/exempt-destination");
    assert.equal(v.summary, "masq/exempt-destination on node/n1");
    // both paths cite the rule line; the one that stops is the subject
    assert.equal(v.subject, "pod/default/app → 10.20.30.40:5432");
  });

  it("is undecided when evidence was not placed, even with every path decided", () => {
    for (const id of ["evidence/unplaced", "masq/source-undecided"] as const) {
      const v = decideVerdict([finding(id, "info", "node/n9")], [nodePath]);
      assert.deepEqual(v, {
        state: "undecided",
        summary: `${id} on node/n9`,
        finding: id,
        subject: "node/n9",
      });
    }
  });

  it("is undecided when a path has a hop in state unknown, or says it is not decided", () => {
    assert.deepEqual(
      decideVerdict([finding("vpn/forwarding-not-durable", "warning", "p")], [nodePath, openPath]),
      {
        state: "undecided",
        summary: openPath.verdict,
        subject: "pod/default/app → 10.20.30.41",
      },
    );
    const said: PathView = {
      ...nodePath,
      verdict: "the source address on the wire is not decided (x)",
    };
    assert.equal(decideVerdict([], [said]).state, "undecided");
  });

  it("is undecided when nothing was traced, naming the reading error or what would decide", () => {
    assert.deepEqual(decideVerdict([], []), {
      state: "undecided",
      summary: "nothing was traced: the snapshot holds no evidence a question reads",
    });
    const miss = { file: "cluster/*.yaml", would_decide: "the intent" };
    assert.equal(
      decideVerdict([], [], { missing: [miss] }).summary,
      "nothing was traced; cluster/*.yaml would decide the intent",
    );
    const err = { code: "X", severity: "error" as const, message: "--from: no such pod" };
    assert.equal(
      decideVerdict([], [], { missing: [miss], diagnostics: [err] }).summary,
      "nothing was traced: --from: no such pod",
    );
  });

  it("is healthy otherwise, naming the paths decided and the warnings left", () => {
    const v = decideVerdict(
      [
        finding("vpn/forwarding-not-durable", "warning", "pod/vpn/x"),
        finding("masq/wire-node-source", "info", "f"),
      ],
      [nodePath],
    );
    assert.equal(v.state, "healthy");
    assert.equal(v.subject, "node/n1 → 10.20.30.40:5432");
    assert.equal(v.summary, `the traced path is decided: ${nodePath.verdict} (1 warning below)`);
    assert.equal(v.finding, undefined);
  });
});

describe("paths", () => {
  it("names a path with its port", () => {
    assert.equal(pathName(podPath), "pod/default/app → 10.20.30.40:5432");
    assert.equal(pathName(openPath), "pod/default/app → 10.20.30.41");
  });
  it("tells decided paths from undecided ones", () => {
    assert.equal(isPathUndecided(podPath), false);
    assert.equal(isPathUndecided(openPath), true);
  });
  it("finds a finding's path by its subject when no hop cites its evidence", () => {
    assert.equal(
      pathOfFinding(finding("masq/no-return-route", "error", "remote/dc1"), [nodePath, podPath]),
      podPath,
    );
    assert.equal(
      pathOfFinding(finding("vpn/dns-layer", "error", "client/x"), [nodePath]),
      undefined,
    );
  });
});
