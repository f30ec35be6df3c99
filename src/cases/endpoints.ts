/**
 * @module cases/endpoints — the `--dest IP[:PORT]` and `--from pod/NS/NAME|node/NAME` forms every
 * question accepts, parsed strictly with a message that says what was expected.
 */
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

export function parseFrom(text: string): FromEndpoint | { error: string } {
  const ip = tryParseIp(text);
  if (ip) return { kind: "address", ip };
  const parts = text.split("/");
  if (parts[0] === "pod" && parts.length === 3 && parts[1] && parts[2]) {
    return { kind: "pod", namespace: parts[1], name: parts[2] };
  }
  if (parts[0] === "node" && parts.length === 2 && parts[1])
    return { kind: "node", name: parts[1] };
  return {
    error: `--from ${JSON.stringify(text)}: expected pod/NAMESPACE/NAME, node/NAME or a pod's IP address`,
  };
}
