import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseIptablesSave } from "../../iptables/save-parser.ts";
import { withChainRules } from "./plan-replay.ts";

describe("withChainRules", () => {
  const rules = [
    "-A POSTROUTING -s fd00:88::5/128 -j CNI-abc",
    "-A CNI-abc ! -d ff00::/8 -j MASQUERADE",
  ];

  it("swaps the chains' rules and declares a new chain inside the nat table", () => {
    const dump = "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -j OLD\nCOMMIT\n";
    const out = withChainRules(dump, rules);
    assert.doesNotMatch(out, /-j OLD/);
    assert.match(out, /:CNI-abc - \[0:0\]\n-A POSTROUTING -s fd00:88::5\/128 -j CNI-abc\n/);
    assert.ok(out.endsWith("COMMIT\n"));
  });

  it("gives a dump without a nat table (nothing loaded one) an empty one holding the rules", () => {
    const dump = "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n";
    const out = withChainRules(dump, rules);
    assert.ok(out.startsWith(dump), out);
    const { value, diagnostics } = parseIptablesSave(out, "ip6tables-save");
    assert.deepEqual(
      diagnostics.filter((d) => d.severity === "error"),
      [],
    );
    const nat = value.tables.get("nat");
    assert.equal(nat?.chains.get("POSTROUTING")?.rules.length, 1);
    assert.equal(nat?.chains.get("CNI-abc")?.rules.length, 1);
    assert.ok(nat?.chains.has("PREROUTING") && nat.chains.has("OUTPUT"));
  });
});
