/**
 * @module cases/vpn/plan-render — the VPN forwarding plan as a document (report/document): the pod's
 * state now, each strategy with its admission prediction, patch and commands, the return path and
 * the checks after the rollout. report/ renders it as text, Markdown and HTML.
 */
import { stringify } from "yaml";
import type { Evidence } from "../../model/types.ts";
import {
  type Block,
  code,
  codeBlock,
  type Document,
  fields,
  type Inline,
  list,
  paragraph,
  section,
  type Text,
  toned,
} from "../../report/document.ts";
import type { StrategyPlan, VpnPlan } from "./plan.ts";

const at = (e: Evidence): Inline[] => [" (", code(`${e.file}:${e.line}`), ")"];
const yaml = (v: unknown) => stringify(v, { aliasDuplicateObjects: false });

function strategyBlocks(s: StrategyPlan): Block[] {
  if (!s.applicable) return [paragraph(`not applicable: ${s.whyNot ?? ""}`)];
  const blocks: Block[] = [paragraph(s.description)];
  const a = s.admission;
  if (a) {
    const verdict =
      a.allowed === "yes"
        ? toned("good", "admitted")
        : a.allowed === "no"
          ? toned("bad", "REJECTED")
          : toned("warn", "unknown");
    blocks.push(paragraph(["admission: ", verdict]));
    if (a.messages.length + a.notes.length > 0) blocks.push(list([...a.messages, ...a.notes]));
  }
  if (s.helmValues)
    blocks.push(
      section("values override (values-ip-forward.yaml)", [codeBlock(yaml(s.helmValues), "yaml")]),
    );
  if (s.patch) blocks.push(section("strategic-merge patch", [codeBlock(yaml(s.patch), "yaml")]));
  if (s.commands.length > 0)
    blocks.push(
      section(
        "apply",
        s.commands.map((c) => paragraph(code(c))),
      ),
    );
  if (s.patched)
    blocks.push({
      kind: "section",
      title: "full patched manifest",
      collapsed: true,
      blocks: [codeBlock(yaml(s.patched), "yaml")],
    });
  return blocks;
}

/** The plan as a document: state, strategies with admission, return path, checks after rollout. */
export function vpnPlanDocument(plan: VpnPlan): Document {
  const state: [string, Text][] = [];
  if (plan.workload)
    state.push([
      "workload",
      [`${plan.workload.kind} ${plan.workload.name}`, ...at(plan.workload.evidence)],
    ]);
  if (plan.forwardingNow)
    state.push([
      "now",
      [`net.ipv4.ip_forward = ${plan.forwardingNow.value}`, ...at(plan.forwardingNow.evidence)],
    ]);
  for (const a of plan.alreadySet)
    state.push([`already set by ${a.kind}`, [a.value, ...at(a.evidence)]]);
  const blocks: Block[] = [];
  if (state.length > 0) blocks.push(fields(state));
  for (const w of plan.warnings) blocks.push(paragraph([toned("warn", "WARNING:"), ` ${w}`]));
  for (const s of plan.strategies) blocks.push(section(s.strategy, strategyBlocks(s)));
  const rp = plan.returnPath;
  blocks.push(
    section("return path", [
      paragraph(rp.explanation),
      ...(rp.command ? [paragraph(code(rp.command))] : []),
      ...(rp.route ? [paragraph(code(rp.route))] : []),
    ]),
    section(
      "after the rollout",
      plan.verify.map((v) => paragraph(code(v))),
    ),
  );
  return { question: "plan vpn", title: `Durable forwarding for VPN pod ${plan.pod}`, blocks };
}
