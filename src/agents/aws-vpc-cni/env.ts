/**
 * @module agents/aws-vpc-cni/env — the aws-node container's environment read exactly as the AWS VPC
 * CNI reads it (amazon-vpc-cni-k8s v1.23.1, pkg/networkutils/network.go): `getBoolEnvVar` (Go's
 * strconv.ParseBool, the default on an unreadable value), `parseCIDRString` (comma list, each
 * item trimmed, net.ParseCIDR, invalid and IPv6 items skipped, printed as the network),
 * `typeOfSNAT` and `getConnmark`.
 */
import { formatCidr } from "../../net/cidr.ts";
import { goParseCidr } from "../ip-masq-agent/go-net.ts";

export const ENV_EXTERNAL_SNAT = "AWS_VPC_K8S_CNI_EXTERNALSNAT";
export const ENV_EXCLUDE_SNAT_CIDRS = "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS";
export const ENV_RANDOMIZE_SNAT = "AWS_VPC_K8S_CNI_RANDOMIZESNAT";
export const ENV_NODE_PORT_SUPPORT = "AWS_VPC_CNI_NODE_PORT_SUPPORT";
export const ENV_CONNMARK = "AWS_VPC_K8S_CNI_CONNMARK";
export const ENV_VETH_PREFIX = "AWS_VPC_K8S_CNI_VETHPREFIX";
export const DEFAULT_CONNMARK = 0x80;
export const DEFAULT_VETH_PREFIX = "eni";

/** `typeOfSNAT`: sequential (`none`), `--random` (`hashrandom`), `--random-fully` (`prng`). */
export type SnatType = "none" | "hashrandom" | "prng";

const GO_TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const GO_FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

/** A value the plugin refuses and replaces with its default, in the plugin's log words. */
export interface EnvNote {
  readonly name: string;
  readonly value: string;
  readonly message: string;
}

/** `getBoolEnvVar`: unset or empty is the default; a value ParseBool refuses is the default too. */
export function boolEnv(
  name: string,
  value: string | undefined,
  fallback: boolean,
): { value: boolean; note?: EnvNote } {
  if (value === undefined || value === "") return { value: fallback };
  if (GO_TRUE.has(value)) return { value: true };
  if (GO_FALSE.has(value)) return { value: false };
  return {
    value: fallback,
    note: { name, value, message: `Failed to parse ${name}; using default: ${fallback}` },
  };
}

/** `parseCIDRString`: the IPv4 networks in the list, in order; the items it skips with why. */
export function cidrListEnv(
  name: string,
  value: string | undefined,
): { cidrs: string[]; notes: EnvNote[] } {
  const cidrs: string[] = [];
  const notes: EnvNote[] = [];
  if (value === undefined || value === "") return { cidrs, notes };
  for (const item of value.split(",")) {
    const r = goParseCidr(item.trim());
    if (!("ok" in r)) {
      notes.push({ name, value: item, message: `${item} from ${name} is not a valid CIDR` });
    } else if (r.ok.agentFamily !== 4) {
      notes.push({ name, value: item, message: `${item} from ${name} is an IPV6 CIDR` });
    } else {
      cidrs.push(r.ok.cidr.family === 4 ? formatCidr(r.ok.cidr) : r.ok.networkText);
    }
  }
  return { cidrs, notes };
}

/** `typeOfSNAT`: empty is prng; an unknown value is logged and prng. */
export function snatTypeEnv(value: string | undefined): { value: SnatType; note?: EnvNote } {
  if (value === undefined || value === "" || value === "prng") return { value: "prng" };
  if (value === "none" || value === "hashrandom") return { value };
  return {
    value: "prng",
    note: {
      name: ENV_RANDOMIZE_SNAT,
      value,
      message: `Failed to parse ${ENV_RANDOMIZE_SNAT}; using default: prng. Provided string was "${value}"`,
    },
  };
}

/** Go's strconv.ParseInt(s, 0, 64) for the connmark: 0x.., 0o.., 0b.., leading 0 octal, `_`. */
function goParseInt0(s: string): bigint | undefined {
  const m = /^([+-]?)(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|0[0-7_]*|[1-9][0-9_]*)$/.exec(s);
  if (!m) return undefined;
  const body = m[2]!;
  if (body.includes("__") || body.endsWith("_")) return undefined;
  const clean = body.replace(/_/g, "");
  let v: bigint;
  if (/^0[oO]/.test(clean)) v = BigInt(`0o${clean.slice(2)}`);
  else if (/^0[0-7]+$/.test(clean)) v = BigInt(`0o${clean.slice(1)}`);
  else v = BigInt(clean);
  if (m[1] === "-") v = -v;
  return v >= -(2n ** 63n) && v < 2n ** 63n ? v : undefined;
}

/** `getConnmark`: a mark in 1..2³²-1, else the default 0x80. */
export function connmarkEnv(value: string | undefined): { value: number; note?: EnvNote } {
  if (value === undefined || value === "") return { value: DEFAULT_CONNMARK };
  const v = goParseInt0(value);
  if (v === undefined || v <= 0n || v > 0xffffffffn) {
    return {
      value: DEFAULT_CONNMARK,
      note: {
        name: ENV_CONNMARK,
        value,
        message: `${ENV_CONNMARK} ${v === undefined ? "cannot be parsed" : "is out of range"}; will use ${DEFAULT_CONNMARK}`,
      },
    };
  }
  return { value: Number(v) };
}
