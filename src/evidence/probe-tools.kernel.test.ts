/**
 * @module evidence/probe-tools.kernel.test — the transcript reader against the real tools, run now:
 * ping, ping6, traceroute, tracepath, mtr, dig, host, BusyBox nslookup, curl, wget (GNU and
 * BusyBox), nc, ncat and telnet (inetutils and BusyBox) probe a client → router → server lab
 * (testdata/probes/tool-lab.ts); each output is read as the lab expects, and every prompt people
 * paste (root `# `, BusyBox, bash, zsh, PowerShell, bare, sudo, kubectl exec) gives the same
 * probes as the canonical `$ ` form. Kernel test: needs root; fails in CI without it, skips locally.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { before, describe, it } from "node:test";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { parseProbeTranscript } from "./probes.ts";
import {
  fits,
  fitting,
  PROMPT_STYLES,
  projectAll,
  restyle,
} from "./testdata/probes/prompt-styles.ts";
import {
  assertExpected,
  runToolLab,
  TOOL_PROGRAMS,
  type ToolRun,
  transcriptOf,
} from "./testdata/probes/tool-lab.ts";

const skip = kernelSkip();

describe("probe transcripts from the real tools", { skip }, () => {
  let runs: ToolRun[] = [];
  let canonical = "";

  before(async () => {
    const missing = TOOL_PROGRAMS.filter(
      (p) => spawnSync("sh", ["-c", `command -v ${p}`]).status !== 0,
    );
    assert.deepEqual(missing, [], "install them (.ci/run lists the Debian packages)");
    runs = await runToolLab({ prefix: "ppt" });
    canonical = transcriptOf(runs);
  });

  it("reads each tool's output as the lab expects", () => {
    const { value, diagnostics } = parseProbeTranscript(canonical, "probes/lab.txt");
    assert.equal(value.commands.length, runs.length);
    value.commands.forEach((c, i) => {
      assert.equal(c.command, runs[i]!.command);
      assertExpected(c, runs[i]!.expect);
    });
    assert.deepEqual(
      diagnostics.filter((d) => d.severity !== "info"),
      [],
      canonical,
    );
  });

  for (const style of PROMPT_STYLES) {
    it(`gives the same probes behind ${style.name}`, () => {
      // a wrapper that quotes with ' takes the commands that hold none
      const text = fitting(canonical, style);
      assert.ok(fits(text, style));
      assert.ok(text.split("\n").filter((l) => l.startsWith("$ ")).length >= 20);
      const wraps = style.wrapsCommand === true;
      const base = parseProbeTranscript(text, "probes/lab.txt").value;
      const styled = parseProbeTranscript(restyle(text, style), "probes/lab.txt").value;
      assert.deepEqual(projectAll(styled, wraps), projectAll(base, wraps));
      for (const c of styled.commands) assert.deepEqual(c.ranIn, style.ranIn);
    });
  }
});
