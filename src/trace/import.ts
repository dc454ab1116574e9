// `runner trace import`: files -> readers -> the shared writer -> a job file that validates.
import path from "node:path";
import { ConfigError } from "../config/errors.js";
import { parseJob } from "../config/load.js";
import { validateGraph } from "../graph/validate.js";
import { writeFileAtomic } from "../report/write-atomic.js";
import { buildJob, type ImportOptions } from "./job.js";
import { TraceError } from "./model.js";
import { readTraces, type ReadOptions } from "./read.js";

/** "resnet-ddp-2rank.et.json.gz" -> "resnet-ddp-2rank". */
function jobName(file: string): string {
  const base = path.basename(file).replace(/(\.gz|\.tgz)?$/i, "").replace(/\.tar$/i, "").replace(/(\.pt)?(\.trace)?(\.et)?(\.json)?$/, "").replace(/(\.kineto|\.\d+)$/, "");
  return base.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 128) || "trace";
}

/** The job's text and the summary lines; with `output`, the job is written there. */
export async function importTraces(paths: readonly string[], options: ImportOptions & ReadOptions & { output?: string }): Promise<{ text: string; summary: string[] }> {
  const { files, traces } = await readTraces(paths, options);
  // Named after what the user gave: a folder's name, or the first file's.
  const imported = buildJob(traces, files, { name: jobName(paths[0]!), ...options });
  const text = `${JSON.stringify(imported.job, null, 2)}\n`;
  const where = options.output ?? "the imported job";
  // What the writer made must be a job the runner takes as it stands: a failure here is this importer's bug.
  try {
    validateGraph(parseJob(text, where), where, imported.job.worldSize as number);
  } catch (error) {
    // An export's stage_options are the file's word, checked here by the job's own schema: bad input, not a bug.
    const carried = imported.traces.find((t) => t.collectives.some((c) => c.stage?.options));
    if (error instanceof ConfigError && carried) throw new TraceError(carried.file, `its stage_options make no valid job: ${error.message}`);
    if (error instanceof ConfigError) throw Object.assign(new Error(`trace import wrote a job that does not validate (a bug): ${error.message}`), { exitCode: 1 });
    throw error;
  }
  if (options.output !== undefined) writeFileAtomic(options.output, text);
  return { text, summary: [...imported.summary, `wrote ${options.output ?? "stdout"}: ${(imported.job.stages as unknown[]).length} stages at ${String(imported.job.worldSize)} ranks`] };
}
