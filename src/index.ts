/**
 * @module podpath — the public API. Explicit named exports only: anything not exported here is
 * internal and may change.
 */

export type {
  Diagnostic,
  Evidence,
  Finding,
  FindingId,
  Missing,
  Parsed,
  Severity,
  SourceRef,
} from "./model/types.ts";
export {
  type Cidr,
  CidrError,
  contains,
  excludeCidrs,
  type Family,
  formatCidr,
  formatIp,
  type Ip,
  mergeCidrs,
  overlaps,
  parseCidr,
  parseIp,
  tryParseCidr,
  tryParseIp,
} from "./net/cidr.ts";
