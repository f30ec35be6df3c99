import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Answer } from "../model/answer.ts";
import { diagnose } from "../questions/diagnose.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { firstSentence, fixSentence, summariseAnswer } from "./summary.ts";

const answerOf = async (dir: string): Promise<Answer> => diagnose(loadSnapshot(openSnapshot(dir)));

describe("sentences of an explanation", () => {
  it("the first ends at a full stop outside parentheses, quotes and backticks", () => {
    assert.equal(
      firstSentence('The rule (-m comment --comment "x. y" -j RETURN) returns. The rest.'),
      'The rule (-m comment --comment "x. y" -j RETURN) returns.',
    );
    assert.equal(
      firstSentence("net.ipv4.ip_forward reads 0. More."),
      "net.ipv4.ip_forward reads 0.",
    );
    assert.equal(firstSentence("no stop at all"), "no stop at all");
  });

  it("the fix is the sentence after `Fix:`", () => {
    assert.equal(
      fixSentence("It breaks. Fix: narrow it (`podpath plan masquerade`). Or not."),
      "narrow it (`podpath plan masquerade`).",
    );
    assert.equal(fixSentence("No fix here."), undefined);
  });
});

describe("the summary an answer opens with", () => {
  it("the seed example: the exemption's cause, what follows, its fix and plan command, its path", async () => {
    const a = await answerOf("examples/snat-exception-list");
    const s = summariseAnswer(a);
    assert.deepEqual(s.verdict, a.verdict, "the cause decides the verdict: unchanged");
    assert.equal(s.cause?.id, "masq/exempt-destination");
    assert.match(
      s.because ?? "",
      /returns before the MASQUERADE rule, so the source is never rewritten\.$/,
    );
    assert.equal(s.consequences.length, 2);
    assert.match(s.fix ?? "", /^narrow the exemption to the pod range/);
    assert.equal(
      s.command,
      "podpath plan masquerade examples/snat-exception-list --dest 10.20.30.40",
    );
    assert.equal(s.path?.from, "pod/default/billing-default");
  });

  it("three pools: the verdict is restated from the missing agent on pool legacy", async () => {
    const a = await answerOf("src/cases/masquerade/fixtures/three-pools");
    const s = summariseAnswer(a);
    assert.equal(a.verdict.finding, "masq/exempt-destination");
    assert.equal(s.verdict.finding, "masq/agent-missing");
    assert.equal(s.verdict.subject, a.verdict.subject);
    assert.match(
      s.verdict.summary,
      /^ip-masq-agent does not run on node pool legacy, so pod traffic/,
    );
    assert.equal(s.fix, undefined, "the exemption's fix would treat the symptom");
    assert.match(s.nextStep ?? "", /^kubectl -n kube-system get pods -l k8s-app=ip-masq-agent/);
  });

  it("VPN: forwarding off, its plan command as the fix", async () => {
    const s = summariseAnswer(await answerOf("examples/vpn-forwarding-off"));
    assert.equal(s.cause?.id, "vpn/forwarding-disabled");
    assert.match(s.command ?? "", /^podpath plan vpn /);
    assert.deepEqual(s.consequences, ["First hop without an answer: pod-ip (vpn-pod-forwarding)"]);
  });

  it("healthy: no cause, no fix, the first path", async () => {
    const a = await answerOf("examples/vpn-forwarding-fixed");
    const s = summariseAnswer(a);
    assert.equal(s.verdict.state, "healthy");
    assert.equal(s.cause, undefined);
    assert.equal(s.fix, undefined);
    assert.equal(s.path, a.paths[0]);
  });
});
