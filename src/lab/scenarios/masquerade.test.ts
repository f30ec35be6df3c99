import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { parseScenarioArgs } from "./index.ts";
import {
  allowlistFilterRules,
  MasqueradeOptions,
  planReplica,
  remoteSiteYaml,
} from "./masquerade.ts";
import { agentObjects, kubectlList, nodeObjects } from "./masquerade-cluster.ts";

const FIXTURE = "test/fixtures/lab/ip-masq-agent-misaligned.yaml";
const texts = (c: { nonMasqueradeCIDRs: readonly { text: string }[] | null }) =>
  (c.nonMasqueradeCIDRs ?? []).map((e) => e.text);

describe("parseScenarioArgs", () => {
  it("reads --k v, --k=v and bare flags, keeping positionals", () => {
    const r = parseScenarioArgs(["masquerade", "--a", "1", "--b=2,3", "--c", "--d", "x"]);
    assert.deepEqual(r.positional, ["masquerade"]);
    assert.deepEqual(r.options, { a: "1", b: "2,3", c: true, d: "x" });
  });
});

describe("MasqueradeOptions", () => {
  it("defaults to one agent pool, the node subnet routed back, phase before", () => {
    const o = MasqueradeOptions.parse({});
    assert.deepEqual(o.pools, [{ name: "default", hasAgent: true }]);
    assert.deepEqual(o["routes-back"], ["10.128.0.0/20"]);
    assert.equal(o.phase, "before");
  });
  it("rejects a bad CIDR, a bad pool mode, unknown options and --config with --non-masquerade", () => {
    assert.equal(MasqueradeOptions.safeParse({ "routes-back": "10.0.0.0/40" }).success, false);
    assert.equal(MasqueradeOptions.safeParse({ pools: "a:maybe" }).success, false);
    assert.equal(MasqueradeOptions.safeParse({ pools: "a:agent,a:no-agent" }).success, false);
    assert.equal(MasqueradeOptions.safeParse({ bogus: "1" }).success, false);
    assert.equal(
      MasqueradeOptions.safeParse({ config: "x", "non-masquerade": "10.0.0.0/8" }).success,
      false,
    );
  });
});

describe("planMasquerade", () => {
  it("gives each pool a node; agent nodes get the config, the others the old defaults", () => {
    const plan = planReplica(
      MasqueradeOptions.parse({
        "non-masquerade": "10.4.0.0/14",
        pools: "default:agent,legacy:no-agent",
      }),
    );
    assert.deepEqual(
      plan.nodes.map((n) => [n.name, n.hasAgent, n.internalIp, n.podIp]),
      [
        ["gke-lab-default-0", true, "10.128.0.2", "10.4.0.5"],
        ["gke-lab-legacy-1", false, "10.128.0.3", "10.4.1.5"],
      ],
    );
    assert.deepEqual(texts(plan.current), ["10.4.0.0/14"]);
    assert.deepEqual(texts(plan.old), ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]);
    assert.equal(plan.configError, undefined);
  });
  it("a config the agent rejects keeps the old rules and records the agent's error", () => {
    const plan = planReplica(MasqueradeOptions.parse({ config: FIXTURE }));
    assert.match(plan.configError ?? "", /not aligned to a CIDR block/);
    assert.deepEqual(texts(plan.current), texts(plan.old));
    assert.match(plan.configText, /10\.4\.0\.1\/14/);
  });
  it("names an unreadable --config", () => {
    assert.throws(
      () => planReplica(MasqueradeOptions.parse({ config: "/nonexistent/cfg" })),
      /--config \/nonexistent\/cfg: cannot read/,
    );
  });
});

describe("replica objects", () => {
  const plan = planReplica(MasqueradeOptions.parse({ pools: "default:agent,legacy:no-agent" }));
  const desc = {
    nodes: plan.nodes,
    agentConfig: plan.configText,
    createdAt: "2026-01-01T00:00:00Z",
  };
  it("prints a kubectl List with sorted keys and Nodes carrying podCIDR and InternalIP", () => {
    const text = kubectlList(nodeObjects(desc));
    const doc = parse(text) as {
      kind: string;
      items: {
        spec: { podCIDR: string };
        status: { addresses: { type: string; address: string }[] };
      }[];
    };
    assert.equal(doc.kind, "List");
    assert.ok(text.startsWith("apiVersion: v1\nitems:"));
    assert.deepEqual(
      doc.items.map((n) => n.spec.podCIDR),
      ["10.4.0.0/24", "10.4.1.0/24"],
    );
    assert.equal(
      doc.items[1]?.status.addresses.find((a) => a.type === "InternalIP")?.address,
      "10.128.0.3",
    );
  });
  it("excludes agent-less pools from the DaemonSet and runs agent pods only elsewhere", () => {
    const objs = agentObjects(desc) as { kind: string; spec: Record<string, unknown> }[];
    const ds = objs.find((o) => o.kind === "DaemonSet");
    assert.match(JSON.stringify(ds), /"operator":"NotIn","values":\["legacy"\]/);
    const pods = objs.filter((o) => o.kind === "Pod");
    assert.deepEqual(
      pods.map((p) => p.spec["nodeName"]),
      ["gke-lab-default-0"],
    );
    const cm = objs.find((o) => o.kind === "ConfigMap") as unknown as { data: { config: string } };
    assert.equal(cm.data.config, plan.configText);
  });
  it("writes the far side in the RemoteSite schema without YAML aliases", () => {
    const text = remoteSiteYaml(plan);
    assert.doesNotMatch(text, /[&*]a\d/);
    const site = parse(text) as {
      kind: string;
      routesBack: string[];
      vpn: { localTrafficSelectors: string[] };
    };
    assert.equal(site.kind, "RemoteSite");
    assert.deepEqual(site.routesBack, site.vpn.localTrafficSelectors);
  });
});

describe("allowlistFilterRules", () => {
  it("accepts tcp/5432 to the database from each allowlisted IPv4 source and drops the rest", () => {
    const plan = planReplica(MasqueradeOptions.parse({ allow: "10.4.0.0/14,fd00:4::/48" }));
    const site = parse(remoteSiteYaml(plan)) as {
      allowlists: { sources: string[]; destinations: string[]; ports: string[] }[];
    };
    const text = allowlistFilterRules(plan);
    const lines = text.split("\n");
    // the rules enforce what the site file says: its destination, port and sources
    const list = site.allowlists[0]!;
    assert.deepEqual(list.destinations, ["10.20.30.40/32"]);
    assert.ok(
      lines.includes("-A INPUT -d 10.20.30.40/32 -p tcp -m tcp --dport 5432 -j DB-FIREWALL"),
    );
    assert.deepEqual(
      lines.filter((l) => l.endsWith("-j ACCEPT")),
      ["-A DB-FIREWALL -s 10.4.0.0/14 -j ACCEPT"],
    );
    assert.equal(
      lines.filter((l) => l.startsWith("-A DB-FIREWALL")).at(-1),
      "-A DB-FIREWALL -j DROP",
    );
    assert.ok(text.startsWith("*filter\n") && text.endsWith("COMMIT\n"));
  });
});

describe("option parsing robustness", () => {
  it("parseScenarioArgs and the option schema never throw on arbitrary argv", async () => {
    const fc = (await import("fast-check")).default;
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.string(),
            fc.constantFrom("--pools", "--routes-back", "--config", "--ipv6", "--x="),
          ),
          {
            maxLength: 12,
          },
        ),
        (argv) => {
          const { options } = parseScenarioArgs(argv);
          MasqueradeOptions.safeParse(options);
          return true;
        },
      ),
    );
  });
});
