/**
 * @module agents/bridge-cni/conflist — a node's CNI config files (`nodes/<node>/cni/*.conf|
 * *.conflist|*.json`, copies of /etc/cni/net.d) read as libcni and the bridge plugin read them
 * (containernetworking/cni libcni/conf.go: `.conflist` is `{name, plugins: […]}`, `.conf`/`.json`
 * one plugin; the runtime uses the first file in lexical order; containernetworking/plugins v1.9.1
 * plugins/main/bridge/bridge.go NetConf: `ipMasq` (default false), `ipMasqBackend`, `isGateway`,
 * `bridge` (default "cni0"), the host-local `ipam.subnet` or `ipam.ranges`). Go's encoding/json
 * fills the struct: keys match case-insensitively, a repeated key's last value wins, a value of the
 * wrong type is an error for the whole file. Every value keeps its line for citing.
 */
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";
import { type GoValue, parseGoJson } from "../ip-masq-agent/go-json.ts";

/** One bridge plugin of a CNI config file, as the plugin reads it. */
export interface BridgeConf {
  readonly file: string;
  /** The network's name (the conflist's `name`): half of the chain name's hash. */
  readonly network: string;
  readonly ipMasq: boolean;
  /** Where `ipMasq` is written; undefined when absent (false). */
  readonly ipMasqSource?: SourceRef;
  readonly ipMasqBackend?: string;
  readonly bridge: string;
  readonly isGateway: boolean;
  /** The IPAM subnets (host-local `subnet` or every `ranges` entry), with their lines. */
  readonly subnets: readonly {
    readonly cidr: Cidr;
    readonly text: string;
    readonly source: SourceRef;
  }[];
  readonly ipamType?: string;
  /** Where the plugin's object starts (its `"type": "bridge"`). */
  readonly source: SourceRef;
}

export interface CniConfigFile {
  readonly file: string;
  readonly network?: string;
  /** The plugin types in order (one for a `.conf`). */
  readonly types: readonly string[];
  readonly bridges: readonly BridgeConf[];
}

type Obj = Extract<GoValue, { kind: "object" }>;

/** Go's field matching: the last key equal to `name` ignoring case. */
function field(o: Obj, name: string): GoValue | undefined {
  let v: GoValue | undefined;
  for (const e of o.entries) if (e.key.toLowerCase() === name.toLowerCase()) v = e.value;
  return v;
}

/** The line of a byte offset (the JSON reader counts bytes). */
function lineAt(bytes: Uint8Array, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset && i < bytes.length; i++) if (bytes[i] === 10) line++;
  return line;
}

/** Reads one CNI config file; never throws. */
export function readCniConfig(text: string, file: string): Parsed<CniConfigFile> {
  const diagnostics: Diagnostic[] = [];
  const lines = text.split("\n");
  const bytes = new TextEncoder().encode(text);
  const ref = (offset: number): SourceRef => {
    const line = Math.min(lineAt(bytes, offset), lines.length);
    return { file, line, text: (lines[line - 1] ?? "").trim() };
  };
  const empty: CniConfigFile = { file, types: [], bridges: [] };
  const parsed = parseGoJson(bytes);
  if ("error" in parsed) {
    const line = lineAt(bytes, parsed.error.offset);
    diagnostics.push({
      code: "CNI_CONFIG_SYNTAX",
      severity: "warning",
      message: `${file} is not JSON the runtime can read (${parsed.error.message}); libcni skips it and takes the next file`,
      source: { file, line: Math.min(line, lines.length) },
    });
    return { value: empty, diagnostics };
  }
  const root = parsed.value;
  if (root.kind !== "object") {
    diagnostics.push({
      code: "CNI_CONFIG_NOT_OBJECT",
      severity: "warning",
      message: `${file}: expected a JSON object (a network config or a conflist)`,
      source: ref(root.offset),
    });
    return { value: empty, diagnostics };
  }
  const nameV = field(root, "name");
  const network = nameV?.kind === "string" ? nameV.value : undefined;
  const pluginsV = field(root, "plugins");
  const plugins: Obj[] =
    pluginsV?.kind === "array"
      ? pluginsV.items.filter((p): p is Obj => p.kind === "object")
      : pluginsV === undefined
        ? [root]
        : [];
  if (pluginsV !== undefined && pluginsV.kind !== "array") {
    diagnostics.push({
      code: "CNI_CONFIG_PLUGINS",
      severity: "warning",
      message: `${file}: "plugins" must be a list of plugin configs`,
      source: ref(pluginsV.offset),
    });
  }
  const types: string[] = [];
  const bridges: BridgeConf[] = [];
  for (const p of plugins) {
    const t = field(p, "type");
    const type = t?.kind === "string" ? t.value : "";
    types.push(type);
    if (type !== "bridge") continue;
    const b = readBridge(p, network, file, ref, diagnostics);
    if (b) bridges.push(b);
  }
  return {
    value: { file, ...(network !== undefined ? { network } : {}), types, bridges },
    diagnostics,
  };
}

function readBridge(
  p: Obj,
  network: string | undefined,
  file: string,
  ref: (offset: number) => SourceRef,
  diagnostics: Diagnostic[],
): BridgeConf | undefined {
  const wrongType = (key: string, v: GoValue, want: string) => {
    diagnostics.push({
      code: "CNI_BRIDGE_FIELD_TYPE",
      severity: "warning",
      message: `${file}: the bridge plugin's "${key}" must be ${want}; the plugin refuses the config (json: cannot unmarshal) and no pod on this network starts`,
      source: ref(v.offset),
    });
  };
  const ipMasqV = field(p, "ipMasq");
  if (ipMasqV && ipMasqV.kind !== "bool" && ipMasqV.kind !== "null") {
    wrongType("ipMasq", ipMasqV, "true or false");
    return undefined;
  }
  const str = (key: string): string | undefined => {
    const v = field(p, key);
    return v?.kind === "string" ? v.value : undefined;
  };
  const gw = field(p, "isGateway");
  const subnets: BridgeConf["subnets"][number][] = [];
  const ipam = field(p, "ipam");
  let ipamType: string | undefined;
  const addSubnet = (v: GoValue | undefined) => {
    if (v?.kind !== "string") return;
    const c = tryParseCidr(v.value, { allowBareAddress: false });
    if ("cidr" in c) subnets.push({ cidr: c.cidr, text: v.value, source: ref(v.offset) });
    else {
      diagnostics.push({
        code: "CNI_IPAM_SUBNET",
        severity: "warning",
        message: `${file}: ipam subnet "${v.value}" is not a CIDR (${c.error}); host-local refuses it`,
        source: ref(v.offset),
      });
    }
  };
  if (ipam?.kind === "object") {
    const it = field(ipam, "type");
    if (it?.kind === "string") ipamType = it.value;
    addSubnet(field(ipam, "subnet"));
    const ranges = field(ipam, "ranges");
    if (ranges?.kind === "array") {
      for (const set of ranges.items) {
        if (set.kind !== "array") continue;
        for (const r of set.items) if (r.kind === "object") addSubnet(field(r, "subnet"));
      }
    }
  }
  const typeV = field(p, "type");
  const backend = str("ipMasqBackend");
  return {
    file,
    network: network ?? str("name") ?? "",
    ipMasq: ipMasqV?.kind === "bool" ? ipMasqV.value : false,
    ...(ipMasqV ? { ipMasqSource: ref(ipMasqV.offset) } : {}),
    ...(backend !== undefined ? { ipMasqBackend: backend } : {}),
    bridge: str("bridge") ?? "cni0",
    isGateway: gw?.kind === "bool" ? gw.value : false,
    subnets,
    ...(ipamType !== undefined ? { ipamType } : {}),
    source: ref(typeV?.offset ?? p.offset),
  };
}

/** The file the runtime uses: libcni's ConfFiles sorted, the first that reads. */
export function activeConfig(files: readonly CniConfigFile[]): CniConfigFile | undefined {
  return [...files]
    .filter((f) => f.types.length > 0)
    .sort((a, b) => (basename(a.file) < basename(b.file) ? -1 : 1))[0];
}

const basename = (p: string) => p.slice(p.lastIndexOf("/") + 1);
