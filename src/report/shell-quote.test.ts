import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  ereLiteral,
  guardCommand,
  quoted,
  rawWord,
  sh,
  shellWord,
  UnquotableError,
} from "./shell-quote.ts";

/**
 * The argv bash hands to `grep` when it runs `command`, with every program replaced by a shell
 * function (nothing real runs), in an empty folder whose contents show any injection.
 */
function argvOf(command: string, program = "grep"): { argv: string[]; injected: string[] } {
  const dir = mkdtempSync(join(tmpdir(), "podpath-shq-"));
  try {
    const script = [
      "iptables-save() { :; }",
      "kubectl() { :; }",
      `${program}() { printf '%s\\0' "$@"; }`,
      command,
    ].join("\n");
    const r = spawnSync("bash", ["-c", `${script}`], {
      cwd: dir,
      encoding: "utf8",
      // PATH as it is: an injected `touch` would run and leave its file behind
    });
    const out = r.stdout;
    return { argv: out.split("\0").slice(0, -1), injected: readdirSync(dir) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const HOSTILE = [
  "it's",
  "'; touch pwned; '",
  "$(touch pwned)",
  "`touch pwned`",
  '"; touch pwned; "',
  "a b  c",
  "\\'",
  "*",
  "~",
  "!!",
  "$" + "{HOME}",
  "x;touch pwned",
  "a|touch pwned",
  "",
];

describe("shellWord", () => {
  it("leaves a plain name as it is", () => {
    assert.equal(shellWord("IP-MASQ-AGENT"), "IP-MASQ-AGENT");
    assert.equal(shellWord("node/gke-a-1"), "node/gke-a-1");
  });

  it("makes every hostile value one literal argument that bash parses back", () => {
    for (const v of HOSTILE) {
      const { argv, injected } = argvOf(`grep -E -e ${shellWord(v)} file`);
      assert.deepEqual(argv, ["-E", "-e", v, "file"], JSON.stringify(v));
      assert.deepEqual(injected, [], JSON.stringify(v));
    }
  });

  it("refuses what no quoting shows safely: NUL, newline, CR, ESC, bidi overrides", () => {
    for (const v of ["a\0b", "a\nb", "a\rb", "a\x1b[2Jb", "a\u202eb", "a\u0085b", "a\tb\x7f"]) {
      assert.throws(
        () => shellWord(v),
        (e: unknown) => {
          assert.ok(e instanceof UnquotableError);
          assert.equal(e.code, "ERR_UNQUOTABLE");
          assert.doesNotMatch(e.message, /[\u0000-\u001f\u007f-\u009f\u202a-\u202e]/);
          return true;
        },
      );
    }
  });
});

describe("sh", () => {
  it("quotes every interpolation, keeps raw words and podpath's own text", () => {
    const chain = "X'; touch pwned; echo '";
    const cmd = sh`iptables-save -t nat | grep -E ${`${ereLiteral(chain)}|POSTROUTING`} ${rawWord("-c")}`;
    const { argv, injected } = argvOf(cmd);
    assert.deepEqual(argv, ["-E", "X'; touch pwned; echo '|POSTROUTING", "-c"]);
    assert.deepEqual(injected, []);
    const { status } = spawnSync("bash", ["-n", "-c", cmd]);
    assert.equal(status, 0);
  });

  it("gives a sentence instead of a command when a value cannot be quoted", () => {
    const said = sh`kubectl get node ${"a\nkubectl delete ns prod"}`;
    assert.match(said, /^# no command shown: the value .* holds a control character/);
    assert.equal(said.includes("\n"), false);
  });

  it("keeps a comment naming a node one line", () => {
    const cmd = sh`iptables-save -t nat   # on ${"gke-a-1"}`;
    assert.equal(cmd, "iptables-save -t nat   # on gke-a-1");
  });
});

describe("ereLiteral", () => {
  it("matches the chain name only, metacharacters and all", () => {
    const name = "A.B|C(D)*";
    const re = new RegExp(ereLiteral(name));
    assert.equal(re.test("xA.B|C(D)*y"), true);
    assert.equal(re.test("AxB"), false);
  });
});

describe("guardCommand", () => {
  it("passes podpath's own commands: pipes, redirections, comments with quotes, placeholders", () => {
    for (const cmd of [
      "iptables-save -t nat | grep -E 'IP-MASQ-AGENT|POSTROUTING'   # on gke-a-1",
      "kubectl -n kube-system exec ip-masq-agent-x -- sysctl net.ipv4.ip_forward > SNAPSHOT/x.txt",
      "kubectl -n default delete pod app   # recreated by its controller; the plugin's ADD writes its chain",
      "podpath verify <before-snapshot> <after-snapshot>",
      "kubectl get pods -o jsonpath='{.items[*].metadata.name}'",
    ]) {
      assert.equal(guardCommand(cmd), cmd);
    }
  });

  it("refuses command substitution, expansion and line breaks that would run when pasted", () => {
    for (const cmd of [
      "kubectl get node $(touch pwned)",
      "kubectl get node `touch pwned`",
      "kubectl get node $" + "{IFS}x",
      "kubectl get node a\ntouch pwned",
      "kubectl get node a\rb",
      "kubectl get node 'a' $(x) 'b'",
    ]) {
      const said = guardCommand(cmd);
      assert.match(said, /^# no command shown: /, cmd);
      const { injected } = argvOf(said);
      assert.deepEqual(injected, []);
    }
  });
});

describe("quoted", () => {
  it("always single-quotes, so a plain pattern reads as it did", () => {
    assert.equal(sh`grep -E ${quoted("IP-MASQ-AGENT")}`, "grep -E 'IP-MASQ-AGENT'");
    assert.equal(ereLiteral("-f/etc/passwd"), "[-]f/etc/passwd");
  });
});
