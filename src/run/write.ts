// The run's results on disk: a new directory per run, and in it the table, JSON, CSV, comms summary and
// HTML report, each written atomically.
import { mkdirSync } from "node:fs";
import path from "node:path";
import type { RunConfig } from "../config/run-config.js";
import { formatCsv } from "../report/csv.js";
import { formatHtml } from "../report/html.js";
import { formatSummary } from "../report/summary.js";
import { makeDirectory, writeFileAtomic } from "../report/write-atomic.js";
import type { ResultDocument } from "../results.js";

/** A new directory per run, never reusing one: `<out>/<job>-<UTC time>[-n]`. */
export function createRunDir(outDir: string, jobName: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  makeDirectory(outDir);
  for (let n = 1; ; n++) {
    const dir = path.join(outDir, `${jobName}-${stamp}${n > 1 ? `-${n}` : ""}`);
    try {
      mkdirSync(dir);
      return dir;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
}

/** Writes every report of `doc`, whose `table` is already formatted, into `runDir` (and the JSON where the configuration asks). */
export async function writeResults(doc: ResultDocument, table: string, runDir: string, output: RunConfig["output"], iterations: number): Promise<void> {
  const json = JSON.stringify(doc, null, 2) + "\n";
  writeFileAtomic(path.join(runDir, "results.json"), json);
  writeFileAtomic(path.join(runDir, "table.txt"), table);
  writeFileAtomic(path.join(runDir, "results.csv"), formatCsv(doc));
  const summary = formatSummary(doc, iterations);
  writeFileAtomic(path.join(runDir, "summary.txt"), summary);
  writeFileAtomic(path.join(runDir, "report.html"), await formatHtml(doc, summary));
  if (output.json) writeFileAtomic(output.json, json);
}
