/**
 * @module test/e2e/lab-variants — the scenario variants the end-to-end suite runs through
 * `lab run` → `diagnose`, with what the kernel must show and which findings must follow.
 * `scripts/make-examples.ts` regenerates `examples/<example>` from the variants that name one.
 */
import type { FindingId } from "../../src/model/types.ts";

export interface NodeExpectation {
  /** Node name as the replica names it (`gke-lab-<pool>-<index>`). */
  readonly node: string;
  /** Source address the on-prem host sees for the pod's packets. */
  readonly wireSource: "pod" | "node";
  /** Whether the pod's ping gets its replies. */
  readonly replied: boolean;
  /**
   * Whether the pod's TCP connection to the database gets its answer (default: as `replied`).
   * The on-prem host's firewall drops tcp/5432 from sources outside its allowlist (the pod range
   * unless `--allow` says otherwise), so a node source gets ping replies but no connection.
   */
  readonly tcpAnswered?: boolean;
}

export interface LabVariant {
  readonly name: string;
  /** Only masquerade variants are checked by lab-masquerade.test.ts (kernel expectations below). */
  readonly scenario: "masquerade" | "vpn" | "aws-vpc-cni";
  /** Arguments after `lab run <scenario>` (paths relative to the repository root). */
  readonly args: readonly string[];
  /** The examples/ folder regenerated from this variant. */
  readonly example?: string;
  /** `kept`: the example's README is written by hand and regenerating keeps it. */
  readonly readme?: "kept";
  /** Commands the example's README suggests after `podpath diagnose`. */
  readonly tryAlso?: readonly string[];
  readonly description: string;
  readonly nodes: readonly NodeExpectation[];
  readonly findings: {
    readonly present: readonly FindingId[];
    readonly absent: readonly FindingId[];
  };
}

export const LAB_VARIANTS: readonly LabVariant[] = [
  {
    name: "eks-exclude-snat-cidrs",
    scenario: "aws-vpc-cni",
    args: [],
    example: "eks-exclude-snat-cidrs",
    readme: "kept",
    description:
      "EKS: the AWS VPC CNI's AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS lists the on-prem prefix, so AWS-SNAT-CHAIN-0 returns before its SNAT rule; the pod (secondary VPC CIDR 100.64.0.0/16) reaches on-prem with its own address, and on-prem routes back only 192.168.0.0/16.",
    nodes: [],
    findings: {
      present: ["masq/exempt-destination", "masq/no-return-route", "masq/wire-pod-source"],
      absent: [
        "masq/agent-missing",
        "masq/config-invalid",
        "masq/intent-rules-drift",
        "masq/source-undecided",
      ],
    },
  },
  {
    name: "eks-exclude-snat-cidrs-fixed",
    scenario: "aws-vpc-cni",
    args: ["--exclude-snat-cidrs", ""],
    example: "eks-exclude-snat-cidrs-fixed",
    readme: "kept",
    tryAlso: [
      "podpath verify examples/eks-exclude-snat-cidrs examples/eks-exclude-snat-cidrs-fixed",
    ],
    description:
      "EKS after the fix in the plugin's terms: AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS removed from the aws-node DaemonSet, so AWS-SNAT-CHAIN-0 SNATs pod traffic to on-prem to the node's primary address and the connection completes; the VPC host still sees the pod address.",
    nodes: [],
    findings: {
      present: ["masq/wire-node-source"],
      // the VPC host still sees the pod address (info): the plugin's design
      absent: ["masq/exempt-destination", "masq/no-return-route", "masq/source-undecided"],
    },
  },
  {
    name: "seed",
    scenario: "masquerade",
    args: [],
    example: "snat-exception-list",
    description:
      "The seed case: the agent's RFC 1918 default exempts 10.20.30.40, the pod leaves with its own address, and on-prem routes back only the node subnet.",
    nodes: [{ node: "gke-lab-default-0", wireSource: "pod", replied: false }],
    findings: {
      present: ["masq/exempt-destination", "masq/no-return-route", "masq/wire-pod-source"],
      // reply-missing is for translated requests that go unanswered (see no-route-to-nodes)
      absent: [
        "masq/agent-missing",
        "masq/config-invalid",
        "masq/intent-rules-drift",
        "masq/reply-missing",
      ],
    },
  },
  {
    name: "seed-with-kube-proxy",
    scenario: "masquerade",
    args: ["--kube-proxy"],
    description:
      "The seed case on a node that also carries kube-proxy's KUBE-POSTROUTING (mark-based) masquerade.",
    nodes: [{ node: "gke-lab-default-0", wireSource: "pod", replied: false }],
    findings: {
      present: ["masq/exempt-destination", "masq/no-return-route", "masq/wire-pod-source"],
      absent: ["masq/intent-rules-drift", "masq/reply-missing"],
    },
  },
  {
    name: "narrowed",
    scenario: "masquerade",
    args: ["--non-masquerade", "10.4.0.0/14", "--phase", "after"],
    example: "snat-exception-list-fixed",
    description:
      "The supported fix: the exception narrowed to the pod range; pods leave as the node. The node address now gets ping replies, but the on-prem database firewall admits only the pod range to 10.20.30.40:5432 and drops the connection: the next break.",
    nodes: [{ node: "gke-lab-default-0", wireSource: "node", replied: true, tcpAnswered: false }],
    findings: {
      // the far side's allowlist admits only the pod range: the next break after the fix
      present: ["masq/wire-node-source", "masq/remote-allowlist-rejects"],
      absent: ["masq/exempt-destination", "masq/reply-missing", "masq/wire-pod-source"],
    },
  },
  {
    name: "narrowed-allowlisted",
    scenario: "masquerade",
    args: [
      "--non-masquerade",
      "10.4.0.0/14",
      "--allow",
      "10.4.0.0/14,10.128.0.0/20",
      "--phase",
      "after",
    ],
    example: "snat-exception-list-allowlisted",
    description:
      "The combined change: the exception narrowed to the pod range and the on-prem database firewall's allowlist extended to the node subnet; pods leave as the node and the connection completes.",
    nodes: [{ node: "gke-lab-default-0", wireSource: "node", replied: true }],
    findings: {
      present: ["masq/wire-node-source"],
      absent: [
        "masq/remote-allowlist-rejects",
        "masq/exempt-destination",
        "masq/reply-missing",
        "masq/wire-pod-source",
      ],
    },
  },
  {
    name: "keep-pod-identity",
    scenario: "masquerade",
    args: ["--routes-back", "10.128.0.0/20,10.4.0.0/14"],
    description: "The alternative: pod addresses kept, the pod range routed back on-prem.",
    nodes: [{ node: "gke-lab-default-0", wireSource: "pod", replied: true }],
    findings: {
      present: ["masq/wire-pod-source"],
      absent: ["masq/no-return-route", "masq/reply-missing"],
    },
  },
  {
    name: "pool-without-agent",
    scenario: "masquerade",
    args: ["--non-masquerade", "10.4.0.0/14", "--pools", "default:agent,legacy:no-agent"],
    description: "The fix applied, but one node pool runs no agent and keeps the old rules.",
    nodes: [
      { node: "gke-lab-default-0", wireSource: "node", replied: true, tcpAnswered: false },
      { node: "gke-lab-legacy-1", wireSource: "pod", replied: false },
    ],
    // drift is reported only where the agent is expected to run; elsewhere agent-missing explains it
    findings: {
      present: ["masq/agent-missing", "masq/exempt-destination", "masq/wire-pod-source"],
      absent: ["masq/config-invalid", "masq/intent-rules-drift"],
    },
  },
  {
    name: "agent-lagging",
    scenario: "masquerade",
    args: ["--non-masquerade", "10.4.0.0/14", "--rules", "old"],
    description:
      "The ConfigMap is narrowed but the agent has not applied it: the node still holds the old rules.",
    nodes: [{ node: "gke-lab-default-0", wireSource: "pod", replied: false }],
    findings: {
      present: ["masq/intent-rules-drift", "masq/wire-pod-source"],
      absent: ["masq/agent-missing", "masq/config-invalid"],
    },
  },
  {
    name: "no-route-to-nodes",
    scenario: "masquerade",
    args: ["--non-masquerade", "10.4.0.0/14", "--routes-back", "192.168.0.0/16"],
    description:
      "Masquerade works, but the far side routes back neither the pods nor the nodes: translated requests go unanswered.",
    nodes: [{ node: "gke-lab-default-0", wireSource: "node", replied: false }],
    findings: {
      present: ["masq/reply-missing"],
      absent: ["masq/wire-pod-source", "masq/exempt-destination"],
    },
  },
  {
    name: "json-config",
    scenario: "masquerade",
    args: ["--config", "test/fixtures/lab/ip-masq-agent-narrow.json"],
    description: "A JSON config narrowing the exception (and masquerading link-local) is applied.",
    nodes: [{ node: "gke-lab-default-0", wireSource: "node", replied: true, tcpAnswered: false }],
    findings: {
      present: ["masq/wire-node-source"],
      absent: ["masq/config-invalid", "masq/intent-rules-drift", "masq/exempt-destination"],
    },
  },
  {
    name: "invalid-config",
    scenario: "masquerade",
    args: ["--config", "test/fixtures/lab/ip-masq-agent-misaligned.yaml"],
    description: "A rejected config: the agent keeps the rules already installed.",
    nodes: [{ node: "gke-lab-default-0", wireSource: "pod", replied: false }],
    findings: { present: ["masq/config-invalid"], absent: ["masq/agent-missing"] },
  },
  {
    name: "vpn-forwarding-off",
    scenario: "vpn",
    args: ["--ip-forward", "0"],
    example: "vpn-forwarding-off",
    tryAlso: ["podpath plan vpn examples/vpn-forwarding-off --pod vpn/vpn-openvpn-6d9c7b5f4-x2x7k"],
    description:
      "Case B: an OpenVPN pod whose own network namespace has net.ipv4.ip_forward=0. The client reaches the tunnel peer 10.8.0.1 and nothing behind it.",
    nodes: [],
    findings: {
      present: ["vpn/forwarding-disabled", "vpn/first-silent-hop"],
      absent: ["vpn/client-pool-unroutable", "vpn/admission-rejects"],
    },
  },
  {
    name: "vpn-forwarding-fixed",
    scenario: "vpn",
    args: ["--ip-forward", "1", "--manifest", "init-container"],
    example: "vpn-forwarding-fixed",
    tryAlso: ["podpath verify examples/vpn-forwarding-off examples/vpn-forwarding-fixed"],
    description:
      "Case B after the fix: forwarding on in the pod's namespace, made durable by a privileged init container; the client reaches the pods and Services behind the tunnel.",
    nodes: [],
    findings: {
      present: [],
      absent: ["vpn/forwarding-disabled", "vpn/first-silent-hop", "vpn/forwarding-not-durable"],
    },
  },
];
