/**
 * @module snapshot/layout — what each path in a snapshot means (DESIGN.md "Snapshot layout"). Pure:
 * a relative path in, its role out. The layout is a public contract.
 */

export type Artifact =
  | "iptables-save"
  | "ip6tables-save"
  | "sysctl"
  | "ip-route"
  | "ip-addr"
  | "conntrack"
  /** `ip rule` (the routing policy database; with `ip route show table all` in ip-route). */
  | "ip-rule"
  /** `ip -6 route show table all` and `ip -6 rule`: the IPv6 routes and policy rules. */
  | "ip6-route"
  | "ip6-rule"
  /** Owner evidence, kept as text for the owner's reader (cases/masquerade/owners). */
  | OwnerArtifact;

/**
 * Files that only one owner of the pods' source address reads: `ipset save`/`ipset list` (Calico's
 * pools), `cilium-dbg bpf ipmasq list` and `cilium-dbg status --verbose` (Cilium's eBPF
 * masquerade), `nft list ruleset` (the AWS VPC CNI's and kube-proxy's nftables tables), the
 * kubelet's command line (kubenet's `--non-masquerade-cidr`), and CNI config files
 * (`nodes/<node>/cni/*.conf|*.conflist`: the bridge plugin's `ipMasq`).
 */
export type OwnerArtifact =
  | "ipset"
  | "cilium-bpf-ipmasq"
  | "cilium-status"
  | "nft-ruleset"
  | "kubelet-flags"
  | "cni-config";

export const OWNER_ARTIFACTS: readonly OwnerArtifact[] = [
  "ipset",
  "cilium-bpf-ipmasq",
  "cilium-status",
  "nft-ruleset",
  "kubelet-flags",
  "cni-config",
];

export type FileRole =
  | { readonly kind: "cluster"; readonly format: "yaml" | "json" }
  | { readonly kind: "node"; readonly node: string; readonly artifact: Artifact }
  | {
      readonly kind: "pod";
      readonly namespace: string;
      readonly pod: string;
      readonly artifact: Artifact;
    }
  | { readonly kind: "capture"; readonly name: string; readonly format: "pcap" | "pcapng" | "text" }
  | { readonly kind: "capture-meta"; readonly name: string }
  | { readonly kind: "remote" }
  | { readonly kind: "probe"; readonly format: "text" | "json" }
  | { readonly kind: "kubelet-config"; readonly node?: string }
  | { readonly kind: "vpn-config"; readonly namespace?: string; readonly pod?: string }
  /** `helm get values` of a release (`*values*.yaml` outside `cluster/`), read by the VPN checks. */
  | { readonly kind: "chart-values"; readonly namespace?: string; readonly pod?: string }
  | { readonly kind: "ignored"; readonly reason: string }
  | { readonly kind: "unknown" };

const ARTIFACTS: readonly Artifact[] = [
  "iptables-save",
  "ip6tables-save",
  "sysctl",
  "ip-route",
  "ip-addr",
  "conntrack",
  "ip-rule",
  "ip6-route",
  "ip6-rule",
  ...OWNER_ARTIFACTS.filter((a) => a !== "cni-config"),
];

function artifactOf(base: string): Artifact | undefined {
  const stem = base.replace(/\.(txt|log|out)$/, "");
  return ARTIFACTS.find((a) => a === stem);
}

/** The role of one file, from its path relative to the snapshot root (forward slashes). */
export function classifyPath(rel: string): FileRole {
  const role = placeOf(rel);
  if (role.kind === "unknown" && /values.*\.ya?ml$/.test(rel.split("/").at(-1) ?? "")) {
    // beside a pod (pods/<ns>/<pod>/helm-values.yaml): the values of that pod's release
    const parts = rel.split("/").filter((p) => p !== "" && p !== ".");
    return parts[0] === "pods" && parts.length === 4
      ? { kind: "chart-values", namespace: parts[1]!, pod: parts[2]! }
      : { kind: "chart-values" };
  }
  return role;
}

function placeOf(rel: string): FileRole {
  const parts = rel.split("/").filter((p) => p !== "" && p !== ".");
  const base = parts.at(-1) ?? "";
  if (base.startsWith(".") || base === "README.md" || base === "README") {
    return { kind: "ignored", reason: "notes" };
  }
  const [top] = parts;
  if (top === "cluster" && parts.length >= 2) {
    if (/\.(ya?ml)$/.test(base)) return { kind: "cluster", format: "yaml" };
    if (/\.json$/.test(base)) return { kind: "cluster", format: "json" };
    return { kind: "unknown" };
  }
  if (top === "nodes" && parts.length === 3) {
    const artifact = artifactOf(base);
    if (artifact) return { kind: "node", node: parts[1]!, artifact };
    if (/^kubelet(-config)?\.(ya?ml|json)$/.test(base))
      return { kind: "kubelet-config", node: parts[1]! };
    return { kind: "unknown" };
  }
  if (top === "nodes" && parts.length === 4 && parts[2] === "cni") {
    if (/\.(conf|conflist|json)$/.test(base))
      return { kind: "node", node: parts[1]!, artifact: "cni-config" };
    return { kind: "unknown" };
  }
  if (top === "pods" && parts.length === 4) {
    const artifact = artifactOf(base);
    if (artifact) return { kind: "pod", namespace: parts[1]!, pod: parts[2]!, artifact };
    // VPN files: OpenVPN, WireGuard and IPsec configs, `wg show` / `wg showconf` output,
    // `ipsec statusall`, `swanctl --list-sas`, `ip xfrm policy|state` output
    if (
      /\.(conf|ovpn)$/.test(base) ||
      /^wg-show(conf)?(\.txt)?$/.test(base) ||
      /^(ipsec-statusall|swanctl-list-sas|xfrm-policy|xfrm-state)(\.txt)?$/.test(base)
    ) {
      return { kind: "vpn-config", namespace: parts[1]!, pod: parts[2]! };
    }
    return { kind: "unknown" };
  }
  // OpenVPN's client-config-dir copied beside the pod: one file per client, named by its CN
  if (top === "pods" && parts.length === 5 && parts[3] === "ccd" && !base.startsWith(".")) {
    return { kind: "vpn-config", namespace: parts[1]!, pod: parts[2]! };
  }
  if (top === "captures" && parts.length === 2) {
    const m = /^(.*)\.(pcap|pcapng|cap|txt|ya?ml)$/.exec(base);
    if (!m) return { kind: "unknown" };
    const name = m[1]!;
    const ext = m[2]!;
    if (ext === "yaml" || ext === "yml") return { kind: "capture-meta", name };
    if (ext === "txt") return { kind: "capture", name, format: "text" };
    return { kind: "capture", name, format: ext === "pcapng" ? "pcapng" : "pcap" };
  }
  if (top === "remote" && parts.length === 2 && /\.ya?ml$/.test(base)) return { kind: "remote" };
  if (top === "probes" && parts.length === 2) {
    if (/\.txt$/.test(base)) return { kind: "probe", format: "text" };
    if (/\.json$/.test(base)) return { kind: "probe", format: "json" };
  }
  if (top === "kubelet" && /\.(ya?ml|json)$/.test(base)) return { kind: "kubelet-config" };
  return { kind: "unknown" };
}

/** What a snapshot should contain, for the message when a folder is not one. */
export const LAYOUT_HELP = `A snapshot is a folder (or .tar.gz of one) with any of:
  cluster/*.yaml|*.json              Kubernetes objects as kubectl prints them
  nodes/<node>/iptables-save.txt     also ip6tables-save, sysctl, ip-route, ip-addr, conntrack,
                                     ip-rule, ip6-route (ip -6 route show table all), ip6-rule,
                                     ipset, nft-ruleset, cilium-bpf-ipmasq, cilium-status,
                                     kubelet-flags; nodes/<node>/cni/*.conflist
  pods/<ns>/<pod>/sysctl.txt         also iptables-save, ip-route, ip-addr, openvpn.conf, wg0.conf,
                                     wg-show.txt (wg show), ipsec.conf, swanctl.conf,
                                     ipsec-statusall.txt, swanctl-list-sas.txt, xfrm-policy.txt,
                                     xfrm-state.txt, helm-values.yaml (helm get values
                                     of the VPN release); ccd/<client-cn> (OpenVPN
                                     client-config-dir files)
  captures/<name>.pcap|.pcapng|.txt  tcpdump -w output or tcpdump text (any flags) (+ <name>.yaml: point, phase)
  remote/*.yaml                      the far side: routes back, VPN selectors, allowlists
  probes/*.txt|*.json                client-side ping/dig/curl transcripts
'podpath collect --out DIR' writes one from a live cluster.`;
