// `exp compare` and the report's baseline section: two campaigns' rows matched by point coordinates and row,
// each metric judged in its own direction, beyond its tolerance and the repetitions' noise.
import path from "node:path";
import { DEFAULT_THRESHOLD } from "../metrics/verdict.js";
import { writeFileAtomic } from "../report/write-atomic.js";
import { campaignMachines, campaignRows, compareCampaigns, groupRows, mixedPathPoints, unsteadyPoints, type CampaignComparison, type Group } from "./analyze.js";
import { readMeasures, type Measures } from "./campaign.js";
import type { LoadedExperiment } from "./file.js";
import { describeParams, type Params } from "./plan.js";
import { campaignReport } from "./report.js";
import { openStore, type PointRow } from "./store.js";

export { formatChanges, comparisonFails } from "./analyze.js";

/** A campaign folder, with the experiment that made it where known. */
export interface Side {
  dir: string;
  exp?: LoadedExperiment;
}

const DEFAULT_MEASURES: Measures = { metrics: { busbw: "higher", "time.avg_us": "lower" }, tolerance: {} };

/** What a side is compared on: its experiment file's metrics, else what its folder recorded when it ran. */
const measuresOf = (s: Side): Measures | undefined => (s.exp ? { metrics: s.exp.metrics, tolerance: s.exp.compare.tolerance } : readMeasures(s.dir));

interface Indexed {
  groups: Group[];
  points: PointRow[];
}

async function indexOf(dir: string): Promise<Indexed> {
  const db = await openStore(dir);
  try {
    return { groups: groupRows(campaignRows(db)), points: db.prepare("SELECT * FROM points").all() as PointRow[] };
  } finally {
    db.close();
  }
}

/** Points with results on one side only, by their parameters. */
function missingPoints(before: PointRow[], after: PointRow[]): string[] {
  const measured = (points: PointRow[]) => new Set(points.filter((p) => p.reps_done > 0).map((p) => describeParams(JSON.parse(p.params_json) as Params)));
  const [b, a] = [measured(before), measured(after)];
  return [...[...b].filter((k) => !a.has(k)).map((k) => `only in the baseline: ${k}`), ...[...a].filter((k) => !b.has(k)).map((k) => `only in the new campaign: ${k}`)];
}

/** The points of either side whose ranks outnumbered a host's cores, once each. */
function crowdedPoints(sides: PointRow[][]): [string, string][] {
  const found = new Map<string, string>();
  for (const p of sides.flat()) if (p.oversubscribed) found.set(describeParams(JSON.parse(p.params_json) as Params), p.oversubscribed);
  return [...found];
}

const pointNames = (points: PointRow[]) => new Map(points.map((p) => [p.point_id, describeParams(JSON.parse(p.params_json) as Params)]));

const fewestReps = (points: PointRow[]) => Math.min(...points.filter((p) => p.reps_done > 0).map((p) => p.reps_done));

/** The later side against the earlier: [before, after], or one experiment against its compare.baseline. */
export async function compareSides(sides: Side[], threshold: number): Promise<CampaignComparison> {
  if (sides.length === 1) {
    if (!sides[0]!.exp?.baselineDir) throw Object.assign(new Error("exp compare: give two campaigns, or an experiment file with compare.baseline"), { exitCode: 2 });
    sides = [{ dir: sides[0]!.exp.baselineDir }, sides[0]!];
  }
  const measures = measuresOf(sides[1]!) ?? measuresOf(sides[0]!) ?? DEFAULT_MEASURES;
  const [before, after] = await Promise.all(sides.map((s) => indexOf(s.dir)));
  const [beforeNames, afterNames] = [pointNames(before!.points), pointNames(after!.points)];
  return {
    changes: compareCampaigns(before!.groups, after!.groups, measures.metrics, measures.tolerance, threshold),
    missing: missingPoints(before!.points, after!.points),
    failed: after!.points.filter((p) => p.state === "failed").length,
    reps: [fewestReps(before!.points), fewestReps(after!.points)],
    oversubscribed: crowdedPoints([before!.points, after!.points]),
    machines: campaignMachines(before!.groups, after!.groups),
    mixedPaths: mixedPathPoints(before!.groups, after!.groups, new Map([...beforeNames, ...afterNames])),
    unsteady: [...unsteadyPoints(`baseline ${sides[0]!.dir}`, before!.groups, beforeNames), ...unsteadyPoints(`new ${sides[1]!.dir}`, after!.groups, afterNames)],
  };
}

/** Writes report.html and report.md (DIR/, or `output` and beside it); returns the files written. */
export async function writeCampaignReport(side: Side, baseline?: string, output?: string): Promise<string[]> {
  const baselineDir = baseline ?? side.exp?.baselineDir;
  const changes = baselineDir ? await compareSides([{ dir: baselineDir }, side], DEFAULT_THRESHOLD) : undefined;
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
