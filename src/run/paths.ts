// Where the run writes, made and tried before the ranks meet: a path that cannot be written fails in one
// line naming the option, the path and the OS's reason (exit 2), not after a whole run, and never hangs.
import { statfsSync } from "node:fs";
import path from "node:path";
import type { Job } from "../config/job.js";
import type { RunConfig } from "../config/run-config.js";
import { formatSize } from "../config/size.js";
import { checkWritable, makeDirectory, osReason } from "../report/write-atomic.js";

/** A path the run cannot write to: bad input, like a bad flag. */
export class OutputPathError extends Error {
  readonly exitCode = 2;
}

function fail(option: string, named: string, what: string, err: unknown): never {
  throw new OutputPathError(`${option} ${named}: cannot ${what}: ${osReason(err)}`);
}

/**
 * Makes `dir` and creates and removes a file in it; with `needBytes`, checks the filesystem has that free.
 * `named` is the path as the option gave it, a file in `dir` for --json.
 */
export function prepareDirectory(option: string, dir: string, needBytes = 0, named = dir): void {
  const where = named === dir ? "" : ` ${dir}`;
  try {
    makeDirectory(dir);
  } catch (err) {
    fail(option, named, `create the directory${where}`, err);
  }
  try {
    checkWritable(dir);
  } catch (err) {
    fail(option, named, named === dir ? "write there" : `write in${where}`, err);
  }
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  if (needBytes > free) {
    throw new OutputPathError(`${option} ${dir}: the dumps need about ${formatSize(needBytes)} (${needBytes} bytes) but ${formatSize(free)} (${free} bytes) is free there`);
  }
}

/** Each directory dumps go to, with the option or stage field that names it. */
function dumpDirectories(job: Job, dumpDir: string | undefined): Map<string, string> {
  if (dumpDir) return new Map([[dumpDir, "--dump-dir"]]);
  const dirs = new Map<string, string>();
  job.stages.forEach((s) => {
    if ("dumpDir" in s && s.dumpDir && !dirs.has(s.dumpDir)) dirs.set(s.dumpDir, `stage "${s.id}" dumpDir`);
  });
  return dirs;
}

/**
 * Rank 0 writes the reports (--out, --json); every rank writes its own dumps, `dumpBytes` of them, as do the
 * other `localSize - 1` ranks of its host, likely to the same filesystem.
 */
export function prepareOutputPaths(job: Job, output: RunConfig["output"], dumpDir: string | undefined, at: { rank: number; localSize: number }, dumpBytes: number): void {
  if (at.rank === 0) {
    prepareDirectory("--out", output.dir);
    if (output.json) prepareDirectory("--json", path.dirname(path.resolve(output.json)), 0, output.json);
  }
  for (const [dir, option] of dumpDirectories(job, dumpDir)) prepareDirectory(option, dir, dumpBytes * at.localSize);
}
