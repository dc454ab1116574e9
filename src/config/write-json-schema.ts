// Build step: regenerate schema/*.schema.json from the zod schemas so editors can validate
// and complete job and run-configuration files ("$schema": "../schema/job.schema.json").
import { mkdirSync, writeFileSync } from "node:fs";
import { z } from "zod";
import { jobSchema } from "./job.js";
import { runConfigSchema } from "./run-config.js";

const outDir = new URL("../../schema/", import.meta.url);
mkdirSync(outDir, { recursive: true });

const targets: [string, z.ZodType, string][] = [
  ["job.schema.json", jobSchema, "spmd-runner job"],
  ["run-config.schema.json", runConfigSchema, "spmd-runner run configuration"],
];

for (const [fileName, schema, title] of targets) {
  // "input" describes what a user writes: fields with defaults are optional.
  const generated = z.toJSONSchema(schema, { io: "input" });
  const jsonSchema = { $schema: generated.$schema, title, ...generated };
  writeFileSync(new URL(fileName, outDir), `${JSON.stringify(jsonSchema, null, 2)}\n`);
}
