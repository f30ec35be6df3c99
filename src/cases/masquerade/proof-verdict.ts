/**
 * @module cases/masquerade/proof-verdict — the verdict of a masquerade change record: the nodes the
 * change did not reach (a node-level capture after the change that still shows the old source, or
 * rules that never changed), then the wire after the change against what the ConfigMap intended;
 * and the reverse direction, whether the replies reach the sender.
 */
import type { Evidence } from "../../model/types.ts";
import type { ChangeRecord, NodeChange, Verdict } from "./proof.ts";
import { summarise, type WireObservation } from "./proof-wire.ts";

/**
 * The nodes the change did not reach, with why: a node-level capture after the change that shows
 * the old source leaving means that node's rules never changed, whatever the ConfigMap says.
 */
export function nodesLeftBehind(
  wire: readonly WireObservation[],
  wantAfter: WireObservation["sourceKind"] | undefined,
  nodes: readonly NodeChange[],
  knob = "the ConfigMap",
): Map<string, string> {
  const oldKind: WireObservation["sourceKind"] | undefined =
    wantAfter === "node" ? "pod" : wantAfter === "pod" ? "node" : undefined;
  const stuckOnWire = oldKind
    ? wire.filter(
        (w) =>
          w.phase === "after" && w.sourceKind === oldKind && w.point?.startsWith("node/") && w.node,
      )
    : [];
  const stuck = new Map<string, string>();
  for (const w of stuckOnWire) {
    if (stuck.has(w.node!)) continue;
    stuck.set(
      w.node!,
      oldKind === "pod"
        ? `a node-level capture after the change (${w.capture}) still shows the pod address ${w.source}: the rules never changed on ${w.node}, whatever ${knob} says`
        : `a node-level capture after the change (${w.capture}) still shows the node address ${w.source}: the rules never changed back on ${w.node}, whatever ${knob} says`,
    );
  }
  for (const n of nodes) {
    if (n.pickedUp === "no" && !stuck.has(n.node))
      stuck.set(n.node, `the rules never changed on ${n.node}, whatever ${knob} says`);
  }
  return stuck;
}

type VerdictLine = { verdict: Verdict; verdictText: string };

const cap = (s: string) => `${s.charAt(0).toUpperCase()}${s.slice(1)}`;

/** The verdict once the wire after the change is known, by what the change intended. */
function wireVerdict(
  intended: ChangeRecord["intended"],
  afterObs: WireObservation,
  destText: string | undefined,
  knob: string,
): VerdictLine {
  if (intended === "masquerade") {
    if (afterObs.sourceKind === "node" && afterObs.completed) {
      return {
        verdict: "fixed",
        verdictText: `Requests to ${destText} now leave with the node address ${afterObs.source} and complete: the change did what it said.`,
      };
    }
    if (afterObs.sourceKind === "node") {
      return {
        verdict: "not-fixed",
        verdictText: afterObs.replied
          ? `Requests now leave translated (${afterObs.source}) and get replies, but the exchange did not finish (${summarise(afterObs)}).`
          : `Requests now leave translated (${afterObs.source}) but ${summarise(afterObs)}: a routing or firewall problem on the far side, not masquerade.`,
      };
    }
    return {
      verdict: "not-applied-on-node",
      verdictText: `After the change the request still carries the pod address ${afterObs.source}: the rules never changed where it left, whatever ${knob} says.`,
    };
  }
  if (intended === "keep-pod-source") {
    return afterObs.sourceKind === "pod"
      ? {
          verdict: "rolled-back",
          verdictText: `Requests to ${destText} carry the pod address ${afterObs.source} again (${summarise(afterObs)}): the previous behaviour is back.`,
        }
      : {
          verdict: "not-applied-on-node",
          verdictText: `${cap(knob)} exempts ${destText} again, but requests still leave with ${afterObs.source}: the rules did not change back.`,
        };
  }
  return {
    verdict: "undecided",
    verdictText:
      destText !== undefined
        ? `${cap(knob)} change does not change how ${destText} is treated.`
        : "No destination to judge by: give --dest IP[:PORT].",
  };
}

/** The verdict: the wire is the fact; a refused config or a node left behind decides first. */
export function changeVerdict(
  config: { readonly afterRefused?: string; readonly listChanged: boolean },
  intended: ChangeRecord["intended"],
  stuck: Map<string, string>,
  nodes: readonly NodeChange[],
  afterObs: WireObservation | undefined,
  destText: string | undefined,
  knob = "the ConfigMap",
): VerdictLine {
  const reached = nodes
    .filter((n) => n.pickedUp === "yes" && !stuck.has(n.node))
    .map((n) => n.node);
  const stuckText = [...stuck.values()].join("; ");
  if (config.afterRefused) {
    return {
      verdict: "not-applied-on-node",
      verdictText: `The agent refuses the after ConfigMap (${config.afterRefused}); it keeps its previous config and rules on every node.`,
    };
  }
  if (stuck.size > 0 && reached.length > 0) {
    return {
      verdict: "partly-applied",
      verdictText: `The change reached ${reached.join(", ")} but not ${[...stuck.keys()].join(", ")}: ${stuckText}.`,
    };
  }
  if (stuck.size > 0) {
    return {
      verdict: "not-applied-on-node",
      verdictText: `${stuckText.charAt(0).toUpperCase()}${stuckText.slice(1)}.`,
    };
  }
  if (intended === "none" && !config.listChanged)
    return {
      verdict: "no-change",
      verdictText: `${knob === "the ConfigMap" ? "The ConfigMap's list" : cap(knob)} is the same in both snapshots.`,
    };
  if (!afterObs) {
    return {
      verdict: "undecided",
      verdictText:
        "The after snapshot has no capture of the known request: the wire decides it (see what is missing).",
    };
  }
  return wireVerdict(intended, afterObs, destText, knob);
}

/** The reverse direction after the change: whether the replies reach the sender. */
export function reverseDirection(afterObs: WireObservation | undefined): string {
  if (!afterObs) return "Not captured after the change.";
  const back = afterObs.toSender;
  const at = (e?: Evidence) => (e ? ` (${e.file}:${e.line})` : "");
  if (back) {
    return back.replied
      ? `The replies reach the sender ${afterObs.pod}: seen going back to it after de-NAT${at(back.evidence)}; ${back.progress}.`
      : `Replies reach the node (${afterObs.source}) but were not seen going back to the pod ${afterObs.pod}: ${back.progress}.`;
  }
  return afterObs.completed
    ? `The replies reach the sender: ${afterObs.progress}.`
    : afterObs.replied
      ? `Replies come back, but the exchange did not finish: ${afterObs.progress}.`
      : "No reply came back after the change.";
}
