/**
 * @module evidence/lazy-yaml — the `yaml` package, loaded the first time a document is parsed: a
 * snapshot that holds no YAML or JSON document (a node with only an iptables dump) never pays for
 * loading it. The modules that parse on diagnose's path (evidence/yaml-source, the ip-masq-agent
 * and Cilium config readers) take it from here; every node class test they make (`isMap`,
 * `instanceof Alias`) is on documents this same copy parsed.
 */
import { createRequire } from "node:module";
import type * as Yaml from "yaml";

/** The `yaml` package's exports, as `import * as Yaml from "yaml"` gives them. */
export type YamlLib = typeof Yaml;

let loaded: YamlLib | undefined;

/** The `yaml` package itself, loaded (synchronously) on the first call. */
export function yamlLib(): YamlLib {
  loaded ??= createRequire(import.meta.url)("yaml") as YamlLib;
  return loaded;
}
