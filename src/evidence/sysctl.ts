/**
 * @module evidence/sysctl — kernel parameters as `sysctl -a`, `sysctl KEY`, `sysctl -n KEY`,
 * `cat /proc/sys/...` and `key=value` files print them, each value with the line it was read from.
 */
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { lineRef, splitLines } from "./text-lines.ts";

export interface SysctlEntry {
  /** Dotted key as `sysctl -a` prints it (`net.ipv4.ip_forward`). */
  readonly key: string;
  /** The value as printed, surrounding whitespace removed (`1`, `4096\t131072\t6291456`). */
  readonly value: string;
  readonly source: SourceRef;
}

export type SysctlValues = ReadonlyMap<string, SysctlEntry>;

export interface ReadSysctlOptions {
  /**
   * Keys for bare values (`sysctl -n KEY...` prints one value per key, `cat /proc/sys/...` one value),
   * in order. Without it, a bare value is named from a `/proc/sys/...` file path, or reported.
   */
  readonly keys?: readonly string[];
}

const KEY = /^[A-Za-z0-9_][^\s=]*$/;

/**
 * Reads sysctl output. `key = value` and `key=value` lines (the `sysctl` and sysctl.conf forms),
 * comments (`#`, `;`) and blank lines are understood; `sysctl: ...` error lines become notes (info);
 * bare values take their keys from `options.keys` (or from a `/proc/sys/` file name).
 *
 * @example
 *   readSysctl("net.ipv4.ip_forward = 0\n", "pods/vpn/openvpn-0/sysctl.txt").value.get("net.ipv4.ip_forward")?.value // "0"
 *   readSysctl("1\n", "ip_forward.txt", { keys: ["net.ipv4.ip_forward"] })
 */
export function readSysctl(
  text: string,
  file: string,
  options: ReadSysctlOptions = {},
): Parsed<SysctlValues> {
  const out = new Map<string, SysctlEntry>();
  const diagnostics: Diagnostic[] = [];
  const lines = splitLines(text);
  const content = lines.filter((l) => l.text.trim() !== "" && !/^\s*[#;]/.test(l.text));
  const bare = content.length > 0 && content.every((l) => !l.text.includes("="));
  const hintKeys = options.keys ?? keyFromProcPath(file);

  if (bare && hintKeys !== undefined && !content.some((l) => l.text.startsWith("sysctl: "))) {
    content.forEach((l, i) => {
      const key = hintKeys[i];
      const source = lineRef(file, l);
      if (key === undefined) {
        diagnostics.push({
          code: "SYSCTL_SYNTAX",
          severity: "warning",
          message: `bare value ${JSON.stringify(l.text.trim().slice(0, 60))} has no key: ${hintKeys.length} key(s) were given for ${content.length} value(s)`,
          source,
        });
        return;
      }
      out.set(key, { key, value: l.text.trim(), source });
    });
    return { value: out, diagnostics };
  }

  /** The key of the line just read: a repeat continues a multi-line value. */
  let lastKey = "";
  for (const l of content) {
    const source = lineRef(file, l);
    const t = l.text.trim();
    const keyBefore = lastKey;
    lastKey = "";
    if (t.startsWith("sysctl: ")) {
      // e.g. "sysctl: permission denied on key 'fs.protected_hardlinks'" (stderr mixed in): a key
      // the tool could not read, not a problem with the file.
      diagnostics.push({
        code: "SYSCTL_TOOL_ERROR",
        severity: "info",
        message: `sysctl reported: ${t.slice(8, 200)}`,
        source,
      });
      continue;
    }
    const eq = t.indexOf("=");
    const key = eq < 0 ? "" : normalizeKey(t.slice(0, eq).trim());
    if (eq < 0 || !KEY.test(key)) {
      diagnostics.push({
        code: "SYSCTL_SYNTAX",
        severity: "warning",
        message:
          eq < 0
            ? `expected "key = value" (as sysctl prints it), found ${JSON.stringify(t.slice(0, 60))}${
                bare ? "; a bare value needs its key (sysctl -n): pass it as a hint" : ""
              }`
            : `expected a sysctl key before "=", found ${JSON.stringify(t.slice(0, eq).slice(0, 60))}`,
        source,
      });
      continue;
    }
    const value = t.slice(eq + 1).trim();
    const previous = out.get(key);
    if (previous && keyBefore === key) {
      // `sysctl -a` prints a multi-line value (kernel.core_modes) as one `key = line` per line.
      out.set(key, { key, value: `${previous.value}\n${value}`, source: previous.source });
      lastKey = key;
      continue;
    }
    lastKey = key;
    if (previous && previous.value !== value) {
      diagnostics.push({
        code: "SYSCTL_DUPLICATE",
        severity: "warning",
        message: `${key} is set twice (${previous.value} at line ${previous.source.line}, then ${value}); the later value is used, as sysctl -p applies them in order`,
        source,
      });
    }
    out.set(key, { key, value, source });
  }
  return { value: out, diagnostics };
}

/** `net/ipv4/ip_forward` (the slash form sysctl also accepts) as `net.ipv4.ip_forward`. */
function normalizeKey(key: string): string {
  // A key with dots keeps its slashes: they stand for dots inside interface names (eth0/100).
  return key.includes(".") ? key : key.replaceAll("/", ".");
}

function keyFromProcPath(file: string): string[] | undefined {
  const m = /(?:^|\/)proc\/sys\/(.+?)(?:\.txt)?$/.exec(file.replaceAll("\\", "/"));
  return m?.[1] ? [m[1].replaceAll("/", ".")] : undefined;
}
