/**
 * @module policy/label-selector — Kubernetes label selectors (matchLabels and matchExpressions
 * with In, NotIn, Exists, DoesNotExist), parsed with diagnostics and matched as the API machinery
 * does: an empty selector selects everything; requirements are ANDed; NotIn also matches when the
 * key is absent.
 */
import type { Diagnostic, SourceRef } from "../model/types.ts";

export type SelectorOperator = "In" | "NotIn" | "Exists" | "DoesNotExist";

export interface LabelRequirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  readonly values: readonly string[];
}

export interface LabelSelector {
  readonly requirements: readonly LabelRequirement[];
  /** False when the selector was invalid: the API server would refuse it; it then selects nothing. */
  readonly valid: boolean;
}

export const SELECT_ALL: LabelSelector = { requirements: [], valid: true };

const OPERATORS: readonly string[] = ["In", "NotIn", "Exists", "DoesNotExist"];

/** Parses a selector object; problems become diagnostics at `where`. */
export function parseLabelSelector(
  raw: unknown,
  where: SourceRef,
  diagnostics: Diagnostic[],
): LabelSelector {
  if (raw === undefined || raw === null) return SELECT_ALL;
  if (typeof raw !== "object" || Array.isArray(raw)) {
    diagnostics.push({
      code: "SCHEMA",
      severity: "error",
      message: `${where.file}:${where.line}: a label selector must be a mapping with matchLabels and/or matchExpressions; it selects nothing`,
      source: where,
    });
    return { requirements: [], valid: false };
  }
  const o = raw as Record<string, unknown>;
  const requirements: LabelRequirement[] = [];
  let valid = true;
  const ml = o["matchLabels"];
  if (ml !== undefined && ml !== null) {
    if (typeof ml === "object" && !Array.isArray(ml)) {
      for (const [k, v] of Object.entries(ml as Record<string, unknown>)) {
        requirements.push({ key: k, operator: "In", values: [String(v)] });
      }
    } else {
      valid = false;
    }
  }
  const me = o["matchExpressions"];
  if (me !== undefined && me !== null) {
    if (!Array.isArray(me)) valid = false;
    else {
      for (const e of me) {
        const x = (typeof e === "object" && e !== null ? e : {}) as Record<string, unknown>;
        const op = String(x["operator"] ?? "");
        const key = typeof x["key"] === "string" ? x["key"] : undefined;
        const values = Array.isArray(x["values"]) ? x["values"].map(String) : [];
        const needsValues = op === "In" || op === "NotIn";
        if (!key || !OPERATORS.includes(op) || needsValues !== values.length > 0) {
          diagnostics.push({
            code: "SCHEMA",
            severity: "error",
            message: `${where.file}:${where.line}: matchExpression ${JSON.stringify(e)} is invalid: expected a key, an operator In|NotIn|Exists|DoesNotExist, and values exactly for In and NotIn; the selector selects nothing`,
            source: where,
          });
          valid = false;
          continue;
        }
        requirements.push({ key, operator: op as SelectorOperator, values });
      }
    }
  }
  if (!valid && !diagnostics.some((d) => d.source === where)) {
    diagnostics.push({
      code: "SCHEMA",
      severity: "error",
      message: `${where.file}:${where.line}: invalid label selector; it selects nothing`,
      source: where,
    });
  }
  return { requirements, valid };
}

/** Does the selector select an object with these labels? */
export function selectorMatches(
  selector: LabelSelector,
  labels: Readonly<Record<string, string>>,
): boolean {
  if (!selector.valid) return false;
  for (const r of selector.requirements) {
    const has = Object.hasOwn(labels, r.key);
    const value = labels[r.key];
    switch (r.operator) {
      case "In":
        if (!has || !r.values.includes(value as string)) return false;
        break;
      case "NotIn":
        if (has && r.values.includes(value as string)) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
    }
  }
  return true;
}

/** `app=web,tier in (a,b)` — for explanations. */
export function formatSelector(selector: LabelSelector): string {
  if (!selector.valid) return "<invalid>";
  if (selector.requirements.length === 0) return "{}";
  return selector.requirements
    .map((r) =>
      r.operator === "In" && r.values.length === 1
        ? `${r.key}=${r.values[0]}`
        : r.operator === "Exists"
          ? r.key
          : r.operator === "DoesNotExist"
            ? `!${r.key}`
            : `${r.key} ${r.operator === "In" ? "in" : "notin"} (${r.values.join(",")})`,
    )
    .join(",");
}
