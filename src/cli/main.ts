#!/usr/bin/env node
/**
 * @module cli/main — argv → options → one command module → exit code. A thin table: each command's
 * work lives in `cli/commands/<name>.ts` (imported lazily) over the library.
 */
import { Command, CommanderError, Option } from "commander";
import { UnknownEndpointError } from "../cases/endpoints.ts";
import { parseWorkloadRef } from "../k8s/workload-ref.ts";
import { SCENARIOS } from "../lab/scenarios/index.ts";
import { terminalSafe } from "../report/terminal-safe.ts";
import { InputFileError, reasonOf } from "../snapshot/input-file.ts";
import { EXIT, endQuietlyWhenStdoutCloses, type Io, processIo, UsageError } from "./io.ts";
import {
  commandPath,
  fromWithNamespace,
  givenByUser,
  mergedOptions,
  podWithNamespace,
  refuseHostname,
  refuseUnless,
} from "./options.ts";

/** What every command module exports. */
export interface CommandModule {
  run(args: readonly string[], opts: Readonly<Record<string, unknown>>, io: Io): Promise<number>;
}

type Loader = () => Promise<CommandModule>;

/** File-system errors on a path the user gave: a usage problem, said in one line (exit 2). */
const INPUT_ERRNO = new Set([
  "ENOENT",
  "EISDIR",
  "ENOTDIR",
  "ENAMETOOLONG",
  "EACCES",
  "EPERM",
  "ELOOP",
  "ERR_FS_FILE_TOO_LARGE",
]);

/**
 * The one-line message for an error that comes from the input the user named, not from a bug:
 * a file that cannot be read as one ({@link InputFileError}), or a file-system error on a path
 * (a directory where a file belongs, a name too long, no permission, a file over 2 GiB).
 */
function inputProblem(e: unknown): string | undefined {
  if (e instanceof InputFileError) return e.message;
  const err = e as NodeJS.ErrnoException;
  if (!(e instanceof Error) || err.code === undefined || !INPUT_ERRNO.has(err.code))
    return undefined;
  const path = typeof err.path === "string" ? err.path : undefined;
  return `${path === undefined ? "cannot read an input" : `cannot read ${path}`}: ${reasonOf(e)}`;
}

/** The lab's scenarios, for help (the registry loads each scenario only when it runs). */
const SCENARIO_NAMES = Object.keys(SCENARIOS).join(" | ");

const controller = new AbortController();
let io: Io | undefined;
function getIo(color?: boolean, verbose?: boolean): Io {
  io ??= processIo(controller.signal, color, verbose);
  return io;
}

/** Checks (and puts in canonical form) a command's options before its module runs. */
type Prepare = (cmd: Command, opts: Record<string, unknown>, args: readonly string[]) => void;

function action(load: Loader, prepare?: Prepare) {
  return async (...params: unknown[]) => {
    // commander passes positional args, then the options object, then the Command itself
    const cmd = params.at(-1) as Command;
    const positional = params
      .slice(0, -2)
      .flatMap((p) => (Array.isArray(p) ? p : p === undefined ? [] : [p])) as string[];
    const opts: Record<string, unknown> = {
      ...mergedOptions(cmd),
      _command: cmd.name(),
      _args: cmd.args,
    };
    const theIo = getIo(opts["color"] as boolean | undefined, opts["verbose"] === true);
    const name = commandPath(cmd);
    try {
      prepare?.(cmd, opts, positional);
      const mod = await load();
      theIo.verbose(
        `${name}: options checked, command loaded (arguments: ${positional.join(" ") || "none"})`,
      );
      process.exitCode = await mod.run(positional, opts, theIo);
      theIo.verbose(`${name}: answer written, exit ${process.exitCode}`);
    } catch (e) {
      if (e instanceof UsageError || e instanceof UnknownEndpointError) {
        theIo.err(`podpath: ${e.message}\n`);
        process.exitCode = EXIT.usage;
        return;
      }
      const unreadable = inputProblem(e);
      if (unreadable !== undefined) {
        theIo.err(`podpath: ${unreadable}\n`);
        process.exitCode = EXIT.usage;
        return;
      }
      throw e;
    }
  };
}

/** What `diagnose` reads only from a cluster: refused on a snapshot, where they would do nothing. */
const LIVE_ONLY = [
  "keep",
  "context",
  "kubeconfig",
  "allowPlaintextCredentials",
  "nodeState",
  "nodes",
  "pod",
  "capture",
  "seconds",
  "concurrency",
];

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** `-n`, `--pod` and `--from` in kubectl's forms; flags that need another flag. */
const prepareDiagnose: Prepare = (cmd, opts) => {
  const live = opts["live"] === true;
  refuseUnless(cmd, LIVE_ONLY, live, "with --live (a snapshot is read as it is)");
  const ns = str(opts["namespace"]);
  const from = str(opts["from"]);
  refuseUnless(
    cmd,
    ["namespace"],
    live || from?.startsWith("pod/") === true,
    "with --live or with --from pod/NAME",
  );
  refuseUnless(cmd, ["seconds"], givenByUser(cmd, "capture"), "with --capture");
  if (from !== undefined) opts["from"] = fromWithNamespace(from, ns);
  const pod = str(opts["pod"]);
  if (pod !== undefined) opts["pod"] = podWithNamespace(pod, ns, "--pod");
  const dest = str(opts["dest"]);
  if (dest !== undefined) refuseHostname("--dest", dest);
};

const prepareCollect: Prepare = (cmd, opts) => {
  refuseUnless(cmd, ["seconds"], givenByUser(cmd, "capture"), "with --capture");
  refuseUnless(
    cmd,
    ["collectorImage", "collectorNamespace"],
    opts["nodeState"] === true,
    "with --node-state (they place the collector pods)",
  );
  const pod = str(opts["pod"]);
  if (pod !== undefined) opts["pod"] = podWithNamespace(pod, str(opts["namespace"]), "--pod");
};

const prepareDest: Prepare = (_cmd, opts) => {
  const dest = str(opts["dest"]);
  if (dest !== undefined) refuseHostname("--dest", dest);
};

const output = (choices: string[], dflt: string) =>
  new Option("-o, --output <format>", "output format").choices(choices).default(dflt);

const program = new Command("podpath")
  .description(
    "Explains what a pod's packet claims to be when it leaves, where it stops and why, from cluster intent, the rules installed in the kernel, and captures of the wire.",
  )
  .version("0.1.0")
  // Options after a subcommand belong to it (so `admission check --version v1.30` is the policy
  // version, not podpath's); the common flags are added to every subcommand below.
  .enablePositionalOptions()
  .option("--no-color", "never colour the output")
  .option("-v, --verbose", "more detail on stderr")
  .showHelpAfterError("(add --help for usage)")
  .configureOutput({
    writeOut: (s) => process.stdout.write(s),
    writeErr: (s) => process.stderr.write(terminalSafe(s, { keepLayout: true })),
  })
  .exitOverride()
  .addHelpText(
    "after",
    "\nExamples:\n  podpath diagnose examples/snat-exception-list\n" +
      "  podpath diagnose --help                 # every command has its own help and examples\n" +
      "  kubectl podpath diagnose --live         # the same, from the current kubeconfig context",
  );

program
  .command("diagnose")
  .description("explain where the path breaks, with evidence (file and line) for every finding")
  .argument("[snapshot]", "snapshot folder (or .tar.gz of one)")
  .option(
    "--dest <ip[:port]>",
    "destination to explain (default: the remote sites' addresses, then probed Service addresses)",
  )
  .option(
    "--from <endpoint>",
    "sender to trace: pod/NS/NAME, pod/NAME with -n, node/NAME, or a pod's IP address",
  )
  .option("--live", "collect from the current cluster first (read-only)")
  .option("--keep <dir>", "with --live: keep the collected snapshot here")
  .option("--context <name>", "with --live: kubeconfig context")
  .option("--kubeconfig <file>", "with --live: kubeconfig file")
  .option(
    "--allow-plaintext-credentials",
    "with --live: send the context's credentials to a plain http:// server",
  )
  .option("--node-state", "with --live: also read node rules (creates short-lived collector pods)")
  .option(
    "-n, --namespace <ns>",
    "namespace for --from pod/NAME; with --live also for --pod NAME and Services/NetworkPolicies",
  )
  .option("--nodes <selector|names>", "with --live: which nodes")
  .option("--pod <ns/name>", "with --live: also read this pod's sysctl, iptables-save, routes")
  .option(
    "--capture <host>",
    "with --live --node-state: capture traffic with this host on the nodes",
  )
  .option("--seconds <n>", "with --capture: capture length", "10")
  .option("--concurrency <k>", "with --live: parallel node reads", "10")
  .addOption(output(["text", "json", "md", "html"], "text"))
  .addHelpText(
    "after",
    "\nExamples:\n  podpath diagnose examples/snat-exception-list\n  podpath diagnose snap/ --dest 10.20.30.40:5432 -o json\n" +
      "  podpath diagnose snap/ --from pod/billing-default -n default\n" +
      "  kubectl podpath diagnose --live --node-state --keep snap/",
  )
  .action(action(() => import("./commands/diagnose.ts"), prepareDiagnose));

const plan = program
  .command("plan")
  .description("propose the smallest safe fix, with impact and rollback");
plan
  .command("masquerade")
  .description("fix the SNAT exception list: narrow it, or keep pod identity and teach the path")
  .argument("<snapshot>", "snapshot folder (or .tar.gz of one)")
  .option("--dest <ip[:port]>", "destination that must stop being exempt")
  .addOption(
    new Option(
      "--strategy <s>",
      "narrow: stop exempting the destination; keep-pod-identity: keep it and route the pods back",
    )
      .choices(["narrow", "keep-pod-identity"])
      .default("narrow"),
  )
  .option("--replay", "prove the proposed rules on a real kernel (root)")
  .option(
    "--pod-range <cidrs>",
    "the cluster's pod range, comma-separated (default: from the snapshot)",
  )
  .option(
    "--write <dir>",
    "write the new and the previous ConfigMap there, as the commands name them",
  )
  .addOption(output(["text", "json", "md", "html", "yaml"], "text"))
  .addHelpText(
    "after",
    "\nExamples:\n  podpath plan masquerade examples/snat-exception-list\n" +
      "  podpath plan masquerade snap/ --dest 10.20.30.40:5432 --write fix/ --replay",
  )
  .action(action(() => import("./commands/plan-masquerade.ts"), prepareDest));
plan
  .command("vpn")
  .description("make forwarding in a VPN pod durable, with admission prediction")
  .argument("<snapshot>", "snapshot folder (or .tar.gz of one)")
  .option(
    "--pod <ns/name>",
    "the VPN pod: NAMESPACE/NAME, NAME with -n, or its workload: deployment/NAME, statefulset/NAME, daemonset/NAME (default: the snapshot's one VPN pod)",
  )
  .option("-n, --namespace <ns>", "the VPN pod's namespace (kubectl's -n; default: default)")
  .option("--write <dir>", "write every file the apply lines name there (a new or empty folder)")
  .addOption(
    new Option("--strategy <s>", "which durable fix to propose (all: each, compared)")
      .choices(["init-container", "pod-sysctls", "chart-value", "all"])
      .default("all"),
  )
  .addHelpText(
    "after",
    "\nExamples:\n  podpath plan vpn examples/vpn-forwarding-off --pod vpn/vpn-openvpn-6d9c7b5f4-x2x7k\n" +
      "  podpath plan vpn snap/ --pod openvpn-0 -n vpn --strategy pod-sysctls -o yaml",
  )
  .addOption(output(["text", "json", "md", "html", "yaml"], "text"))
  .action(
    action(
      () => import("./commands/plan-vpn.ts"),
      (_cmd, opts) => {
        const pod = str(opts["pod"]);
        // deployment/NAME (deploy/, statefulset/, daemonset/): plan-vpn finds its pods
        if (pod !== undefined && parseWorkloadRef(pod) === undefined)
          opts["pod"] = podWithNamespace(pod, str(opts["namespace"]), "--pod", "default");
      },
    ),
  );

program
  .command("verify")
  .description("the change record: compare a snapshot before and after a change")
  .argument("<before>", "snapshot taken before the change")
  .argument("<after>", "snapshot taken after it")
  .option("--dest <ip[:port]>", "the known request whose source address proves the change")
  .addOption(output(["text", "json", "md", "html"], "text"))
  .addHelpText(
    "after",
    "\nExample:\n  podpath verify examples/snat-exception-list examples/snat-exception-list-allowlisted",
  )
  .action(action(() => import("./commands/verify.ts"), prepareDest));

const capture = program.command("capture").description("read pcap, pcapng and tcpdump text");
capture
  .command("read")
  .description("one packet per line")
  .argument("<file>", "pcap, pcapng, or tcpdump's text output")
  .addOption(output(["text", "json", "md", "html", "jsonl"], "text"))
  .addHelpText("after", "\nExample:\n  podpath capture read captures/node-1.pcap | less")
  .action(action(() => import("./commands/capture-read.ts")));
capture
  .command("flows")
  .description("conversations and their verdicts")
  .argument("<file>", "pcap, pcapng, or tcpdump's text output")
  .option("--host <ip>", "only conversations with this address")
  .option("--talkers", "with --host: who sent to it, packet counts, and whether replies came")
  .addHelpText(
    "after",
    "\nExamples:\n  podpath capture flows captures/node-1.pcap\n" +
      "  podpath capture flows captures/node-1.pcap --host 10.20.30.40 --talkers",
  )
  .addOption(output(["text", "json", "md", "html"], "text"))
  .action(
    action(
      () => import("./commands/capture-flows.ts"),
      (cmd) => refuseUnless(cmd, ["talkers"], givenByUser(cmd, "host"), "with --host"),
    ),
  );

const ipmasq = program
  .command("ipmasq")
  .description("ip-masq-agent's own view of a config: effective config and the rules it writes");
for (const sub of ["config", "rules"] as const) {
  ipmasq
    .command(sub)
    .description(
      sub === "config"
        ? "the effective config the agent would run with (or its error)"
        : "the iptables-restore input the agent would write",
    )
    .argument("[file]", "config file, or a ConfigMap as kubectl prints it (absent: defaults)")
    .option("--masq-chain <name>", "agent flag (default IP-MASQ-AGENT)")
    .option("--nomasq-all-reserved-ranges [bool]", "agent flag (default false)")
    .option("--enable-ipv6 [bool]", "agent flag (default false)")
    .option("--random-fully [bool]", "agent flag (default true)")
    .option("--to-ports <ports>", "agent flag")
    .option("--daemonset <file>", "read the agent flags from this DaemonSet's container args")
    .option("--previous <file>", "the config the agent ran with before (kept when FILE is invalid)")
    .option("--family <4|6>", "rules: print the iptables (4) or ip6tables (6) input", "4")
    .option(
      "--iptables-version <v>",
      "rules: iptables in the agent's image (--random-fully needs 1.6.2 or later)",
    )
    .addOption(output(["text", "json", "md", "html"], sub === "config" ? "json" : "text"))
    .addHelpText(
      "after",
      "\nAgent flags take Go's forms: --enable-ipv6, --random-fully=false. Flags given here override\n" +
        "those read with --daemonset.\n\nExamples:\n" +
        "  podpath ipmasq config cluster/ip-masq-agent.yaml\n" +
        "  podpath ipmasq rules cm.yaml --daemonset ds.yaml | iptables-restore --noflush\n",
    )
    .action(
      action(
        () =>
          sub === "config"
            ? import("./commands/ipmasq-config.ts")
            : import("./commands/ipmasq-rules.ts"),
        (cmd) =>
          refuseUnless(cmd, ["family", "iptablesVersion"], sub === "rules", "with ipmasq rules"),
      ),
    );
}

program
  .command("admission")
  .description("Pod Security Admission and kubelet sysctl checks")
  .command("check")
  .description("would this pod be admitted: its Pod Security level and the kubelet's sysctls")
  .argument("<manifest>", "Pod, workload or Helm-rendered manifest (YAML or JSON)")
  .addOption(
    new Option(
      "--level <level>",
      "Pod Security level (default: the Namespace's label in the file, else restricted)",
    ).choices(["privileged", "baseline", "restricted"]),
  )
  .option("--version <v>", "policy version: v1.N or latest", "latest")
  .option("--policy-version <v>", "same as --version")
  .option("--kubelet-config <file>", "KubeletConfiguration, configz JSON or kubelet command line")
  .addOption(
    new Option("--platform <p>", "platform rules on top of Pod Security (GKE Autopilot's)")
      .choices(["generic", "gke-standard", "gke-autopilot"])
      .default("generic"),
  )
  .addOption(output(["text", "json", "md", "html"], "text"))
  .addHelpText(
    "after",
    "\nExamples:\n" +
      "  podpath admission check vpn.yaml                      # level from a Namespace in the file, else restricted\n" +
      "  podpath admission check vpn.yaml --level baseline --version v1.29\n" +
      "  podpath admission check vpn.yaml --kubelet-config nodes/n1/kubelet-config.yaml -o json\n" +
      "  podpath admission check vpn.yaml --platform gke-autopilot\n" +
      "Exit: 0 admitted, 1 denied, 2 unreadable input.",
  )
  .action(action(() => import("./commands/admission-check.ts")));

program
  .command("probe")
  .description("from the VPN client: probe outward, stop at the first silent hop")
  .option("--peer <ip>", "the VPN server's address inside the tunnel")
  .option("--pod-ip <ip>", "a pod's address behind the VPN")
  .option("--service-ip <ip[:port]>", "a Service's cluster IP (and port) behind the VPN")
  .option("--public <host>", "a public address, to tell the tunnel from the way out")
  .option("--name <name>", "a name to resolve through the VPN's DNS")
  .option("--dns-server <ip>", "the DNS server to ask for --name")
  .option("--timeout-ms <n>", "per probe", "2000")
  .option("--count <n>", "pings per target", "3")
  .option("--all", "keep probing past the first hop that does not answer")
  .option("--out <file>", "also write the transcript here")
  .addOption(output(["text", "json", "md", "html"], "text"))
  .addHelpText(
    "after",
    "\nExamples:\n  podpath probe --peer 10.8.0.1 --pod-ip 10.4.0.5 --out probes/client.txt\n" +
      "  podpath probe --service-ip 10.0.0.10:53 --name kubernetes.default.svc.cluster.local --dns-server 10.0.0.10",
  )
  .action(action(() => import("./commands/probe.ts")));

program
  .command("collect")
  .description("gather a snapshot from a cluster (read-only unless --node-state)")
  .requiredOption("--out <dir>", "folder to write the snapshot into (new or empty)")
  .addOption(output(["text", "json", "md", "html"], "text"))
  .option("--context <name>", "kubeconfig context (default: the current one)")
  .option("--kubeconfig <file>", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
  .option(
    "--allow-plaintext-credentials",
    "send the context's token, password or client certificate to a plain http:// server",
  )
  .option("--request-timeout <duration>", "deadline of one API call (e.g. 30s, 2m)", "60s")
  .option("-n, --namespace <ns>", "namespace for --pod NAME and Services/NetworkPolicies")
  .option("--nodes <selector|names>", "which nodes: a label selector or comma-separated names")
  .option("--pod <ns/name>", "also read this pod's sysctl, iptables-save, routes (exec, read-only)")
  .option("--node-state", "create short-lived collector pods to read node rules")
  .option("--capture <host>", "with --node-state: capture traffic with this address on the nodes")
  .option("--seconds <n>", "capture length", "10")
  .option("--concurrency <k>", "parallel node reads", "10")
  .option(
    "--collector-image <ref>",
    "with --node-state: image with iptables, iproute2, conntrack, tcpdump",
  )
  .option(
    "--collector-namespace <ns>",
    "with --node-state: where collector pods run",
    "kube-system",
  )
  .addHelpText(
    "after",
    "\nExamples:\n  podpath collect --out snap/ --pod vpn/openvpn-0\n  kubectl podpath collect --out snap/ --context prod --node-state --capture 10.20.30.40 --seconds 10",
  )
  .action(action(() => import("./commands/collect.ts"), prepareCollect));

const lab = program.command("lab").description("real-kernel replicas in network namespaces (root)");
lab
  .command("run")
  .description("build a replica, probe and capture it, write a snapshot to --out, tear it down")
  .argument("<scenario>", SCENARIO_NAMES)
  .requiredOption("--out <dir>", "folder to write the snapshot into")
  .addOption(output(["text", "json", "md", "html"], "text"))
  .allowUnknownOption()
  .allowExcessArguments()
  .addHelpText(
    "after",
    "\nmasquerade options: --non-masquerade CIDRS | --config FILE, --routes-back CIDRS,\n" +
      "  --pools NAME:agent|no-agent,..., --rules current|old, --old-non-masquerade CIDRS,\n" +
      "  --allow CIDRS, --phase before|after, --ipv6, --kube-proxy\n" +
      "Examples:\n  podpath lab run masquerade --out snap/\n" +
      "  podpath lab run masquerade --non-masquerade 10.4.0.0/14 --pools default:agent,legacy:no-agent --out snap2/",
  )
  .action(action(() => import("./commands/lab.ts")));
lab
  .command("up")
  .description("build a replica and keep it running for hands-on work (remove with lab down)")
  .argument("<scenario>", `${SCENARIO_NAMES} (with lab run's options)`)
  .addHelpText(
    "after",
    "\nExample:\n  podpath lab up masquerade --pools default:agent,legacy:no-agent   # then: lab down ID",
  )
  .allowUnknownOption()
  .allowExcessArguments()
  .action(action(() => import("./commands/lab.ts")));
lab
  .command("down")
  .description("remove a kept replica by id (without an id: list them)")
  .argument("[id]", "the id lab up printed")
  .option("--all", "remove every recorded lab (kept, running or left by a dead run)")
  .addHelpText("after", "\nExamples:\n  podpath lab down\n  podpath lab down --all")
  .action(action(() => import("./commands/lab.ts")));
lab
  .command("replay")
  .description("a node's nat table on this kernel: its source on the wire vs the evaluator")
  .requiredOption("--iptables <file>", "a node's iptables-save (its nat table is replayed)")
  .requiredOption(
    "--flow <src,dst[:port]>",
    "the packet: SRC,DST[:PORT], or 'SRC->DST[:PORT]' quoted (> is a shell redirect)",
  )
  .addOption(output(["text", "json", "md", "html"], "text"))
  .allowUnknownOption()
  .allowExcessArguments()
  .addHelpText(
    "after",
    "\noptions: --proto tcp|udp|icmp, --node-ip IP, --in-iface NAME, --out-iface NAME, --local,\n" +
      "  --skip-invalid (load the nat table without the lines podpath cannot read; else refused)\n" +
      "Example:\n  podpath lab replay --iptables nodes/n1/iptables-save.txt --flow 10.4.0.5,10.20.30.40:5432",
  )
  .action(action(() => import("./commands/lab.ts")));

program
  .command("completion")
  .description("print a shell completion script for podpath and kubectl-podpath")
  .argument("<shell>", "bash | zsh | fish")
  .addHelpText(
    "after",
    "\nExamples:\n  source <(podpath completion bash)      # in ~/.bashrc\n" +
      "  source <(podpath completion zsh)       # in ~/.zshrc\n" +
      "  podpath completion fish > ~/.config/fish/completions/podpath.fish",
  )
  .action(
    action(async () => {
      const m = await import("./commands/completion.ts");
      return { run: (args, _opts, theIo) => m.run(args, program, theIo) };
    }),
  );

/** The common flags (DESIGN.md): the same on every command, before or after its name. */
function addCommonFlags(cmd: Command): void {
  for (const sub of cmd.commands) {
    if (sub.commands.length > 0) addCommonFlags(sub);
    const has = (flag: string) => sub.options.some((o) => o.long === flag);
    if (!has("--no-color")) sub.option("--no-color", "never colour the output");
    if (!has("--verbose")) sub.option("-v, --verbose", "more detail on stderr");
  }
}
addCommonFlags(program);

async function main(argv: string[]): Promise<void> {
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.once(sig, () => {
      controller.abort(new Error(sig));
      process.exitCode = 130;
    });
  }
  endQuietlyWhenStdoutCloses();
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      process.exitCode = e.exitCode === 0 ? 0 : EXIT.usage;
      return;
    }
    process.stderr.write(
      terminalSafe(
        `podpath: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
        { keepLayout: true },
      ),
    );
    process.exitCode = 70;
  }
}

await main(process.argv);
