// `exp compare` and the report's baseline section: two campaigns' rows matched by point coordinates and row,
// each metric judged in its own direction, beyond its tolerance and the repetitions' noise.
import path from "node:path";
import { writeFileAtomic } from "../report/write-atomic.js";
import { campaignRows, compareCampaigns, groupRows, type Change } from "./analyze.js";
import type { LoadedExperiment } from "./file.js";
import { campaignReport } from "./report.js";
import { openStore } from "./store.js";

export { formatChanges, isRegression } from "./analyze.js";

/** A campaign folder, with the experiment that made it where known. */
export interface Side {
  dir: string;
  exp?: LoadedExperiment;
}

const DEFAULT_METRICS = { busbw: "higher", "time.avg_us": "lower" } as const;

async function groupsOf(dir: string) {
  const db = await openStore(dir);
  try {
    return groupRows(campaignRows(db));
  } finally {
    db.close();
  }
}

/** The later side against the earlier: [before, after], or one experiment against its compare.baseline. */
export async function compareSides(sides: Side[], threshold: number): Promise<Change[]> {
  const exp = sides.find((s) => s.exp)?.exp;
  if (sides.length === 1) {
    if (!exp?.baselineDir) throw Object.assign(new Error("exp compare: give two campaigns, or an experiment file with compare.baseline"), { exitCode: 2 });
    sides = [{ dir: exp.baselineDir }, sides[0]!];
  }
  const [before, after] = await Promise.all(sides.map((s) => groupsOf(s.dir)));
  return compareCampaigns(before!, after!, exp?.metrics ?? DEFAULT_METRICS, exp?.compare.tolerance ?? {}, threshold);
}

/** Writes report.html and report.md (DIR/, or `output` and beside it); returns the files written. */
export async function writeCampaignReport(side: Side, baseline?: string, output?: string): Promise<string[]> {
  const baselineDir = baseline ?? side.exp?.baselineDir;
  const changes = baselineDir ? await compareSides([{ dir: baselineDir }, side], 0.05) : undefined;
  const db = await openStore(side.dir);
  try {
    const name = side.exp?.name ?? path.basename(path.resolve(side.dir));
    const { html, markdown } = await campaignReport(name, side.dir, db, changes);
    const htmlFile = output ?? path.join(side.dir, "report.html");
    const mdFile = htmlFile.replace(/\.html?$/, "") + ".md";
    writeFileAtomic(htmlFile, html);
    writeFileAtomic(mdFile, markdown);
    return [htmlFile, mdFile];
  } finally {
    db.close();
  }
}
