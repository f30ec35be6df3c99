/**
 * evidence/unplaced, beside the end-to-end tests in test/e2e/diagnose.test.ts: the address a pod's
 * own files show is offered as --from, a node's rules that a traced path passes are placed, and
 * an IPv4 --dest against IPv6-only rules is named as the IPv6 case is.
 */
import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { parseIp } from "../../net/cidr.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import type { DiagnoseOptions } from "../case.ts";

const EXAMPLE = join(import.meta.dirname, "../../../examples/snat-exception-list");
const RULES = readFileSync(join(EXAMPLE, "nodes/gke-lab-default-0/iptables-save.txt"), "utf8");
const IP_ADDR = readFileSync(
  join(import.meta.dirname, "../../evidence/fixtures/ip-addr.txt"),
  "utf8",
);
const tmp = mkdtempSync(join(tmpdir(), "pp-unplaced-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

function snapshot(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmp, "s-"));
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
  return root;
}

const unplaced = async (root: string, opts: DiagnoseOptions = {}) =>
  (await diagnose(loadSnapshot(openSnapshot(root)), opts)).findings.filter(
    (f) => f.id === "evidence/unplaced",
  );

describe("evidence/unplaced", () => {
  it("offers the address a pod's own ip addr shows as --from", async () => {
    const root = snapshot({
      "nodes/n1/iptables-save.txt": RULES,
      "pods/default/app/ip-addr.txt": IP_ADDR,
    });
    const [f] = await unplaced(root);
    assert.ok(f);
    assert.match(f.explanation, /pods\/default\/app\/ shows the address 10\.244\.1\.5/);
    assert.ok(f.next.some((n) => n.startsWith(`podpath diagnose ${root} --from 10.244.1.5 `)));
  });

  it("places a node's rules once a path is traced through them", async () => {
    const root = snapshot({ "nodes/n1/iptables-save.txt": RULES });
    assert.equal((await unplaced(root)).length, 1);
    const from = { kind: "address", ip: parseIp("10.4.0.5") } as const;
    const dest = { ip: parseIp("10.20.30.40"), text: "10.20.30.40" };
    assert.deepEqual(await unplaced(root, { from, dest }), []);
  });

  it("names an IPv4 --dest against IPv6-only rules, citing the dump", async () => {
    // a minimal ip6tables-save: the question is only which family the snapshot's rules are
    const v6 =
      "*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -s fd00:4::/48 ! -d fd00:4::/48 -j MASQUERADE\nCOMMIT\n";
    const root = snapshot({ "nodes/n1/ip6tables-save.txt": v6 });
    const dest = { ip: parseIp("10.20.30.40"), text: "10.20.30.40" };
    const found = await unplaced(root, { dest });
    const f = found.find((x) => x.title.startsWith("--dest"));
    assert.ok(f, JSON.stringify(found));
    assert.equal(f.title, "--dest 10.20.30.40 is IPv4, but the snapshot holds only IPv6 rules");
    assert.deepEqual(f.evidence, [{ file: "nodes/n1/ip6tables-save.txt", line: 1, text: "*nat" }]);
    assert.ok(
      f.next.some((n) => /chroot \/host iptables-save > .*nodes\/n1\/iptables-save\.txt/.test(n)),
    );
    // the same snapshot with the IPv4 rules too: the family is there, nothing to say
    const both = snapshot({
      "nodes/n1/ip6tables-save.txt": v6,
      "nodes/n1/iptables-save.txt": RULES,
    });
    cpSync(join(EXAMPLE, "cluster"), join(both, "cluster"), { recursive: true });
    const none = await unplaced(both, { dest });
    assert.ok(!none.some((x) => x.title.startsWith("--dest")), JSON.stringify(none));
  });
});
