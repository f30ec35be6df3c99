/**
 * @module cases/endpoints — the `--dest IP[:PORT]` and `--from pod/NS/NAME|node/NAME` forms every
 * question accepts, parsed strictly with a message that says what was expected; and whether the
 * pod, node or namespace `--from` names is in the snapshot, with the closest names when it is not.
 */
import type { KubeObject } from "../evidence/kube-objects.ts";
import { type Ip, tryParseIp } from "../net/cidr.ts";

export interface Destination {
  readonly ip: Ip;
  readonly port?: number;
  /** As the user wrote it. */
  readonly text: string;
}

export type FromEndpoint =
  | { readonly kind: "pod"; readonly namespace: string; readonly name: string }
  | { readonly kind: "node"; readonly name: string }
  /** A pod address, when the snapshot has no Pod objects: traced through every node's rules. */
  | { readonly kind: "address"; readonly ip: Ip };

/** `10.20.30.40`, `10.20.30.40:5432`, `[fd00::1]:443`, `fd00::1`. */
export function parseDestination(text: string): Destination | { error: string } {
  const t = text.trim();
  let host = t;
  let portText: string | undefined;
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(t);
  if (bracket) {
    host = bracket[1]!;
    portText = bracket[2];
  } else if ((t.match(/:/g) ?? []).length === 1) {
    [host, portText] = t.split(":") as [string, string];
  }
  const ip = tryParseIp(host);
  if (!ip)
    return {
      error: `--dest ${JSON.stringify(text)}: expected an IP address, optionally with :PORT (10.20.30.40:5432, [fd00::1]:443)`,
    };
  if (portText === undefined) return { ip, text: t };
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port < 1 || port > 65535) {
    return {
      error: `--dest ${JSON.stringify(text)}: port ${JSON.stringify(portText)} is not 1-65535`,
    };
  }
  return { ip, port, text: t };
}

/**
 * `pod/NAMESPACE/NAME`, `node/NAME`, a pod's address, or kubectl's `pod/NAME` with `-n NAMESPACE`
 * (`namespace`; without it, `pod/NAME` is in `default`, as kubectl reads it with no namespace set).
 */
export function parseFrom(text: string, namespace?: string): FromEndpoint | { error: string } {
  const ip = tryParseIp(text);
  if (ip) return { kind: "address", ip };
  const parts = text.split("/");
  if (parts[0] === "pod" && parts.length === 3 && parts[1] && parts[2]) {
    if (namespace !== undefined && namespace !== parts[1]) {
      return {
        error: `--from ${JSON.stringify(text)} names namespace ${JSON.stringify(parts[1])} but -n says ${JSON.stringify(namespace)}: give one of them`,
      };
    }
    return { kind: "pod", namespace: parts[1], name: parts[2] };
  }
  if (parts[0] === "pod" && parts.length === 2 && parts[1]) {
    return { kind: "pod", namespace: namespace ?? "default", name: parts[1] };
  }
  if (parts[0] === "node" && parts.length === 2 && parts[1])
    return { kind: "node", name: parts[1] };
  return {
    error: `--from ${JSON.stringify(text)}: expected pod/NAMESPACE/NAME, pod/NAME -n NAMESPACE, node/NAME or a pod's IP address`,
  };
}

/** `--from` names a pod, node or namespace the snapshot does not hold: a usage error (exit 2). */
export class UnknownEndpointError extends Error {
  override readonly name = "UnknownEndpointError";
  readonly code = "ERR_UNKNOWN_ENDPOINT";
  /** The closest names the snapshot holds, most alike first. */
  readonly suggestions: readonly string[];
  constructor(message: string, suggestions: readonly string[]) {
    super(message);
    this.suggestions = suggestions;
  }
}

/** The names a snapshot holds: its objects, and the `nodes/NAME/` and `pods/NS/NAME/` folders. */
export interface KnownNames {
  readonly objects: readonly KubeObject[];
  /** Node folders (`nodes/NAME/`). */
  readonly nodes?: Iterable<string>;
  /** Pod folders, as `NAMESPACE/NAME`. */
  readonly pods?: Iterable<string>;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost);
    }
    prev = cur;
  }
  return prev[b.length]!;
}

/**
 * Up to `max` of `candidates` that look like `wanted`: one containing the other, or a few edits
 * apart (a third of the longer name); most alike first. None when nothing is close.
 */
export function closestNames(wanted: string, candidates: Iterable<string>, max = 3): string[] {
  const w = wanted.toLowerCase();
  const scored: { name: string; score: number }[] = [];
  for (const name of new Set(candidates)) {
    const c = name.toLowerCase();
    const d = editDistance(w, c);
    const contains = w.length >= 3 && (c.includes(w) || w.includes(c));
    if (!contains && d > Math.max(2, Math.floor(Math.max(w.length, c.length) / 3))) continue;
    scored.push({ name, score: contains ? Math.abs(c.length - w.length) / 100 : d });
  }
  scored.sort((a, b) => a.score - b.score || a.name.localeCompare(b.name));
  return scored.slice(0, max).map((s) => s.name);
}

function didYouMean(list: readonly string[]): string {
  return list.length === 0 ? "" : `; did you mean ${list.join(", ")}?`;
}

/**
 * Whether the pod or node `from` names is in the snapshot. Returns the error (with the closest
 * names) when it is not; undefined when it is, when `from` is an address, or when the snapshot
 * holds no list of that kind at all (then nothing says the name is wrong: the cases report what
 * is missing).
 */
export function checkFromEndpoint(
  from: FromEndpoint,
  known: KnownNames,
): UnknownEndpointError | undefined {
  if (from.kind === "address") return undefined;
  if (from.kind === "node") {
    const nodes = new Set(known.nodes ?? []);
    for (const o of known.objects) if (o.kind === "Node") nodes.add(o.name);
    if (nodes.size === 0 || nodes.has(from.name)) return undefined;
    const near = closestNames(from.name, nodes);
    return new UnknownEndpointError(
      `--from node/${from.name}: no such node in the snapshot${didYouMean(near.map((n) => `node/${n}`))}`,
      near.map((n) => `node/${n}`),
    );
  }
  const pods = new Set(known.pods ?? []);
  const namespaces = new Set<string>();
  for (const o of known.objects) {
    if (o.kind === "Pod" && o.namespace !== undefined) pods.add(`${o.namespace}/${o.name}`);
    if (o.kind === "Namespace") namespaces.add(o.name);
  }
  for (const p of pods) namespaces.add(p.slice(0, p.indexOf("/")));
  const key = `${from.namespace}/${from.name}`;
  if (pods.size === 0 || pods.has(key)) return undefined;
  const inNamespace = [...pods].filter((p) => p.startsWith(`${from.namespace}/`));
  // the same namespace first; then the name anywhere (a pod typed with the wrong -n)
  const near = closestNames(
    from.name,
    inNamespace.map((p) => p.slice(p.indexOf("/") + 1)),
  ).map((n) => `${from.namespace}/${n}`);
  if (near.length < 3) {
    const elsewhere = [...pods].filter((p) => !p.startsWith(`${from.namespace}/`));
    const byName = new Map(elsewhere.map((p) => [p, p.slice(p.indexOf("/") + 1)] as const));
    const names = closestNames(from.name, byName.values(), 3 - near.length);
    for (const [p, n] of byName) if (names.includes(n) && near.length < 3) near.push(p);
  }
  const what = namespaces.has(from.namespace)
    ? `no such pod in namespace ${from.namespace}`
    : `no namespace ${from.namespace} in the snapshot (namespaces: ${[...namespaces].sort().join(", ")})`;
  const suggestions = near.map((p) => `pod/${p}`);
  return new UnknownEndpointError(
    `--from pod/${key}: ${what}${didYouMean(suggestions)}`,
    suggestions,
  );
}
