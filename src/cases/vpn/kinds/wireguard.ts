/**
 * @module cases/vpn/kinds/wireguard — WireGuard as a tunnel kind (wg-quick, wireguard-go, wg-easy,
 * linuxserver/wireguard, wg-access-server): the pool from `Address` (then wg-access-server's
 * `vpn.cidr`, the image's env, the device's address); masquerade in its PostUp hooks (or
 * wg-access-server's `vpn.nat44`); the AllowedIPs clients are given decide which destinations
 * enter the tunnel (`vpn/destination-not-tunnelled`); `wg show` says whether any peer completed
 * a handshake (`vpn/tunnel-down`). Forwarding is made durable in the pod's own terms: no chart
 * switch is known for these images.
 */

import { hookMasquerade, hookRules } from "../../../agents/wireguard/hooks.ts";
import type { Located, Missing } from "../../../model/types.ts";
import { type Cidr, formatIp, type Ip } from "../../../net/cidr.ts";
import { sh, whole } from "../../../report/shell-quote.ts";
import { execIn } from "../input.ts";
import type { KindContext, KindView, TunnelKind, Tunnelled, TunnelState } from "./kind.ts";
import { deviceAddress, devicePool } from "./openvpn.ts";
import {
  imageSettingsOf,
  isWireguardFile,
  readWgEvidence,
  type WgEvidence,
} from "./wireguard-evidence.ts";

const isWgDevice = (name: string) => /^wg/.test(name);

/** The interface: `wg show`'s, else a wg* device in ip-addr, else the config's file name, else wg0. */
function deviceOf(ctx: KindContext, w: WgEvidence | undefined): string {
  const shown = w?.show?.interfaces[0]?.name;
  if (shown) return shown;
  const dev = ctx.evidence?.ipAddr?.interfaces.find((i) => isWgDevice(i.name))?.name;
  if (dev) return dev.split("@")[0]!;
  const base = w?.config?.file.split("/").at(-1) ?? "";
  const m = /^(wg[\w-]*)\.conf$/.exec(base);
  return m?.[1] ?? "wg0";
}

function poolOf(ctx: KindContext, w: WgEvidence | undefined): Located<Cidr> | undefined {
  const addr = w?.config?.addresses.find((a) => a.value.network.family === 4);
  if (addr && addr.value.network.prefix < 32)
    return { value: addr.value.network, source: addr.source };
  if (w?.values?.pool) return w.values.pool;
  const image = imageSettingsOf(ctx.workload);
  if (image?.pool && !image.poolIsDefault) return image.pool;
  return devicePool(ctx.evidence, isWgDevice) ?? image?.pool;
}

function peerOf(
  ctx: KindContext,
  w: WgEvidence | undefined,
  pool: Located<Cidr> | undefined,
): Located<Ip> | undefined {
  const addr = w?.config?.addresses.find((a) => a.value.ip.family === 4);
  if (addr) return { value: addr.value.ip, source: addr.source };
  const d = deviceAddress(ctx.evidence, isWgDevice);
  if (d) return { value: d.local, source: d.source };
  if (pool && pool.value.family === 4)
    return { value: { family: 4, value: pool.value.start + 1n }, source: pool.source };
  return undefined;
}

/**
 * What clients route into the tunnel: their AllowedIPs as the server hands them out
 * (wg-access-server `vpn.allowedIPs`, the image's `WG_ALLOWED_IPS` / `ALLOWEDIPS`).
 */
function tunnelledOf(ctx: KindContext, w: WgEvidence | undefined): Tunnelled {
  const fromValues = w?.values?.allowedIps ?? [];
  const image = imageSettingsOf(ctx.workload);
  const prefixes = fromValues.length > 0 ? fromValues : (image?.allowedIps ?? []);
  const v4 = prefixes.filter((p) => p.value.family === 4);
  const all = v4.find((p) => p.value.prefix === 0);
  if (all) return { kind: "all", source: all.source };
  return v4.length > 0 ? { kind: "prefixes", prefixes: v4 } : { kind: "unknown" };
}

/** `wg show`: is any peer's handshake shown? None ever completed: the tunnel is not up. */
function tunnelStateOf(w: WgEvidence | undefined): TunnelState {
  const iface = w?.show?.interfaces[0];
  if (!iface) return { kind: "unknown" };
  if (iface.peers.some((p) => p.handshakeAgoSeconds !== undefined)) return { kind: "up" };
  // no peer listed: a pasted excerpt may have cut them off, so that alone decides nothing
  if (iface.peers.length === 0) return { kind: "unknown" };
  return {
    kind: "down",
    title: `No peer of ${iface.name} has completed a handshake: the tunnel is not up`,
    explanation:
      `wg show prints no "latest handshake" for any of the ${iface.peers.length} peer(s) of ${iface.name}: ` +
      `keys, the endpoint (the UDP port ${iface.listeningPort?.value ?? "ListenPort"} through the Service or LoadBalancer) or the client's config ` +
      "keep the tunnel from forming. Nothing past the tunnel can be judged until it is up.",
    evidence: [iface.source, ...iface.peers.map((p) => p.source)],
    next: [
      "On the client: wg show (its peer must show a latest handshake)",
      "Check the server's public key in the client config and the UDP path to the ListenPort",
    ],
  };
}

function wgView(ctx: KindContext, w: WgEvidence | undefined): KindView {
  const device = deviceOf(ctx, w);
  const pool = poolOf(ctx, w);
  const peer = peerOf(ctx, w, pool);
  const tunnelled = tunnelledOf(ctx, w);
  const rules = w?.config ? hookRules(w.config.hooks, device) : [];
  const confFile = `pods/${ctx.namespace}/${ctx.name}/wg0.conf`;
  const showFile = `pods/${ctx.namespace}/${ctx.name}/wg-show.txt`;
  return {
    kind: "wireguard",
    displayName: "WireGuard",
    ...(pool ? { pool } : {}),
    ...(peer ? { peer } : {}),
    tunnelDevice: device,
    tunnelled,
    tunnelledBy: "the clients' AllowedIPs",
    tunnelledFix: `Add the destination's range to the AllowedIPs the clients get, then re-import the client config (${execIn(ctx, sh`wg show ${device}`)} shows the server side)`,
    tunnelState: tunnelStateOf(w),
    pushedRoutes: [],
    pushedDns: w?.config?.dns ?? [],
    configMissing: {
      file: confFile,
      would_decide: "the client pool (Address), and whether a PostUp hook masquerades it",
      command: whole(`${execIn(ctx, "cat /etc/wireguard/wg0.conf")} > ${sh`${confFile}`}`),
    },
    readConfig: "cat /etc/wireguard/wg0.conf",
    poolUnknownWhy: "no wg0.conf Address, wg-access-server vpn.cidr, image env or wg0 address",
    extraSetters: [],
    notDurableExtra: "",
    chartSwitch: {
      whyNot:
        "no WireGuard chart or image has a forwarding switch podpath knows (wg-easy, linuxserver/wireguard and wg-access-server leave it to the pod): use pod-sysctls or init-container",
    },
    scriptMasquerade: (p) => {
      const r = hookMasquerade(rules, p);
      if (r) return { where: `${r.source.file} ${r.hook}`, text: r.command, at: r.source };
      const nat = w?.values?.nat44;
      if (nat?.value === true) {
        return {
          where: "wg-access-server",
          text: "vpn.nat44: true (the server masquerades the pool itself)",
          at: nat.source,
        };
      }
      return undefined;
    },
    masqueradeFix: (p) => {
      const net = `${formatIp({ family: p.family, value: p.start })}/${p.prefix}`;
      const rule = `-A POSTROUTING -s ${net} -o eth0 -j MASQUERADE`;
      const hook = `PostUp = iptables -t nat -A POSTROUTING -s ${net} -o eth0 -j MASQUERADE; PostDown = iptables -t nat -D POSTROUTING -s ${net} -o eth0 -j MASQUERADE`;
      return {
        rule,
        command: `${hook}   # in the [Interface] section of ${w?.config?.file ?? "wg0.conf"}; wg-quick runs it when ${device} comes up`,
        next: `Masquerade the pool in the VPN pod, in wg0.conf's [Interface]: ${hook}`,
      };
    },
    onlyServicesRouted: tunnelled.kind === "prefixes",
    findings: () => [],
    missing: (): Missing[] =>
      w?.show
        ? []
        : [
            {
              file: showFile,
              would_decide:
                "whether any peer completed a handshake and moved bytes: is the tunnel up at all?",
              command: whole(`${execIn(ctx, sh`wg show ${device}`)} > ${sh`${showFile}`}`),
            },
          ],
  };
}

/** WireGuard: wg-quick configs, `wg show` output, wg-access-server values, WireGuard images. */
export const wireguardKind: TunnelKind = {
  id: "wireguard",
  displayName: "WireGuard",
  ownsFile: isWireguardFile,
  readPod: (src) => {
    const r = readWgEvidence(src);
    if (!r) return undefined;
    const e = r.evidence;
    const shownBy = e.config?.addresses[0]?.source ??
      e.show?.interfaces[0]?.source ??
      e.values?.pool?.source ?? { file: e.config?.file ?? e.values?.file ?? "", line: 1 };
    return {
      kind: "wireguard",
      shownBy,
      diagnostics: r.diagnostics,
      view: (ctx) => wgView(ctx, e),
    };
  },
  detect: ({ evidence, manifests }) => {
    const reading = evidence?.readings?.find((r) => r.kind === "wireguard");
    if (reading) return { kind: "wireguard", strength: "config", source: reading.shownBy };
    const dev = evidence?.ipAddr?.interfaces.find((i) => isWgDevice(i.name));
    if (dev) return { kind: "wireguard", strength: "device", source: dev.source };
    for (const m of manifests) {
      const s = imageSettingsOf(m);
      if (s?.serverMode) return { kind: "wireguard", strength: "manifest", source: s.source };
    }
    return undefined;
  },
  view: (ctx) => wgView(ctx, undefined),
};
