/**
 * @module cases/vpn/admission — `vpn/admission-rejects`: the VPN workload as it stands, and each
 * durable forwarding fix, run through admission prediction (Pod Security from the namespace labels,
 * API validation, the kubelet's sysctl allowlist, GKE Autopilot) with the message the user would see.
 */

import { predictAdmission } from "../../agents/pod-security/predict.ts";
import { type Finding, refToEvidence } from "../../model/types.ts";
import { sh } from "../../report/shell-quote.ts";
import type { VpnContext, VpnInput } from "./input.ts";
import { planVpn, platformOf } from "./plan.ts";

export function admissionFindings(ctx: VpnContext, input: VpnInput, needsFix: boolean): Finding[] {
  const wl = ctx.workload;
  if (!wl) return [];
  const out: Finding[] = [];
  const subject = `pod/${ctx.namespace}/${ctx.name}`;
  const nsEvidence = ctx.namespaceObject ? [refToEvidence(ctx.namespaceObject.source)] : [];
  const kubeletConfig = input.kubeletConfigs?.[0];
  const platform = platformOf(input.objects);
  const now = predictAdmission(wl.raw, {
    namespaceLabels: ctx.namespaceObject?.labels ?? {},
    platform,
    ...(kubeletConfig ? { kubeletConfig } : {}),
  });
  if (now && now.allowed === "no") {
    const msg = [
      now.autopilot?.allowed === false ? now.autopilot.message : "",
      now.podSecurity.message,
    ]
      .filter((m) => m !== "")
      .join("; ");
    out.push({
      id: "vpn/admission-rejects",
      severity: "error",
      title: `The VPN ${wl.kind} itself is not admitted in namespace ${ctx.namespace}`,
      subject,
      explanation: `As written, ${wl.kind} ${wl.name} is rejected: ${msg}. A new pod will not start, whatever the fix.`,
      evidence: [refToEvidence(wl.source), ...nsEvidence],
      next: [sh`podpath admission check ${wl.source.file}`],
    });
  }
  if (!needsFix) return out;
  const plan = planVpn(ctx, input.objects, kubeletConfig ? { kubeletConfig } : {});
  const applicable = plan.strategies.filter((s) => s.applicable && s.admission);
  const rejected = applicable.filter((s) => s.admission?.allowed === "no");
  if (rejected.length === 0) return out;
  const all = rejected.length === applicable.length;
  out.push({
    id: "vpn/admission-rejects",
    severity: all ? "error" : "warning",
    title: all
      ? "Every durable forwarding fix would be rejected at admission"
      : `Forwarding fixes rejected at admission: ${rejected.map((s) => s.strategy).join(", ")}`,
    subject,
    explanation: rejected
      .map((s) => `${s.strategy}: ${s.admission!.messages.join(" | ") || "rejected"}`)
      .join("\n"),
    evidence: [refToEvidence(wl.source), ...nsEvidence],
    next: [
      sh`podpath plan vpn SNAPSHOT --pod ${`${ctx.namespace}/${ctx.name}`}`,
      ...applicable
        .filter((s) => s.admission?.allowed !== "no")
        .map(
          (s) =>
            `${s.strategy} is predicted "${s.admission?.allowed}"${s.admission?.notes.length ? `: ${s.admission.notes.join("; ")}` : ""}`,
        ),
    ],
  });
  return out;
}
