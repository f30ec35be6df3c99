/**
 * @module test/e2e/html-layout — what the HTML tests measure in a rendered page, and how a page's
 * layout is compared with its committed baseline. The measuring code runs inside Chromium, so it
 * is a string (the project's TypeScript has no DOM types); everything it returns is plain JSON.
 * Boxes, not pixels: the sections' positions and sizes hold across font hinting and antialiasing,
 * and a change of order, a missing section or a section that grew past the tolerance shows.
 */
import assert from "node:assert/strict";

/** One top-level block of the page (a child of `<body>`) or the first path diagram. */
export interface Box {
  /** `tag.class.class`, and for headings their text: stable names the order is compared by. */
  readonly name: string;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

/** What one rendered page shows, at one viewport width. */
export interface Measure {
  readonly title: string;
  readonly compatMode: string;
  readonly scripts: number;
  readonly scrollWidth: number;
  readonly clientWidth: number;
  /** Elements that stick out of the page on the right without a scrolling box around them. */
  readonly overflowing: readonly string[];
  /** body's visible children, in document order, then `svg#0` (the first path diagram), if any. */
  readonly blocks: readonly Box[];
  /** What a reader sees of each of body's visible children (the first 1,000 characters). */
  readonly blockTexts: readonly string[];
  /** The first path diagram: its box, and whether it is laid out (not in a closed `<details>`). */
  readonly svg: (Box & { readonly visible: boolean }) | null;
  /** What a reader sees (closed `<details>` excluded) and everything the page holds. */
  readonly innerText: string;
  readonly textContent: string;
}

/** Runs in the page (JavaScript in the page itself stays disabled: this is the driver's). */
export const MEASURE = `(() => {
  const de = document.documentElement;
  const round = (n) => Math.round(n);
  const box = (name, el) => {
    const r = el.getBoundingClientRect();
    return { name, x: round(r.left), y: round(r.top + window.scrollY), width: round(r.width), height: round(r.height) };
  };
  const nameOf = (el) => {
    let n = el.tagName.toLowerCase() + [...el.classList].map((c) => "." + c).join("");
    const tag = el.tagName.toLowerCase();
    const head = /^h[1-6]$/.test(tag) ? el : el.querySelector(":scope > h2, :scope > h3, :scope > summary");
    if (head && /^(h[1-6]|section|details)$/.test(tag)) n += ":" + head.textContent.trim().slice(0, 40);
    return n;
  };
  const shown = [...document.body.children]
    .filter((el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; });
  const blocks = shown.map((el) => box(nameOf(el), el));
  const overflowing = [];
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.right <= de.clientWidth + 0.5 || (r.width === 0 && r.height === 0)) continue;
    let p = el.parentElement, clipped = false;
    while (p && p !== document.body) {
      if (getComputedStyle(p).overflowX !== "visible") { clipped = true; break; }
      p = p.parentElement;
    }
    if (!clipped) overflowing.push(nameOf(el) + " right " + round(r.right) + ": " + el.textContent.trim().slice(0, 60));
  }
  const s = document.querySelector("svg");
  let svg = null;
  if (s) {
    const r = s.getBoundingClientRect();
    svg = { ...box("svg#0", s), visible: r.width > 0 && r.height > 0 && s.checkVisibility() };
  }
  return {
    title: document.title,
    compatMode: document.compatMode,
    scripts: document.querySelectorAll("script").length,
    scrollWidth: de.scrollWidth,
    clientWidth: de.clientWidth,
    overflowing: overflowing.slice(0, 5),
    blocks: svg ? [...blocks, box("svg#0", s)] : blocks,
    blockTexts: shown.map((el) => el.innerText.trim().slice(0, 1000)),
    svg,
    innerText: document.body.innerText,
    textContent: document.body.textContent,
  };
})()`;

/**
 * The page's main sections, the ones its layout baseline holds: the verdict (the first block, or
 * the first after the `<h1>`), the headings and sections (not each finding, a list or a table: the
 * content), and the first path diagram.
 */
export function mainSections(blocks: readonly Box[], banner: number): Box[] {
  return blocks.flatMap((b, i) => {
    // by its element alone: the verdict's state (a class) is the answer's, not the layout's
    if (i === banner) return [{ ...b, name: `verdict:${b.name.split(/[.:]/)[0]}` }];
    if (b.name === "svg#0" || /^(h[1-6]|section|details)([:.]|$)/.test(b.name)) {
      return b.name.startsWith("section.finding") ? [] : [b];
    }
    return [];
  });
}

/** How far a box may move or grow before the layout counts as changed (in CSS pixels). */
export function tolerance(base: number): number {
  return Math.max(24, Math.round(base * 0.08));
}

/** The same blocks in the same order, each where the baseline has it, within {@link tolerance}. */
export function assertLayout(
  got: readonly Box[],
  want: readonly Box[],
  what: string,
  regenerate: string,
): void {
  assert.deepEqual(
    got.map((b) => b.name),
    want.map((b) => b.name),
    `${what}: the page's sections differ from the baseline (${regenerate} if on purpose)`,
  );
  got.forEach((g, i) => {
    const w = want[i]!;
    for (const k of ["x", "y", "width", "height"] as const) {
      const d = Math.abs(g[k] - w[k]);
      assert.ok(
        d <= tolerance(w[k]),
        `${what}: ${g.name} ${k} ${g[k]} (baseline ${w[k]}, ±${tolerance(w[k])}); ${regenerate} if on purpose`,
      );
    }
  });
}

/** A PNG's width and height from its IHDR chunk (throws when it is not a PNG). */
export function pngSize(png: Buffer): { width: number; height: number } {
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.ok(png.subarray(0, 8).equals(signature), "screenshot is not a PNG");
  assert.equal(png.subarray(12, 16).toString("latin1"), "IHDR", "PNG without IHDR");
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}
