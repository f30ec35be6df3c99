import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, it } from "node:test";
import fc from "fast-check";
import { ClusterError, errorFromResponse, exitCodeOf, RESOURCES } from "../k8s/cluster.ts";
import {
  collectorCommand,
  collectorDaemonSet,
  collectorName,
  collectorPod,
} from "./collect-collector.ts";
import {
  CILIUM_COMMANDS,
  captureCommand,
  isReadCommand,
  NODE_COMMANDS,
  POD_COMMANDS,
} from "./collect-commands.ts";
import { explainClusterError } from "./collect-errors.ts";
import { podState } from "./collect-nodes.ts";
import { isLabelSelector, isMasqueradingDaemonSet } from "./collect-objects.ts";
import { createLimiter } from "./collect-pool.ts";

describe("isReadCommand", () => {
  it("accepts the fixed commands and the bounded capture, and nothing else", () => {
    for (const c of [...POD_COMMANDS, ...NODE_COMMANDS, ...CILIUM_COMMANDS]) {
      assert.ok(isReadCommand(c.argv));
      if (c.fallback) assert.ok(isReadCommand(c.fallback));
    }
    // the owners' tools: their listing commands only, never one that changes state
    assert.ok(!isReadCommand(["ipset", "flush"]));
    assert.ok(!isReadCommand(["ipset", "restore"]));
    assert.ok(!isReadCommand(["nft", "flush", "ruleset"]));
    assert.ok(!isReadCommand(["nft", "-f", "/tmp/x"]));
    assert.ok(!isReadCommand(["cilium-dbg", "bpf", "ipmasq", "delete", "10.0.0.0/8"]));
    assert.ok(!isReadCommand(["cilium", "config", "EnableIPMasqAgent=false"]));
    assert.ok(isReadCommand(captureCommand("10.20.30.40", 10)));
    assert.ok(!isReadCommand(["iptables", "-F"]));
    assert.ok(!isReadCommand(["sysctl", "-w", "net.ipv4.ip_forward=1"]));
    assert.ok(!isReadCommand(["sh", "-c", "iptables-save"]));
    assert.ok(!isReadCommand([...captureCommand("10.20.30.40", 10), "-c", "1"]));
  });
});

describe("collector manifests", () => {
  it("names stay valid DNS labels (<= 63 chars, lower case) for any node name", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (node) => {
        const n = collectorName("ab12cd", node);
        return n.length <= 63 && /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(n);
      }),
    );
    assert.notEqual(collectorName("r", "node-a"), collectorName("r", "node-b"));
  });

  it("a collector pod is pinned to its node, host-network, self-ending, labelled and expiring", () => {
    const now = new Date("2026-11-29T10:00:00Z");
    const p = collectorPod(
      { runId: "ab12cd", image: "img", namespace: "kube-system", lifetimeSeconds: 300, now },
      "n1",
    ) as {
      metadata: { labels: Record<string, string>; annotations: Record<string, string> };
      spec: {
        nodeName: string;
        hostNetwork: boolean;
        activeDeadlineSeconds: number;
        restartPolicy: string;
        automountServiceAccountToken: boolean;
      };
    };
    assert.equal(p.spec.nodeName, "n1");
    assert.equal(p.spec.hostNetwork, true);
    assert.equal(p.spec.activeDeadlineSeconds, 300);
    assert.equal(p.spec.restartPolicy, "Never");
    assert.equal(p.spec.automountServiceAccountToken, false);
    assert.equal(p.metadata.labels["app.kubernetes.io/managed-by"], "podpath");
    assert.equal(p.metadata.annotations["podpath.dev/expires-at"], "2026-11-29T10:05:00.000Z");
    const ds = collectorDaemonSet(
      { runId: "ab12cd", image: "img", namespace: "kube-system", lifetimeSeconds: 300, now },
      ["a", "b"],
    );
    assert.match(
      JSON.stringify(ds),
      /"matchFields":\[\{"key":"metadata.name","operator":"In","values":\["a","b"\]\}\]/,
    );
  });
});

describe("collector capabilities", () => {
  it("NET_ADMIN and NET_RAW only; a capturing run adds SETUID and SETGID for tcpdump's user change", () => {
    const now = new Date("2026-11-29T10:00:00Z");
    const base = {
      runId: "ab12cd",
      image: "img",
      namespace: "kube-system",
      lifetimeSeconds: 300,
      now,
    };
    const caps = (capture: boolean) =>
      (
        collectorPod({ ...base, capture }, "n1") as {
          spec: {
            containers: { securityContext: { capabilities: { drop: string[]; add: string[] } } }[];
          };
        }
      ).spec.containers[0]?.securityContext.capabilities;
    assert.deepEqual(caps(false), { drop: ["ALL"], add: ["NET_ADMIN", "NET_RAW"] });
    assert.deepEqual(caps(true), {
      drop: ["ALL"],
      add: ["NET_ADMIN", "NET_RAW", "SETUID", "SETGID"],
    });
  });
});

describe("collectorCommand", () => {
  const spec = (now: Date, lifetimeSeconds: number) => ({
    runId: "ab12cd",
    image: "img",
    namespace: "kube-system",
    lifetimeSeconds,
    now,
  });
  const runs = (argv: string[]) =>
    new Promise<{ code: number | null; ms: number }>((resolve) => {
      const started = Date.now();
      const c = spawn(argv[0] as string, argv.slice(1), { stdio: "ignore" });
      c.on("exit", (code) => resolve({ code, ms: Date.now() - started }));
    });

  it("the DaemonSet's pods restart (as they must) but their command ends at the run's deadline", () => {
    const now = new Date("2026-11-29T10:00:00Z");
    const ds = collectorDaemonSet(spec(now, 300), ["a"]) as {
      metadata: { annotations: Record<string, string> };
      spec: {
        template: { spec: Record<string, unknown> & { containers: { command: string[] }[] } };
      };
    };
    const pod = ds.spec.template.spec;
    assert.equal(pod["restartPolicy"], "Always");
    assert.equal(pod["activeDeadlineSeconds"], undefined);
    const command = pod.containers[0]?.command ?? [];
    assert.deepEqual(command, collectorCommand(spec(now, 300)));
    const expires = Date.parse(ds.metadata.annotations["podpath.dev/expires-at"] ?? "");
    assert.equal(Number(command.at(-1)) * 1000, expires);
  });

  it("run by sh: ends at once past the deadline, and by itself at a deadline ahead", async () => {
    const past = await runs(collectorCommand(spec(new Date(Date.now() - 60_000), 30)));
    assert.equal(past.code, 0);
    const ahead = await runs(collectorCommand(spec(new Date(), 1)));
    // sleep ends it at the deadline, or timeout does (124): either way it ends by itself
    assert.ok(ahead.code === 0 || ahead.code === 124, String(ahead.code));
    assert.ok(ahead.ms < 5_000, `${ahead.ms} ms`);
  });
});

describe("podState", () => {
  it("is ready only when running with every container ready; gives up on image pull errors", () => {
    assert.deepEqual(
      podState({ status: { phase: "Running", containerStatuses: [{ ready: true }] } }),
      { ready: true },
    );
    assert.equal(
      podState({ status: { phase: "Running", containerStatuses: [{ ready: false }] } }).ready,
      false,
    );
    const s = podState({
      status: {
        phase: "Pending",
        containerStatuses: [{ state: { waiting: { reason: "ErrImagePull", message: "x" } } }],
      },
    });
    assert.equal(s.ready === false && s.hopeless, "ErrImagePull");
  });
  it("never throws on arbitrary status shapes", () => {
    const waiting = fc.record(
      {
        reason: fc.oneof(fc.constantFrom("ErrImagePull", "CrashLoopBackOff"), fc.jsonValue()),
        message: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    const cs = fc.oneof(
      fc.jsonValue(),
      fc.array(
        fc.oneof(
          fc.jsonValue(),
          fc.record(
            {
              ready: fc.jsonValue(),
              state: fc.oneof(
                fc.jsonValue(),
                fc.record({ waiting: fc.oneof(fc.jsonValue(), waiting) }),
              ),
            },
            { requiredKeys: [] },
          ),
        ),
      ),
    );
    const status = fc.oneof(
      fc.jsonValue(),
      fc.record(
        {
          phase: fc.oneof(fc.constantFrom("Running", "Failed", "Pending"), fc.jsonValue()),
          reason: fc.jsonValue(),
          containerStatuses: cs,
        },
        { requiredKeys: [] },
      ),
    );
    fc.assert(
      fc.property(status, (v) => {
        const s = podState({ status: v as never });
        return s.ready === true || typeof s.why === "string";
      }),
      { numRuns: 5000 },
    );
  });
});

describe("API answers", () => {
  it("reads the exit code from the exec status channel", () => {
    assert.equal(exitCodeOf({ metadata: {}, status: "Success" }), 0);
    assert.equal(
      exitCodeOf({
        status: "Failure",
        reason: "NonZeroExitCode",
        details: { causes: [{ reason: "ExitCode", message: "3" }] },
      }),
      3,
    );
    assert.equal(
      exitCodeOf({ status: "Failure", reason: "InternalError", message: "exec: not found" }),
      undefined,
    );
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const c = exitCodeOf(v);
        return c === undefined || Number.isInteger(c);
      }),
    );
  });
  it("turns Status objects and garbage into a ClusterError without throwing", () => {
    const e = errorFromResponse(
      403,
      JSON.stringify({
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message:
          'nodes is forbidden: User "u" cannot list resource "nodes" in API group "" at the cluster scope',
        reason: "Forbidden",
        details: { kind: "nodes" },
        code: 403,
      }),
      { verb: "list", resource: "nodes" },
    );
    assert.equal(e.reason, "Forbidden");
    assert.match(
      explainClusterError(e, { contextName: "gke_prod" }),
      /^Forbidden: the identity of context "gke_prod" may not list nodes cluster-wide; it needs "list" on "nodes"/,
    );
    fc.assert(
      fc.property(fc.integer({ min: 100, max: 599 }), fc.string(), (status, body) => {
        const x = errorFromResponse(status, body, {
          verb: "get",
          resource: "pods",
          name: "p",
          namespace: "n",
        });
        return x instanceof ClusterError && !explainClusterError(x).includes("\n");
      }),
    );
  });
});

describe("collect-objects helpers", () => {
  it("tells a label selector from a list of node names", () => {
    assert.ok(isLabelSelector("cloud.google.com/gke-nodepool=pool-a"));
    assert.ok(isLabelSelector("env!=dev"));
    assert.ok(isLabelSelector("pool in (a,b)"));
    assert.ok(!isLabelSelector("gke-a-1,gke-a-2"));
  });
  it("keeps masquerading DaemonSets only", () => {
    assert.ok(isMasqueradingDaemonSet({ metadata: { name: "ip-masq-agent" } }));
    assert.ok(isMasqueradingDaemonSet({ metadata: { name: "anetd" } }));
    // the other owners' agents, by their install names
    for (const name of [
      "cilium",
      "calico-node",
      "kube-flannel-ds",
      "kube-flannel-ds-amd64",
      "azure-ip-masq-agent",
    ])
      assert.ok(isMasqueradingDaemonSet({ metadata: { name } }), name);
    // the AWS VPC CNI: by name, or by its image when renamed
    assert.ok(isMasqueradingDaemonSet({ metadata: { name: "aws-node" } }));
    assert.ok(
      isMasqueradingDaemonSet({
        metadata: { name: "vpc-cni" },
        spec: {
          template: {
            spec: {
              containers: [
                { image: "602401143452.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni:v1.23.1" },
              ],
            },
          },
        },
      }),
    );
    assert.ok(
      !isMasqueradingDaemonSet({
        metadata: { name: "fluentbit-gke" },
        spec: { template: { spec: { containers: [{ image: "fluent-bit" }] } } },
      }),
    );
  });
  it("resource paths follow the API layout", async () => {
    const { resourcePath } = await import("../k8s/cluster.ts");
    assert.equal(
      resourcePath(RESOURCES.daemonsets, "kube-system"),
      "/apis/apps/v1/namespaces/kube-system/daemonsets",
    );
    assert.equal(resourcePath(RESOURCES.nodes, "ignored", "n1"), "/api/v1/nodes/n1");
  });
});

describe("createLimiter", () => {
  it("never runs more than the limit at once and runs everything", async () => {
    const run = createLimiter(3);
    let active = 0;
    let peak = 0;
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        run(async () => {
          active++;
          peak = Math.max(peak, active);
          await new Promise((r) => setTimeout(r, 1 + (i % 3)));
          active--;
          return i;
        }),
      ),
    );
    assert.equal(peak, 3);
    assert.deepEqual(
      results,
      Array.from({ length: 20 }, (_, i) => i),
    );
  });
});

describe("kubectl YAML styles", () => {
  it("any string and key round-trips through the rendered YAML (YAML 1.1 reader)", async () => {
    const { renderKubectlObject } = await import("./collect-render.ts");
    const { parse } = await import("yaml");
    const text = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.constantFrom(
        "yes",
        "0777",
        "1:20",
        "2026-11-29",
        " a",
        "a ",
        "a\n",
        "a \nb",
        "- x",
        "#x",
        "&a",
        "'",
        '"',
        "~",
        "",
      ),
      fc.string({
        unit: fc.constantFrom("a", " ", "\n", ":", "#", "-", "'", '"', "\t", "0", ".", "ü"),
        maxLength: 12,
      }),
      // long enough to be folded, with runs of spaces that folding must keep
      fc.string({
        unit: fc.constantFrom("ab", " ", "  ", "'", '"', "\t", "\\", "é", ":"),
        minLength: 30,
        maxLength: 90,
      }),
    );
    fc.assert(
      fc.property(
        fc.dictionary(
          text.filter((k) => k !== "__proto__"),
          text,
          { maxKeys: 5, noNullPrototype: true },
        ),
        (data) => {
          const yaml = renderKubectlObject(RESOURCES.configmaps, { metadata: { name: "x" }, data });
          const back = parse(yaml, { version: "1.1" }) as { data?: Record<string, string> };
          assert.deepEqual(back.data ?? {}, data);
        },
      ),
      { numRuns: 1000 },
    );
  });
  it("orders keys as kubectl does: numbers by value, non-letters before letters", async () => {
    const { compareKubectlKeys } = await import("./collect-yaml-style.ts");
    assert.deepEqual(["item10", "item9", "aB", "a_b", "b", "a"].sort(compareKubectlKeys), [
      "a",
      "a_b",
      "aB",
      "b",
      "item9",
      "item10",
    ]);
  });
});
