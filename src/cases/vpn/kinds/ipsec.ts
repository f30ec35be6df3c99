/**
 * @module cases/vpn/kinds/ipsec — IPsec (strongSwan, libreswan) as a tunnel kind. The traffic
 * selectors decide what is tunnelled: the CHILD SAs charon installed (statusall / list-sas), else
 * `leftsubnet` (ipsec.conf) or `local_ts` (swanctl.conf), else the kernel's xfrm out policies; a
 * destination outside them never enters the tunnel (`vpn/destination-not-tunnelled`). The pool is
 * `rightsourceip` (or swanctl's `pools`), else the far side's `rightsubnet` (site-to-site); no
 * CHILD SA installed is `vpn/tunnel-down`. Masquerade is fixed in the pod's leftupdown script.
 */

import type { IpsecConn } from "../../../agents/strongswan/ipsec-conf.ts";
import { isLoaded } from "../../../agents/strongswan/ipsec-conf.ts";
import {
  establishedIkeSas,
  installedChildSas,
  type SaStatus,
} from "../../../agents/strongswan/sa-status.ts";
import { tunnelPolicies } from "../../../agents/strongswan/xfrm.ts";
import type { Located, Missing, SourceRef } from "../../../model/types.ts";
import {
  type Cidr,
  contains,
  formatCidr,
  formatIp,
  type Ip,
  sameIp,
  tryParseCidr,
  tryParseIp,
} from "../../../net/cidr.ts";
import { rawWord, sh, whole } from "../../../report/shell-quote.ts";
import {
  IPSEC_FILES,
  type IpsecEvidence,
  ipsecFileRole,
  readIpsecEvidence,
} from "./ipsec-evidence.ts";
import type { KindContext, KindView, TunnelKind, Tunnelled, TunnelState } from "./kind.ts";

/** `kubectl exec` in the VPN pod (not imported from ../input.ts: that module imports the registry). */
const execIn = (ctx: { namespace: string; name: string }, argv: string) =>
  whole(sh`kubectl exec -n ${ctx.namespace} ${ctx.name} -- ${rawWord(argv)}`);

const isIpsecDevice = (name: string) => /^(ipsec\d|xfrm|vti|ip_vti)/.test(name);
const IMAGE_RE = /(strongswan|libreswan|ipsec-vpn-server|ipsec)/i;

/** The pod's own IPv4 address on eth0, with its ip-addr line. */
function ownAddress(ctx: KindContext): Located<Ip> | undefined {
  const eth = ctx.evidence?.ipAddr?.interfaces.find(
    (i) => i.name === "eth0" || i.name.startsWith("eth0@"),
  );
  const a = eth?.addresses?.find((x) => x.family === 4 && !x.secondary);
  return a ? { value: a.local, source: a.source } : undefined;
}

/** ipsec.conf names sides, not ends: the local one is `left` unless `right=` is the pod's own address. */
function localRemote(c: IpsecConn, own: Ip | undefined) {
  const r = c.right.host ? tryParseIp(c.right.host.value) : undefined;
  const l = c.left.host ? tryParseIp(c.left.host.value) : undefined;
  const swapped = own && r && sameIp(r, own) && !(l && sameIp(l, own));
  return swapped ? { local: c.right, remote: c.left } : { local: c.left, remote: c.right };
}

const loadedConns = (w: IpsecEvidence | undefined) => (w?.ipsecConf?.conns ?? []).filter(isLoaded);

/** Unique blocks, first source kept. */
function unique(list: Located<Cidr>[]): Located<Cidr>[] {
  const seen = new Set<string>();
  return list.filter((c) => {
    const k = formatCidr(c.value);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/**
 * What clients' packets may be addressed to and still enter the tunnel: the local traffic
 * selectors, from what charon negotiated first (it narrows the configured ones), then config.
 */
export function localSelectors(ctx: KindContext, w: IpsecEvidence | undefined): Located<Cidr>[] {
  const fromSas = (w?.status ?? []).flatMap((s) =>
    installedChildSas(s).flatMap((c) =>
      c.localTs.map((t) => ({ value: t.value.cidr, source: t.source })),
    ),
  );
  if (fromSas.length > 0) return unique(fromSas);
  const own = ownAddress(ctx)?.value;
  const fromConf = loadedConns(w).flatMap((c) =>
    localRemote(c, own).local.subnets.map((s) => ({ value: s.value.cidr, source: s.source })),
  );
  if (fromConf.length > 0) return unique(fromConf);
  const fromSwanctl = (w?.swanctlConf?.connections ?? []).flatMap((c) =>
    c.children.flatMap((ch) => ch.localTs.map((t) => ({ value: t.value.cidr, source: t.source }))),
  );
  if (fromSwanctl.length > 0) return unique(fromSwanctl);
  const fromXfrm = tunnelPolicies(w?.xfrmPolicies?.policies ?? [])
    .filter((p) => p.value.dir === "out")
    .map((p) => ({ value: p.value.src, source: p.source }));
  return unique(fromXfrm);
}

/** The client pool: rightsourceip / swanctl pools / statusall's pools; else the far side's subnets. */
function poolOf(ctx: KindContext, w: IpsecEvidence | undefined): Located<Cidr> | undefined {
  const own = ownAddress(ctx)?.value;
  for (const c of loadedConns(w)) {
    const s = localRemote(c, own).remote.sourceIp;
    if (s?.value.kind === "pool" && s.value.cidrs[0])
      return { value: s.value.cidrs[0], source: s.source };
  }
  const sw = w?.swanctlConf;
  for (const c of sw?.connections ?? []) {
    for (const p of c.pools) {
      const a = sw?.pools.find((x) => x.name === p.value)?.addrs;
      if (a?.value.kind === "pool" && a.value.cidrs[0])
        return { value: a.value.cidrs[0], source: a.source };
    }
  }
  for (const s of w?.status ?? []) {
    for (const p of s.pools) {
      const r = tryParseCidr(p.value);
      if ("cidr" in r) return { value: r.cidr, source: p.source };
    }
  }
  // site-to-site: the far side's own subnets are the sources that arrive through the tunnel
  for (const c of loadedConns(w)) {
    const sub = localRemote(c, own).remote.subnets[0];
    if (sub) return { value: sub.value.cidr, source: sub.source };
  }
  for (const c of sw?.connections ?? []) {
    const t = c.children.flatMap((ch) => ch.remoteTs)[0];
    if (t) return { value: t.value.cidr, source: t.source };
  }
  return undefined;
}

/** DNS servers handed to clients: `rightdns=` of a loaded conn (strongSwan's responder side). */
function pushedDnsOf(w: IpsecEvidence | undefined): Located<Ip>[] {
  const out: Located<Ip>[] = [];
  for (const c of loadedConns(w)) {
    const d = c.params.get("rightdns");
    if (!d) continue;
    for (const part of d.value.split(/\s*,\s*/)) {
      const ip = tryParseIp(part);
      if (ip) out.push({ value: ip, source: d.source });
    }
  }
  return out;
}

function tunnelledOf(selectors: Located<Cidr>[]): Tunnelled {
  const all = selectors.find((s) => s.value.prefix === 0);
  if (all) return { kind: "all", source: all.source };
  return selectors.length > 0 ? { kind: "prefixes", prefixes: selectors } : { kind: "unknown" };
}

/** The kind's words for `vpn/destination-not-tunnelled` (the case decides it, cases/vpn/not-tunnelled.ts). */
function notTunnelledWords(ctx: KindContext) {
  return (ip: Ip, list: string) => ({
    explanation:
      `The CHILD SA carries only ${list} on the pod's side (leftsubnet / local_ts, narrowed by charon to what both ends accept). ` +
      `${formatIp(ip)} is outside it: the client has no policy or route sending it into the tunnel, and a reply from it ` +
      "would not match the gateway's outbound policy either. Forwarding, masquerade and policies in the pod say nothing about it.",
    next: [
      `Widen the gateway's leftsubnet (ipsec.conf) or local_ts (swanctl.conf) to cover ${formatIp(ip)} (e.g. the cluster's pod and Service ranges), reload (ipsec reload / swanctl --load-conns) and reconnect the client`,
      `Check what was negotiated: ${execIn(ctx, "ipsec statusall")}`,
    ],
  });
}

/**
 * statusall / list-sas: is a CHILD SA installed? None: nothing is tunnelled at all (the case turns
 * "down" into `vpn/tunnel-down`, cases/vpn/tunnel-down.ts). No status output: unknown.
 */
function tunnelStateOf(w: IpsecEvidence | undefined): TunnelState {
  const status: SaStatus[] = [...(w?.status ?? [])];
  if (status.length === 0) return { kind: "unknown" };
  if (status.some((s) => installedChildSas(s).length > 0)) return { kind: "up" };
  // an excerpt without the SA list (statusall cut before "Security Associations") decides nothing
  if (!status.some((s) => s.sasListed)) return { kind: "unknown" };
  const ike = status.flatMap((s) => establishedIkeSas(s));
  const where: SourceRef = ike[0]?.source ?? { file: status[0]!.file, line: 1 };
  return {
    kind: "down",
    title:
      ike.length > 0
        ? `IKE SA ${ike[0]!.conn} is established but no CHILD SA is installed: nothing is tunnelled`
        : "charon shows no established IKE SA: no IPsec tunnel is up",
    explanation:
      ike.length > 0
        ? "The peers authenticated each other (IKE SA ESTABLISHED), but no CHILD SA is INSTALLED: the traffic selectors the client asked for " +
          "and the gateway's leftsubnet/local_ts have nothing in common (TS_UNACCEPTABLE), or the proposals differ. No packet enters the tunnel, " +
          "so nothing past it can be judged until a CHILD SA is up."
        : "Neither statusall nor list-sas shows an established IKE SA: authentication (PSK/certificates), the UDP path to ports 500/4500 " +
          "through the Service/LoadBalancer, or the client's config keep the tunnel from forming.",
    evidence: [where],
    next: [
      "On the gateway: ipsec statusall (or swanctl --list-sas) and charon's log for TS_UNACCEPTABLE or NO_PROPOSAL_CHOSEN",
      "Compare the client's rightsubnet with the gateway's leftsubnet (ipsec.conf) / local_ts (swanctl.conf)",
    ],
  };
}

function ipsecView(ctx: KindContext, w: IpsecEvidence | undefined): KindView {
  const selectors = localSelectors(ctx, w);
  const tunnelled = tunnelledOf(selectors);
  const pool = poolOf(ctx, w);
  // The gateway's own address inside its selectors answers clients without forwarding.
  const own = ownAddress(ctx);
  const peer =
    own && (selectors.length === 0 || selectors.some((s) => contains(s.value, own.value)))
      ? own
      : undefined;
  const device = ctx.evidence?.ipAddr?.interfaces.find((i) => isIpsecDevice(i.name))?.name;
  const dir = `pods/${ctx.namespace}/${ctx.name}`;
  const updown = loadedConns(w).find((c) => c.left.updown)?.left.updown;
  return {
    kind: "ipsec",
    displayName: "IPsec",
    ...(pool ? { pool } : {}),
    ...(peer ? { peer } : {}),
    // kernel-libipsec decapsulates into ipsec0; the kernel's xfrm hands packets in on eth0
    tunnelDevice: device?.split("@")[0] ?? "eth0",
    tunnelled,
    tunnelledBy: "the IPsec traffic selectors",
    notTunnelledWords: notTunnelledWords(ctx),
    tunnelState: tunnelStateOf(w),
    pushedRoutes: tunnelled.kind === "prefixes" ? tunnelled.prefixes : [],
    pushedDns: pushedDnsOf(w),
    configMissing: {
      file: `${dir}/${IPSEC_FILES.ipsecConf}`,
      would_decide:
        "the client pool (rightsourceip) or the far side's subnets, and the traffic selectors",
      command: whole(
        `${execIn(ctx, "cat /etc/ipsec.conf")} > ${sh`${`${dir}/${IPSEC_FILES.ipsecConf}`}`}`,
      ),
    },
    readConfig: "cat /etc/ipsec.conf",
    poolUnknownWhy:
      "no ipsec.conf rightsourceip/rightsubnet, swanctl.conf pools or statusall pools",
    extraSetters: [],
    notDurableExtra: "",
    chartSwitch: {
      whyNot:
        "no strongSwan or libreswan chart with a forwarding switch is known to podpath: use pod-sysctls or init-container",
    },
    scriptMasquerade: () => undefined,
    masqueradeFix: (p) => {
      const net = formatCidr(p);
      const rule = `-A POSTROUTING -s ${net} -o eth0 -j MASQUERADE`;
      const cmd = `iptables -t nat -C POSTROUTING -s ${net} -o eth0 -j MASQUERADE 2>/dev/null || iptables -t nat -A POSTROUTING -s ${net} -o eth0 -j MASQUERADE`;
      return {
        rule,
        command: `${cmd}   # in the gateway's leftupdown script${updown ? ` (${updown.value})` : ""} for PLUTO_VERB=up-client, or the container's start script`,
        next: `Masquerade the pool in the VPN pod from its leftupdown script (or start script): ${cmd}`,
      };
    },
    onlyServicesRouted: tunnelled.kind === "prefixes",
    findings: () => [],
    missing: (): Missing[] =>
      (w?.status.length ?? 0) > 0
        ? []
        : [
            {
              file: `${dir}/${IPSEC_FILES.statusall}`,
              would_decide:
                "whether an IKE SA and a CHILD SA are up, and which traffic selectors charon negotiated",
              command: whole(
                `${execIn(ctx, "ipsec statusall")} > ${sh`${`${dir}/${IPSEC_FILES.statusall}`}`}   # or: swanctl --list-sas > ${sh`${`${dir}/${IPSEC_FILES.listSas}`}`}`,
              ),
            },
          ],
  };
}

/** IPsec: strongSwan / libreswan configs, charon's SA status and the kernel's xfrm tables. */
export const ipsecKind: TunnelKind = {
  id: "ipsec",
  displayName: "IPsec",
  ownsFile: (base, text) => ipsecFileRole(base, text) !== undefined,
  readPod: (src) => {
    const r = readIpsecEvidence(src);
    if (!r) return undefined;
    const e = r.evidence;
    const shownBy = e.ipsecConf?.conns[0]?.source ??
      e.swanctlConf?.connections[0]?.source ??
      e.status[0]?.ikeSas[0]?.source ?? {
        file: src.files[0]?.file ?? `pods/${src.namespace}/${src.name}`,
        line: 1,
      };
    return { kind: "ipsec", shownBy, diagnostics: r.diagnostics, view: (ctx) => ipsecView(ctx, e) };
  },
  detect: ({ evidence, manifests }) => {
    const reading = evidence?.readings?.find((r) => r.kind === "ipsec");
    if (reading) return { kind: "ipsec", strength: "config", source: reading.shownBy };
    const dev = evidence?.ipAddr?.interfaces.find((i) => isIpsecDevice(i.name));
    if (dev) return { kind: "ipsec", strength: "device", source: dev.source };
    for (const m of manifests) {
      const image = JSON.stringify(m.raw["spec"] ?? {}).match(/"image":"([^"]+)"/g) ?? [];
      if (image.some((i) => IMAGE_RE.test(i) && !/openvpn|wireguard/i.test(i)))
        return { kind: "ipsec", strength: "manifest", source: m.source };
    }
    return undefined;
  },
  view: (ctx) => ipsecView(ctx, undefined),
};
