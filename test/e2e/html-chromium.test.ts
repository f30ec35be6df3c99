/**
 * End to end: every HTML answer of the built CLI (dist/cli/main.js), rendered in headless Chromium
 * (Debian's /usr/bin/chromium driven by playwright-core; PODPATH_CHROMIUM names another binary)
 * with JavaScript off and every request but the page's own refused. For each page: no request was
 * attempted, no `<script>`, standards mode, the expected title; the verdict is the first block
 * (after the page's `<h1>` when it has one) and sits in the top of the first screen; the first
 * path diagram, where the answer has paths, is laid out with a non-zero size; nothing widens the
 * page past 1024 or 375 pixels; every evidence line the answer cites is in the page as text; and
 * the sections' boxes match the committed baseline in fixtures/html-layout/ within a tolerance
 * (a full-page screenshot is taken too, and its size checked against the measured page).
 *
 * Regenerate the baselines after an intended change of layout or content:
 *   PODPATH_UPDATE_HTML_LAYOUT=1 node scripts/test.mjs test/e2e/html-chromium
 * Keep the screenshots to look at them: PODPATH_HTML_SCREENSHOTS=/tmp/shots (a folder).
 * Without Chromium the suite fails in CI (CI set) and is skipped with its reason elsewhere.
 * Not here: lab run and collect (a kernel lab or a cluster; their documents render through the
 * same report/document-html as the pages here).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Browser, chromium } from "playwright-core";
import { kernelSkip } from "../../src/lab/kernel-guard.ts";
import { collectFromFakeApi } from "./fake-api-collect.ts";
import {
  assertLayout,
  type Box,
  MEASURE,
  type Measure,
  mainSections,
  pngSize,
} from "./html-layout.ts";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const CHROMIUM = process.env["PODPATH_CHROMIUM"] ?? "/usr/bin/chromium";
const BASELINES = join(import.meta.dirname, "fixtures/html-layout");
const UPDATE = process.env["PODPATH_UPDATE_HTML_LAYOUT"] === "1";
const SHOTS = process.env["PODPATH_HTML_SCREENSHOTS"];
const REGENERATE = "PODPATH_UPDATE_HTML_LAYOUT=1 node scripts/test.mjs test/e2e/html-chromium";
/** The page is served from this address; any other request is refused and recorded. */
const PAGE_URL = "http://podpath.invalid/report.html";
const VIEWPORTS = [
  { width: 1024, height: 768 },
  { width: 375, height: 667 },
] as const;

const VPN_POD = "vpn/vpn-openvpn-6d9c7b5f4-x2x7k";
const CITATION = /(?:[\w.-]+\/)*[\w.-]+\.(?:txt|yaml|yml|json|pcap|pcapng|conf|ovpn):\d+/g;

interface Case {
  /** The baseline's file name (without .json). */
  readonly name: string;
  readonly args: readonly string[];
  readonly title: RegExp;
  /** The verdict: what the first block (after the `<h1>`, if any) must say. */
  readonly banner: RegExp;
  /** The answer cites file:line evidence, so the page must show at least one. */
  readonly cites: boolean;
  /** Runs on this machine's kernel (lab replay): only where the lab can run. */
  readonly kernel?: boolean;
  /** Makes the page itself (commands that need a folder or a fake API server beside them). */
  readonly page?: () => Promise<string>;
}

/** A scratch folder removed when the tests end. */
function scratch(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `collect -o html` against test/k8s-api's fake API server. */
async function collectPage(): Promise<string> {
  const r = await collectFromFakeApi(scratch("podpath-html-collect-"), "html");
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}

const EXAMPLES = [
  "snat-exception-list",
  "snat-exception-list-fixed",
  "eks-exclude-snat-cidrs",
  "vpn-forwarding-off",
  "vpn-forwarding-fixed",
] as const;

const CASES: readonly Case[] = [
  ...EXAMPLES.map(
    (e): Case => ({
      name: `diagnose-${e}`,
      args: ["diagnose", `examples/${e}`],
      title: new RegExp(`^podpath diagnose: examples/${e}/?$`),
      banner: /^(BROKEN|HEALTHY|UNDECIDED) /,
      cites: true,
    }),
  ),
  {
    name: "plan-masquerade",
    args: ["plan", "masquerade", "examples/snat-exception-list"],
    title: /^podpath plan masquerade examples\/snat-exception-list: strategy narrow$/,
    banner: /the fix alone breaks the connection/i,
    cites: true,
  },
  {
    name: "plan-vpn",
    args: ["plan", "vpn", "examples/vpn-forwarding-off", "--pod", VPN_POD],
    title: new RegExp(`^Durable forwarding for VPN pod ${VPN_POD}$`),
    banner: /net\.ipv4\.ip_forward = 0/,
    cites: true,
  },
  {
    name: "verify-masquerade",
    args: ["verify", "examples/snat-exception-list", "examples/snat-exception-list-fixed"],
    title: /^Change record: ip-masq-agent non-masquerade list$/,
    banner: /Verdict: [A-Z]/,
    cites: false,
  },
  {
    name: "verify-vpn",
    args: ["verify", "examples/vpn-forwarding-off", "examples/vpn-forwarding-fixed"],
    title: /^Change record: VPN pod forwarding$/,
    banner: /Verdict: [A-Z]/,
    cites: true,
  },
  {
    name: "admission-check",
    args: [
      "admission",
      "check",
      "src/agents/pod-security/fixtures/manifests/vpn-namespace-baseline.yaml",
    ],
    title: /^podpath admission check$/,
    banner: /^DENIED Deployment vpn\/openvpn/,
    cites: true,
  },
  {
    name: "capture-read",
    args: ["capture", "read", "src/capture/fixtures/captured/any-sll2.pcap"],
    title: /^podpath capture read src\/capture\/fixtures\/captured\/any-sll2\.pcap$/,
    banner: /^27 packets \(pcap\)$/,
    cites: false,
  },
  {
    name: "capture-flows",
    args: ["capture", "flows", "src/capture/fixtures/captured/any-sll2.pcap"],
    title: /^podpath capture flows$/,
    banner: /27 packets, 9 conversations$/,
    cites: false,
  },
  {
    name: "ipmasq-config",
    args: ["ipmasq", "config", "src/agents/ip-masq-agent/fixtures/configmap-onprem.yaml"],
    title: /^podpath ipmasq config$/,
    banner: /^nonMasqueradeCIDRs:/,
    cites: true,
  },
  {
    name: "ipmasq-rules",
    args: ["ipmasq", "rules", "src/agents/ip-masq-agent/fixtures/configmap-onprem.yaml"],
    title: /^podpath ipmasq rules: the iptables-restore input$/,
    banner: /^\*nat\n/,
    cites: false,
  },
  {
    // real pings to loopback only: the transcript is this machine's, the layout is the same
    name: "probe-loopback",
    args: ["probe", "--peer", "127.0.0.1", "--count", "1", "--timeout-ms", "1000"],
    title: /^podpath probe$/,
    banner: /^every probed hop answered$/,
    cites: false,
  },
  {
    name: "lab-replay",
    args: [
      "lab",
      "replay",
      "--iptables",
      "examples/snat-exception-list/nodes/gke-lab-default-0/iptables-save.txt",
      "--flow",
      "10.4.0.5,10.20.30.40:5432",
    ],
    title: /^podpath lab replay$/,
    banner: /^verdict\s+agree\n/,
    cites: true,
    kernel: true,
  },
  {
    name: "collect",
    args: ["collect"],
    title: /^podpath collect/,
    banner: /^snapshot\s/,
    cites: false,
    page: collectPage,
  },
  {
    name: "lab-run",
    args: ["lab", "run", "masquerade"],
    title: /^podpath lab run/,
    banner: /^snapshot written to /,
    cites: false,
    kernel: true,
    page: async () =>
      podpath([
        "lab",
        "run",
        "masquerade",
        "--out",
        join(scratch("podpath-html-lab-"), "snap"),
        "-o",
        "html",
      ]),
  },
];

function podpath(args: readonly string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, NO_COLOR: "1" },
  });
  assert.ok([0, 1].includes(r.status ?? -1), `podpath ${args.join(" ")}: ${r.status} ${r.stderr}`);
  return r.stdout;
}

/** Whitespace as a browser collapses it, so a cited line compares with the page's text. */
const squash = (s: string) => s.replace(/\s+/g, " ").trim();

/**
 * The file:line citations and cited lines the answer holds, read from its JSON or text, and
 * (diagnose) the verdict's summary from its JSON.
 */
function citations(c: Case): { refs: string[]; lines: string[]; verdict?: string } {
  if (c.page) return { refs: [], lines: [] };
  if (c.args[0] === "diagnose") {
    type Cite = { file: string; line: number; text?: string };
    const json = JSON.parse(podpath([...c.args, "-o", "json"])) as {
      verdict: { summary: string };
      findings: { evidence: Cite[] }[];
      paths: { hops: { evidence?: Cite }[] }[];
    };
    const ev = [
      ...json.findings.flatMap((f) => f.evidence),
      ...json.paths.flatMap((p) => p.hops.flatMap((h) => (h.evidence ? [h.evidence] : []))),
    ];
    return {
      verdict: squash(json.verdict.summary),
      refs: [...new Set(ev.map((e) => `${e.file}:${e.line}`))],
      // a path's hops cite lines by file:line only; the findings show the lines themselves
      lines: json.findings.flatMap((f) =>
        f.evidence.flatMap((e) => (e.text ? [squash(e.text)] : [])),
      ),
    };
  }
  const text = c.args[0] === "ipmasq" ? podpath([...c.args, "-o", "md"]) : podpath(c.args);
  return { refs: [...new Set(text.match(CITATION) ?? [])], lines: [] };
}

function chromiumSkip(): false | string {
  if (existsSync(CHROMIUM)) return false;
  const why = `${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`;
  if (process.env["CI"]) throw new Error(`the HTML tests must run in CI, but ${why}`);
  return `HTML rendering skipped locally: ${why}`;
}

describe("every HTML answer rendered in headless Chromium (built CLI)", {
  skip: chromiumSkip(),
}, () => {
  let browser: Browser | undefined;
  before(async () => {
    assert.ok(existsSync(CLI), "dist/cli/main.js is missing: npx tsc -p tsconfig.build.json");
    browser = await chromium.launch({ executablePath: CHROMIUM });
  });
  after(async () => {
    await browser?.close();
  });

  /** The page at one width: measured, its screenshot taken, every request recorded. */
  async function render(page: string, width: number, height: number, shot: string) {
    const context = await browser!.newContext({
      javaScriptEnabled: false,
      viewport: { width, height },
      deviceScaleFactor: 1,
    });
    try {
      const tab = await context.newPage();
      const refused: string[] = [];
      await tab.route("**/*", (route) => {
        if (route.request().url() === PAGE_URL)
          return route.fulfill({ contentType: "text/html; charset=utf-8", body: page });
        refused.push(route.request().url());
        return route.abort("blockedbyclient");
      });
      const requests: string[] = [];
      tab.on("request", (r) => requests.push(r.url()));
      await tab.goto(PAGE_URL, { waitUntil: "load" });
      const m = await tab.evaluate<Measure>(MEASURE);
      const png = await tab.screenshot({ fullPage: true });
      if (SHOTS) {
        mkdirSync(SHOTS, { recursive: true });
        writeFileSync(join(SHOTS, `${shot}-${width}.png`), png);
      }
      const docHeight = await tab.evaluate<number>("document.documentElement.scrollHeight");
      return { m, png, docHeight, refused, requests };
    } finally {
      await context.close();
    }
  }

  for (const c of CASES) {
    const skip = c.kernel ? kernelSkip() : false;
    it(`podpath ${c.args.join(" ")} -o html`, { skip }, async () => {
      const page = c.page ? await c.page() : podpath([...c.args, "-o", "html"]);
      assert.ok(page.startsWith("<!doctype html>"), `${c.name}: the page does not start with it`);
      const cited = citations(c);
      if (c.cites) assert.ok(cited.refs.length > 0, `${c.name}: the answer cites no evidence`);
      const hasPaths = c.args[0] === "diagnose";
      const baselineFile = join(BASELINES, `${c.name}.json`);
      const baseline: Record<string, Box[]> = UPDATE
        ? {}
        : (JSON.parse(readFileSync(baselineFile, "utf8")) as Record<string, Box[]>);

      for (const { width, height } of VIEWPORTS) {
        const what = `${c.name} at ${width}px`;
        const { m, png, docHeight, refused, requests } = await render(page, width, height, c.name);
        assert.deepEqual(requests, [PAGE_URL], `${what}: the page asked for more than itself`);
        assert.deepEqual(refused, [], `${what}: requests refused`);
        assert.equal(m.scripts, 0, `${what}: <script> elements`);
        assert.equal(m.compatMode, "CSS1Compat", `${what}: not in standards mode`);
        assert.match(m.title, c.title, `${what}: title`);

        // the verdict first: after the page's own heading, nothing before it, in the first screen
        const blocks = m.blocks.filter((b) => b.name !== "svg#0");
        const first = blocks[0]?.name.startsWith("h1") ? 1 : 0;
        const banner = blocks[first];
        assert.ok(banner, `${what}: an empty page`);
        assert.match(
          m.blockTexts[first] ?? "",
          c.banner,
          `${what}: the first block is not the verdict`,
        );
        if (cited.verdict !== undefined)
          assert.ok(
            squash(m.blockTexts[first] ?? "").includes(cited.verdict),
            `${what}: the banner does not say the JSON verdict «${cited.verdict}»`,
          );
        assert.ok(
          banner.y < height / 4,
          `${what}: the verdict starts at ${banner.y}px, below the screen's top quarter`,
        );
        assert.ok(
          Math.min(banner.y + banner.height, banner.y + 48) <= height,
          `${what}: the verdict's first line is below the first screen`,
        );
        if (hasPaths) {
          assert.ok(m.svg?.visible, `${what}: the path diagram is not shown`);
          assert.ok(m.svg.width > 0 && m.svg.height > 0, `${what}: the path diagram has no size`);
        }

        assert.ok(
          m.scrollWidth <= m.clientWidth,
          `${what}: the page is ${m.scrollWidth}px wide in ${m.clientWidth}px: ${m.overflowing.join("; ")}`,
        );
        assert.deepEqual(m.overflowing, [], `${what}: elements stick out of the page`);

        const text = squash(m.textContent);
        for (const ref of cited.refs) assert.ok(text.includes(ref), `${what}: ${ref} not shown`);
        for (const line of cited.lines)
          assert.ok(text.includes(line), `${what}: the cited line «${line}» not shown`);

        const size = pngSize(png);
        assert.equal(size.width, width, `${what}: screenshot width`);
        assert.equal(size.height, docHeight, `${what}: the screenshot is not the whole page`);

        const sections = mainSections(m.blocks, first);
        if (UPDATE) baseline[String(width)] = sections;
        else assertLayout(sections, baseline[String(width)] ?? [], what, REGENERATE);
      }
      if (UPDATE) {
        mkdirSync(BASELINES, { recursive: true });
        writeFileSync(baselineFile, `${JSON.stringify(baseline, null, 1)}\n`);
      }
    });
  }
});
