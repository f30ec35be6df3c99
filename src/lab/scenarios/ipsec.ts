/**
 * @module lab/scenarios/ipsec — the replica of case B for an IPsec VPN pod: strongSwan's charon
 * (started by `ipsec start`, reading ipsec.conf) in a "vpn pod" namespace as the road-warrior
 * gateway (PSK, `rightsourceip` pool 10.9.0.0/24, `leftsubnet` the traffic selectors), a second
 * charon in a "laptop" namespace as the client, a "node" namespace routing between pods with
 * kube-proxy-like DNAT (Service VIPs, a LoadBalancer for IKE), a target pod and a DNS pod.
 *
 * Each charon runs in a private mount namespace (`unshare -m`) with a tmpfs on /run, so its pid
 * file and stroke/vici sockets are its own; `ip netns exec` binds the namespace's
 * /etc/netns/<ns>/{ipsec.conf,ipsec.secrets,strongswan.conf,ipsec.d} over /etc (removed with the
 * lab). ESP runs in userspace through charon's kernel-libipsec plugin (a TUN device, ipsec0), so
 * the replica needs no ESP support in the kernel; forwarding, NAT and routing are the kernel's.
 *
 * The replica is the shared tunnel lab (tunnel-lab.ts, with its DNS pod); this kind supplies the
 * two charons' configuration and how the IKE and CHILD SAs come up, UDP 500 and 4500, the
 * leftupdown masquerade, ipsec.conf, statusall, list-sas and xfrm, its cluster objects and words.
 *
 *   laptop (eth0 192.0.2.10, virtual IP 10.9.0.1) ─ node (lan0 192.0.2.1 · vpnveth 10.244.1.1 ·
 *   webveth 10.244.2.1 · dnsveth 10.244.3.1) ─ vpn pod (eth0 10.244.1.10, ipsec0) ·
 *   web pod (10.244.2.20:8080) · dns pod (10.244.3.53:53)
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { mustExec, type Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { IPSEC_NS, IPSEC_POD, type IpsecManifestFix, ipsecClusterFiles } from "./ipsec-cluster.ts";
import {
  buildTunnelLab,
  probeTunnelLab,
  startDnsPod,
  startWebPod,
  TUNNEL_LAB,
  TUNNEL_OPTION_FIELDS,
  tunnelOptionValues,
  tunnelProbeSteps,
  until,
} from "./tunnel-lab.ts";

export const IPSEC = {
  ...TUNNEL_LAB,
  pool: "10.9.0.0/24",
  clientVip: "10.9.0.1",
  /** `leftsubnet` per `--selectors`: the cluster (pods and Services), the VPN pod's node range only. */
  clusterSelectors: "10.0.0.0/8",
  narrowSelectors: "10.244.1.0/24",
  /** What the client asks for with `--selectors mismatch`: nothing the gateway offers. */
  foreignSelectors: "172.16.0.0/12",
} as const;

export const IpsecOptions = z
  .object({
    ...TUNNEL_OPTION_FIELDS,
    selectors: z.enum(["cluster", "narrow", "mismatch"]).default("cluster"),
    manifest: z.enum(["none", "init-container", "pod-sysctls"]).default("none"),
  })
  .strict()
  .transform((o) => ({
    ...tunnelOptionValues(o),
    selectors: o.selectors,
    manifest: o.manifest as IpsecManifestFix,
  }));
export type IpsecLabOptions = z.output<typeof IpsecOptions>;

/** Why the IPsec lab cannot run here (strongSwan's starter or kernel-libipsec missing), or undefined. */
export function strongswanUnavailableReason(): string | undefined {
  try {
    execFileSync("ipsec", ["--version"], { stdio: "pipe" });
  } catch {
    return "needs strongSwan (apt-get install strongswan-starter strongswan-charon strongswan-swanctl libcharon-extra-plugins)";
  }
  try {
    execFileSync("sh", ["-c", "ls /usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so"], {
      stdio: "pipe",
    });
  } catch {
    return "needs strongSwan's kernel-libipsec plugin (apt-get install libcharon-extra-plugins)";
  }
  return undefined;
}

/** The VPN pod's ipsec.conf (as mounted at /etc/ipsec.conf). */
export function gatewayConfig(o: IpsecLabOptions): string {
  const leftsubnet = o.selectors === "narrow" ? IPSEC.narrowSelectors : IPSEC.clusterSelectors;
  return [
    "# strongSwan gateway of the podpath IPsec lab (as in the pod: /etc/ipsec.conf)",
    "config setup",
    "    uniqueids=no",
    "",
    "conn %default",
    "    keyexchange=ikev2",
    "    authby=secret",
    "",
    "conn rw",
    "    left=%any",
    "    leftid=@vpn.podpath.lab",
    `    leftsubnet=${leftsubnet}`,
    ...(o.masqueradePool ? ["    leftupdown=/etc/ipsec.d/updown-masq.sh"] : []),
    "    right=%any",
    "    rightid=@laptop",
    `    rightsourceip=${IPSEC.pool}`,
    "    auto=add",
    "",
  ].join("\n");
}

function clientConfig(o: IpsecLabOptions): string {
  const rightsubnet = o.selectors === "mismatch" ? IPSEC.foreignSelectors : IPSEC.clusterSelectors;
  return [
    "config setup",
    "conn home",
    "    keyexchange=ikev2",
    "    authby=secret",
    "    left=%defaultroute",
    "    leftid=@laptop",
    "    leftsourceip=%config",
    `    right=${IPSEC.lbIp}`,
    "    rightid=@vpn.podpath.lab",
    `    rightsubnet=${rightsubnet}`,
    "    auto=start",
    "",
  ].join("\n");
}

/** The gateway's updown script: masquerade the client pool as the pod's own address. */
const UPDOWN = `#!/bin/sh
# leftupdown of the VPN pod: when a client's CHILD SA comes up, masquerade the client pool
rule="POSTROUTING -s ${IPSEC.pool} -o eth0 -j MASQUERADE"
case "$PLUTO_VERB" in
  up-client) iptables -t nat -C $rule 2>/dev/null || iptables -t nat -A $rule ;;
esac
exit 0
`;

/**
 * strongswan.conf: charon with kernel-libipsec (ESP in userspace over a TUN device) and a log
 * file; everything else as Debian ships it.
 */
function strongswanConf(log: string): string {
  return [
    "charon {",
    "  filelog {",
    "    lab {",
    `      path = ${log}`,
    "      default = 1",
    "    }",
    "  }",
    "  load_modular = yes",
    "  plugins {",
    "    include strongswan.d/charon/*.conf",
    "    kernel-libipsec {",
    "      load = yes",
    "    }",
    "  }",
    "}",
    "include strongswan.d/*.conf",
    "",
  ].join("\n");
}

/** Writes /etc/netns/<ns>/…, which `ip netns exec` binds over /etc (removed by the lab). */
function writeEtc(ns: Namespace, files: Record<string, string>): void {
  const root = `/etc/netns/${ns.name}`;
  for (const [rel, text] of Object.entries(files)) {
    const path = join(root, rel);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, text, { mode: rel.endsWith(".sh") ? 0o755 : 0o600 });
  }
}

/** Starts `ipsec start --nofork` in a private mount namespace with its own /run. */
function startCharon(ns: Namespace) {
  return ns.spawn([
    "unshare",
    "-m",
    "--propagation",
    "private",
    "sh",
    "-c",
    "mount -t tmpfs tmpfs /run && exec ipsec start --nofork",
  ]);
}

/** Runs a command in charon's mount namespace (its /run holds the stroke and vici sockets). */
function inCharon(ns: Namespace, pid: number | undefined, argv: readonly string[]) {
  return ns.exec(["nsenter", "-t", String(pid), "-m", ...argv], { timeoutMs: 15_000 });
}

function strongswanVersion(): string {
  try {
    const out = execFileSync("ipsec", ["--version"], { stdio: "pipe" }).toString();
    return /strongSwan U?(\S+)/.exec(out)?.[0]?.replace(" U", " ") ?? "strongSwan";
  } catch {
    return "strongSwan";
  }
}

export const scenario: Scenario<IpsecLabOptions> = {
  name: "ipsec",
  description:
    "strongSwan (IKEv2, PSK, rightsourceip pool) in a pod namespace and a client laptop: --ip-forward 0|1 --masquerade-pool on|off --policy --selectors cluster|narrow|mismatch --manifest none|init-container|pod-sysctls",
  options: IpsecOptions,
  async run(ctx: ScenarioContext, o: IpsecLabOptions): Promise<ScenarioOutcome> {
    const missing = strongswanUnavailableReason();
    if (missing) throw new Error(`podpath lab ipsec ${missing}`);
    const { lab, log } = ctx;
    const ns = await buildTunnelLab(lab, {
      pool: IPSEC.pool,
      // IKE and IKE over NAT-T
      lbUdpPorts: [500, 4500],
      dnsPod: true,
      publicHost: false,
      policy: o.policy,
      ipForward: o.ipForward,
    });
    const { laptop, vpn } = ns;

    const dir = mkdtempSync(join(tmpdir(), `podpath-${lab.id}-ipsec-`));
    try {
      const gatewayConf = gatewayConfig(o);
      writeEtc(vpn, {
        "ipsec.conf": gatewayConf,
        "ipsec.secrets": '@vpn.podpath.lab @laptop : PSK "podpath-lab-psk"\n',
        "strongswan.conf": strongswanConf(join(dir, "charon-vpn.log")),
        ...(o.masqueradePool ? { "ipsec.d/updown-masq.sh": UPDOWN } : {}),
      });
      writeEtc(laptop, {
        "ipsec.conf": clientConfig(o),
        "ipsec.secrets": '@laptop @vpn.podpath.lab : PSK "podpath-lab-psk"\n',
        "strongswan.conf": strongswanConf(join(dir, "charon-laptop.log")),
      });
      await startWebPod(ns.web);
      if (ns.dns) await startDnsPod(ns.dns, [`${IPSEC.webName}=${IPSEC.webServiceIp}`]);

      log("ipsec lab: starting charon in the vpn pod and on the laptop");
      const gw = startCharon(vpn);
      const logTail = (who: string) => () => {
        let text = "";
        try {
          text = readFileSync(join(dir, `charon-${who}.log`), "utf8");
        } catch {
          text = "(no log)";
        }
        return `ipsec lab: no tunnel within 30 s; charon (${who}) log ends:\n${text.slice(-1500)}`;
      };
      const status = async (where: Namespace, pid: number | undefined) =>
        (await inCharon(where, pid, ["ipsec", "statusall"])).stdout;
      // The gateway answers once its stroke socket accepts the conn (starter loaded ipsec.conf).
      await until(async () => /rw:\s+%any/.test(await status(vpn, gw.pid)), 30_000, logTail("vpn"));
      const client = startCharon(laptop);
      const want = o.selectors === "mismatch" ? /ESTABLISHED/ : /INSTALLED/;
      await until(
        async () => want.test(await status(laptop, client.pid)),
        30_000,
        logTail("laptop"),
      );
      // leftupdown runs when a CHILD SA comes up (none does with mismatched selectors)
      if (o.masqueradePool && o.selectors !== "mismatch") {
        await until(
          async () => /MASQUERADE/.test(await mustExec(vpn, ["iptables", "-t", "nat", "-S"])),
          15_000,
          logTail("vpn"),
        );
      }
      log("ipsec lab: IKE SA up; probing from the laptop");

      return await probeTunnelLab(ctx, ns, {
        steps: tunnelProbeSteps({
          peer: IPSEC.vpnPodIp,
          publicHost: false,
          dns: true,
          ipRoute: false,
        }),
        variant: `ip_forward=${o.ipForward ? 1 : 0} in the vpn pod, masquerade ${o.masqueradePool ? "on (leftupdown)" : "off"}, policy ${o.policy ? "on" : "off"}, selectors ${o.selectors}, manifest ${o.manifest}`,
        clientAddress: IPSEC.clientVip,
        podDir: `pods/${IPSEC_NS}/${IPSEC_POD}`,
        podFiles: async () => ({
          "ipsec.conf": gatewayConf,
          "ipsec-statusall.txt": (await inCharon(vpn, gw.pid, ["ipsec", "statusall"])).stdout,
          "swanctl-list-sas.txt": (await inCharon(vpn, gw.pid, ["swanctl", "--list-sas"])).stdout,
          "xfrm-policy.txt": await mustExec(vpn, ["ip", "xfrm", "policy"]),
          "xfrm-state.txt": await mustExec(vpn, ["ip", "xfrm", "state"]),
        }),
        clusterFiles: () =>
          ipsecClusterFiles({
            pool: IPSEC.pool,
            vpnPodIp: IPSEC.vpnPodIp,
            targetPodIp: IPSEC.targetPodIp,
            dnsPodIp: IPSEC.dnsPodIp,
            webServiceIp: IPSEC.webServiceIp,
            dnsServiceIp: IPSEC.dnsServiceIp,
            podCidr: IPSEC.podCidr,
            manifest: o.manifest,
            policy: o.policy,
          }),
        readme: () =>
          `# IPsec lab snapshot\n\nMade by \`podpath lab run ipsec --ip-forward ${o.ipForward ? 1 : 0} --masquerade-pool ${o.masqueradePool ? "on" : "off"}${o.policy ? " --policy" : ""} --selectors ${o.selectors} --manifest ${o.manifest}\`: real ${strongswanVersion()} charon (ESP through kernel-libipsec) in network namespaces; probes, statusall, list-sas, xfrm, sysctl, iptables-save and routes are real outputs.\n`,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
