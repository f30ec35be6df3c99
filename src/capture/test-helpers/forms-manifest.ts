/**
 * @module capture/test-helpers/forms-manifest — which tcpdump texts of the forms captures are
 * kept as fixtures (fixtures/forms), and the manifest that describes them: the capture each was
 * printed from, its flags, and the printing namespace's names (tests only).
 */
import type { LinkKind } from "./forms.ts";

export interface FixtureText {
  readonly link: Exclude<LinkKind, "other">;
  /** The file's middle part: `any-sll2.<name>.txt`. */
  readonly name: string;
  readonly flags: readonly string[];
  /** Set for a terminal paste: this prompt and the command, then tcpdump's stderr and stdout. */
  readonly prompt?: string;
}

/** The selection committed: every form at least once, kept small. */
export const FIXTURE_TEXTS: readonly FixtureText[] = [
  { link: "sll2", name: "names", flags: [] },
  { link: "sll2", name: "n", flags: ["-n"] },
  { link: "sll2", name: "netvv", flags: ["-netvv"] },
  { link: "sll2", name: "etvv", flags: ["-etvv"] },
  { link: "sll2", name: "ntt", flags: ["-ntt"] },
  { link: "sll2", name: "nttt", flags: ["-nttt"] },
  { link: "sll2", name: "q", flags: ["-q"] },
  { link: "sll2", name: "nA", flags: ["-nA"] },
  { link: "sll2", name: "paste-nn", flags: ["-nn", "-#", "-tttt"], prompt: "root@node-a:~# " },
  { link: "sll", name: "e-ttttt", flags: ["-e", "-ttttt"] },
  { link: "sll", name: "netvv", flags: ["-netvv"] },
  { link: "eth", name: "e", flags: ["-e"] },
  { link: "eth", name: "nt", flags: ["-nt"] },
  { link: "eth", name: "nXX", flags: ["-nXX"] },
  { link: "eth", name: "paste-ttt", flags: ["-ttt"], prompt: "$ sudo " },
];

/** fixtures/forms/forms.json */
export interface FormsManifest {
  /** Address → name in the printing namespace's /etc/hosts. */
  names: Record<string, string>;
  /** Port → name in its /etc/services that podpath's table lacks. */
  services: Record<string, string>;
  /** Interface index → name in the printing namespace (LINUX_SLL2 records carry the index). */
  ifnames: Record<string, string>;
  captures: Partial<Record<LinkKind, string>>;
  texts: { file: string; link: Exclude<LinkKind, "other">; flags: readonly string[] }[];
  /** A live `tcpdump -i any -l` paste, taken beside the LINUX_SLL2 capture. */
  live: string;
}
