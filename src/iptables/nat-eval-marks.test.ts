import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseIp } from "../net/cidr.ts";
import { compileNat } from "./nat-eval.ts";
import { parseIptablesSave } from "./save-parser.ts";

/** kube-proxy's mark masquerade behind a mangle table whose rules touch the given mark bits. */
const dump = (mangle: string) => `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
${mangle}
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-POSTROUTING - [0:0]
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
COMMIT
`;
const decide = (mangle: string) =>
  compileNat(parseIptablesSave(dump(mangle), "iptables-save.txt").value, {
    localAddresses: [parseIp("192.168.1.10")],
  }).evaluate({
    src: parseIp("100.64.1.50"),
    dst: parseIp("10.20.30.40"),
    proto: "tcp",
    dport: 5432,
    origin: "pod",
  }).decision;

describe("mark bits the mangle table can set before nat", () => {
  it("the AWS VPC CNI's connmark restore (mask 0x80) leaves kube-proxy's 0x4000 known", () => {
    const aws =
      '-A PREROUTING -i eni+ -m comment --comment "AWS, primary ENI" -j CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80';
    assert.equal(decide(aws), "keep");
  });
  it("a MARK that can set 0x4000 leaves the mark match open", () => {
    assert.equal(decide("-A PREROUTING -j MARK --set-xmark 0x4000/0x4000"), "branches");
    assert.equal(decide("-A PREROUTING -j MARK --set-xmark 0x1/0x1"), "keep");
  });
});
