// `runner trace import`: files -> readers -> the shared writer -> a job file that validates.
import path from "node:path";
import { ConfigError } from "../config/errors.js";
import { parseJob } from "../config/load.js";
import { validateGraph } from "../graph/validate.js";
import { writeFileAtomic } from "../report/write-atomic.js";
import { dumpTraces } from "./flight-job.js";
import { isDumpInput, readDumps } from "./flight-recorder.js";
import { buildJob, type ImportOptions } from "./job.js";
import type { RankTrace } from "./model.js";
import { TraceError } from "./model.js";
import { readTraces, type ReadOptions } from "./read.js";

/** "resnet-ddp-2rank.et.json.gz" -> "resnet-ddp-2rank". */
function jobName(file: string): string {
  const base = path.basename(file).replace(/(\.gz|\.tgz)?$/i, "").replace(/\.tar$/i, "").replace(/(\.pt)?(\.trace)?(\.et)?(\.json)?$/, "").replace(/(\.kineto|\.\d+)$/, "");
  return base.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 128) || "trace";
}

/** Flight-recorder dumps as the job writer reads traces: the window every member of a group holds. */
async function readDumpTraces(paths: readonly string[], maxBytes?: number) {
  const dumps = await readDumps(paths, maxBytes);
  return { files: dumps.map((d) => d.file), ...dumpTraces(dumps) };
}

/** The job's text and the summary lines; with `output`, the job is written there. */
export async function importTraces(paths: readonly string[], options: ImportOptions & ReadOptions & { output?: string }): Promise<{ text: string; summary: string[] }> {
  const read: { files: string[]; traces: RankTrace[]; notes?: string[] } = await (await isDumpInput(paths) ? readDumpTraces(paths, options.maxBytes) : readTraces(paths, options));
  const { files, traces, notes = [] } = read;
  // Named after what the user gave: a folder's name, or the first file's.
  const imported = buildJob(traces, files, { name: jobName(paths[0]!), ...options });
  imported.summary.push(...notes.map((n) => `note: ${n}`));
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
