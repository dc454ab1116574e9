// Build step: regenerate schema/*.schema.json from the zod schemas so editors can validate
// and complete job, run-configuration and experiment files ("$schema": "../schema/job.schema.json").
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as z from "zod";
import { jobSchema } from "./config/job.js";
import { runConfigSchema } from "./config/run-config.js";
import { experimentSchema } from "./exp/file.js";
import { writeFileAtomic } from "./report/write-atomic.js";

const outDir = fileURLToPath(new URL("../schema/", import.meta.url));

const targets: [string, z.ZodType, string][] = [
  ["job.schema.json", jobSchema, "spmd-runner job"],
  ["run-config.schema.json", runConfigSchema, "spmd-runner run configuration"],
  ["experiment.schema.json", experimentSchema, "spmd-runner experiment"],
];

for (const [fileName, schema, title] of targets) {
  // "input" describes what a user writes: fields with defaults are optional.
  const generated = z.toJSONSchema(schema, { io: "input" });
  const jsonSchema = { $schema: generated.$schema, title, ...generated };
  const file = `${outDir}${fileName}`;
  const text = `${JSON.stringify(jsonSchema, null, 2)}\n`;
  // Unchanged files are left alone: `npm pack` rebuilds while tests may be reading them.
  if (!existsSync(file) || readFileSync(file, "utf8") !== text) writeFileAtomic(file, text);
}
