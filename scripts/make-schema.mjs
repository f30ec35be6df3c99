/**
 * @module scripts/make-schema — writes docs/schema/<output>.schema.json, the JSON Schema of what
 * each command prints with `-o json` (`-o jsonl` for capture read), generated from the TypeScript
 * types in scripts/make-schema.types.ts (which name the source types each renderer prints) by
 * ts-json-schema-generator. Run: `npm run schema`; `node scripts/make-schema.mjs --check` writes
 * nothing and exits 1 when a committed schema differs from what the types give now.
 *
 * Where the generator describes TypeScript values and not the printed JSON, this script corrects it:
 * - every bigint is printed as a decimal string (report/json.ts, verify's JSON.stringify replacer,
 *   capture/render.ts `timeNs`), and the generator would write `number`: a parser and formatter
 *   added to the generator's chains make a `bigint` `{type: string, pattern: ^-?[0-9]+$}`;
 * - each schema gets `$id` (https://podpath.dev/schema/<name>.schema.json), `title`, a
 *   description, and uses draft-07, the generator's dialect (ajv's default).
 * Types are generated with `additionalProperties: false`: a field a renderer adds and the types do
 * not name fails validation in test/e2e/json-schema.test.ts.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  BaseType,
  createFormatter,
  createParser,
  createProgram,
  SchemaGenerator,
} from "ts-json-schema-generator";

// The generator parses with its own TypeScript (its dependency): use that one's SyntaxKind.
const ts = createRequire(createRequire(import.meta.url).resolve("ts-json-schema-generator"))(
  "typescript",
);

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outDir = join(root, "docs/schema");

/** File name (without .schema.json), the type, the command whose output it is. */
export const OUTPUTS = [
  ["diagnose", "DiagnoseOutput", "podpath diagnose SNAPSHOT -o json"],
  ["plan-masquerade", "PlanMasqueradeOutput", "podpath plan masquerade SNAPSHOT -o json"],
  ["plan-vpn", "PlanVpnOutput", "podpath plan vpn SNAPSHOT --pod NS/NAME -o json"],
  ["capture-read", "CaptureReadPacket", "podpath capture read FILE -o jsonl (one object per line)"],
  ["capture-read-json", "CaptureReadOutput", "podpath capture read FILE -o json"],
  ["capture-flows", "CaptureFlowsOutput", "podpath capture flows FILE [--host IP] -o json"],
  [
    "capture-talkers",
    "CaptureTalkersOutput",
    "podpath capture flows FILE --host IP --talkers -o json",
  ],
  ["ipmasq-config", "IpmasqConfigOutput", "podpath ipmasq config [FILE] -o json"],
  ["ipmasq-rules", "IpmasqRulesOutput", "podpath ipmasq rules [FILE] -o json"],
  ["admission-check", "AdmissionCheckOutput", "podpath admission check MANIFEST -o json"],
  ["probe", "ProbeOutput", "podpath probe ... -o json"],
  ["lab-replay", "LabReplayOutput", "podpath lab replay --iptables FILE --flow SRC->DST -o json"],
  ["lab-run", "LabRunOutput", "podpath lab run SCENARIO --out DIR -o json"],
  ["collect", "CollectOutput", "podpath collect --out DIR -o json"],
  // Last: its shape (the change record) is the one most often extended.
  ["verify", "VerifyOutput", "podpath verify BEFORE AFTER -o json"],
];

const BIGINT_AS_PRINTED = {
  type: "string",
  pattern: "^-?[0-9]+$",
  description: "A bigint, printed as a decimal string.",
};

/**
 * The generator writes a bigint as `number`; podpath prints it as a decimal string. This parser
 * (tried before the generator's own) and formatter describe it as printed.
 */
class BigIntAsString extends BaseType {
  getId() {
    return "bigint-as-string";
  }
}
const bigintParser = {
  supportsNode: (node) => node.kind === ts.SyntaxKind.BigIntKeyword,
  createType: () => new BigIntAsString(),
};
const bigintFormatter = {
  supportsType: (type) => type instanceof BigIntAsString,
  getDefinition: () => ({ ...BIGINT_AS_PRINTED }),
  getChildren: () => [],
};

/** The schemas as the types give them now: [file name, text]. */
export function generateSchemas() {
  const config = {
    path: join(root, "scripts/make-schema.types.ts"),
    tsconfig: join(root, "tsconfig.json"),
    skipTypeCheck: true,
    expose: "export",
    jsDoc: "extended",
    additionalProperties: false,
    topRef: false,
    sortProps: true,
  };
  const program = createProgram(config);
  const generator = new SchemaGenerator(
    program,
    createParser(program, config, (chain) => chain.addNodeParser(bigintParser)),
    createFormatter(config, (chain) => chain.addTypeFormatter(bigintFormatter)),
    config,
  );
  return OUTPUTS.map(([name, type, command]) => {
    const generated = generator.createSchema(type);
    const { $schema, description: _typeDoc, ...rest } = generated;
    const schema = {
      $schema,
      $id: `https://podpath.dev/schema/${name}.schema.json`,
      title: `podpath ${name} output`,
      description: `What \`${command}\` prints (type ${type} in scripts/make-schema.types.ts). JSON contract schemaVersion 1.`,
      ...rest,
    };
    return [`${name}.schema.json`, `${JSON.stringify(schema, null, 2)}\n`];
  });
}

function main() {
  const check = process.argv.includes("--check");
  const stale = [];
  mkdirSync(outDir, { recursive: true });
  for (const [file, text] of generateSchemas()) {
    const path = join(outDir, file);
    let current;
    try {
      current = readFileSync(path, "utf8");
    } catch {
      current = undefined;
    }
    if (current === text) continue;
    if (check) stale.push(file);
    else {
      writeFileSync(path, text);
      process.stderr.write(`wrote docs/schema/${file}\n`);
    }
  }
  if (stale.length > 0) {
    process.stderr.write(`docs/schema is stale (run npm run schema): ${stale.join(", ")}\n`);
    process.exit(1);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
