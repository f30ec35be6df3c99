import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parseCommand, readPrompt } from "./tcpdump-command.ts";
import { collect } from "./test-helpers/projection.ts";

const forms = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "forms");

/** Prompts as shells print them, each before the same tcpdump command. */
const PROMPTS = [
  "$ ",
  "# ",
  "% ",
  "root@gke-node-1:~# ",
  "alice@bastion:/tmp$ ",
  "alice@laptop ~ % ",
  "[root@node-2 ~]# ",
  "MacBook-Pro:~ alice$ ",
  "bash-5.1# ",
  "/ # ",
  "~ $ ",
  "(venv) alice@laptop:~/work$ ",
  "PS C:\\Users\\alice> ",
];

describe("readPrompt", () => {
  for (const p of PROMPTS) {
    it(`reads ${JSON.stringify(p)} as a prompt and the tcpdump command after it`, () => {
      const r = readPrompt(`${p}sudo tcpdump -ni any host 10.20.30.40 and port 5432`);
      assert.equal(r?.command?.iface, "any");
      assert.equal(r?.command?.filter, "host 10.20.30.40 and port 5432");
      assert.deepEqual(readPrompt(p.trimEnd()), {});
    });
  }

  it("takes a prompt running something else as a prompt without a command", () => {
    assert.deepEqual(readPrompt("root@node:~# kubectl get pods -A"), {});
  });

  it("never takes tcpdump's own lines for a prompt", () => {
    for (const f of ["any-sll2.netvv.txt", "any-sll.netvv.txt", "any-live.txt", "va-eth.nXX.txt"])
      for (const line of readFileSync(join(forms, f), "utf8").split("\n").slice(1))
        assert.equal(readPrompt(line), undefined, line);
  });
});

describe("parseCommand", () => {
  it("reads clustered flags, option arguments, the file and the filter", () => {
    const c = parseCommand("sudo tcpdump -netvv -i eth0 -s0 -r /tmp/x.pcap 'tcp port 443'");
    assert.deepEqual(c, {
      text: "tcpdump -netvv -i eth0 -s0 -r /tmp/x.pcap tcp port 443",
      numeric: 1,
      timeFlags: 1,
      linkHeaders: true,
      verbose: 2,
      ascii: false,
      quiet: false,
      iface: "eth0",
      file: "/tmp/x.pcap",
      filter: "tcp port 443",
    });
  });

  it("finds tcpdump behind wrappers and stops at the shell's pipes and redirections", () => {
    const c = parseCommand(
      "kubectl debug node/n1 -it --image=nicolaka/netshoot -- /usr/sbin/tcpdump -nnA -ttttt --interface=any host 10.0.0.1 2>&1 | tee out.txt",
    );
    assert.equal(c?.numeric, 2);
    assert.equal(c?.ascii, true);
    assert.equal(c?.timeFlags, 5);
    assert.equal(c?.iface, "any");
    assert.equal(c?.filter, "host 10.0.0.1");
    assert.equal(parseCommand("ip route get 10.0.0.1"), undefined);
    assert.equal(parseCommand("tcpdump -q")?.numeric, 0);
  });
});

describe("pasted prompts in tcpdump text", () => {
  const text = readFileSync(join(forms, "any-sll2.nttt.txt"), "utf8");

  it("are never bad packet lines, and the command's flags are read", async () => {
    const plain = await collect(new TextEncoder().encode(text), "plain");
    for (const p of PROMPTS) {
      const paste = `${p}tcpdump -nttt -r any-sll2.pcap\n${text}${p}\n${p}exit\n`;
      const r = await collect(new TextEncoder().encode(paste), "paste");
      assert.deepEqual(
        r.diagnostics.filter((d) => d.severity !== "info"),
        [],
        p,
      );
      assert.equal(r.diagnostics.filter((d) => d.code === "TCPDUMP_COMMAND").length, 1, p);
      assert.deepEqual(
        r.packets.map((x) => [x.timeNs, x.line]),
        plain.packets.map((x) => [x.timeNs, (x.line ?? 0) + 1]),
      );
    }
  });

  it("start a new run: its packets may come without times though the first run had them", async () => {
    const timed = readFileSync(join(forms, "any-sll2.n.txt"), "utf8");
    const untimed = readFileSync(join(forms, "va-eth.nt.txt"), "utf8");
    const one = await collect(new TextEncoder().encode(timed), "a");
    const two = await collect(new TextEncoder().encode(untimed), "b");
    // The second prompt repeats the command from the shell's history: no tcpdump to read.
    const paste = `# tcpdump -n -r any-sll2.pcap\n${timed}# !! -t\n${untimed}`;
    const r = await collect(new TextEncoder().encode(paste), "paste");
    assert.deepEqual(
      r.diagnostics.filter((d) => d.severity !== "info"),
      [],
    );
    assert.equal(r.packets.length, one.packets.length + two.packets.length);
    assert.ok(r.packets.slice(one.packets.length).every((p) => p.timeBasis === "none"));
  });

  it("decide -ttt (deltas) from -ttttt (offsets) when the times cannot", async () => {
    // The -ttt deltas up to the first that shrinks: they grow, so alone they read as -ttttt.
    const lines = text.split("\n");
    const ns = (l: string) => Number(/^ 00:00:(\d\d\.\d+)/.exec(l)?.[1] ?? -1);
    let k = 1;
    while (ns(lines[k]!) >= ns(lines[k - 1]!)) k++;
    assert.ok(k >= 2);
    const head = lines.slice(0, k).join("\n");
    const guessed = await collect(new TextEncoder().encode(head), "guess");
    const told = await collect(new TextEncoder().encode(`$ tcpdump -nttt\n${head}`), "told");
    assert.ok(guessed.diagnostics.some((d) => d.code === "TCPDUMP_RELATIVE_TIMES"));
    assert.ok(!told.diagnostics.some((d) => d.code === "TCPDUMP_RELATIVE_TIMES"));
    const sums = told.packets.map((p) => p.timeNs);
    const printed = guessed.packets.map((p) => p.timeNs);
    assert.deepEqual(
      sums,
      printed.map((_, i) => printed.slice(0, i + 1).reduce((a, b) => a + b, 0n)),
    );
  });
});
