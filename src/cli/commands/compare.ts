// `runner compare A.json B.json`, or several runs per side `runner compare A1 A2 A3 -- B1 B2 B3`: per-row
// ratios, noise-aware with several runs; exit 1 on a regression (a CI gate).
import type { Argv, CommandModule } from "yargs";
import { DEFAULT_THRESHOLD } from "../../metrics/verdict.js";
import { badInput } from "../input.js";

export interface CompareArgs {
  before: string[];
  "--"?: string[];
  threshold: number;
}


/** The two sides: what comes before "--" and after it, or (without "--") exactly one file each. */
function sides(a: CompareArgs): [string[], string[]] {
  if (a["--"] !== undefined) {
    if (!a["--"].length) throw badInput("compare: give the second side's result files after --");
    return [a.before, a["--"]];
  }
  if (a.before.length !== 2) throw badInput(`compare: give two result files, or several per side separated by -- (got ${a.before.length} files)`);
  return [[a.before[0]!], [a.before[1]!]];
}

export const compareCommand: CommandModule<object, CompareArgs> = {
  command: "compare <before..>",
  describe: "Compare result JSON files row by row (several runs per side: A1 A2 -- B1 B2); non-zero exit on a regression",
  builder: (yargs: Argv<object>) =>
    yargs
      .parserConfiguration({ "populate--": true })
      .positional("before", { type: "string", array: true, demandOption: true, describe: "Baseline result JSON(s); then -- and the runs to check (a regular file of at most 64 MiB; SPMD_RUNNER_MAX_INPUT=SIZE raises the cap)" })
      .option("threshold", { type: "number", default: DEFAULT_THRESHOLD, describe: "Allowed slowdown as a fraction (0.05 = 5%)" })
      .check((a) => {
        if (!(a.threshold >= 0 && a.threshold < 1)) throw badInput(`--threshold: expected a fraction in [0, 1), got ${a.threshold}`);
        return true;
      })
      .example("$0 compare base/results.json new/results.json --threshold 0.1", "fail if any row is >10% slower")
      .example("$0 compare a1.json a2.json a3.json -- b1.json b2.json b3.json", "slower only beyond the runs' own spread") as Argv<CompareArgs>,
  handler: async (args) => {
    const { checkComparable, compareRuns, crowdedRuns, formatComparison, loadResults, machineRuns, manifestDifferences, runOf, unsteadyRuns } = await import("../../report/compare.js");
    const [a, b] = sides(args);
    const [before, after] = [a.map(loadResults), b.map(loadResults)];
    checkComparable([...a, ...b], [...before, ...after]);
    const rows = compareRuns(before.map(runOf), after.map(runOf), args.threshold);
    const differences = manifestDifferences(before[0]!.manifest, after[0]!.manifest);
    const notes = [...crowdedRuns([...a, ...b], [...before, ...after]), ...unsteadyRuns("A", a, before), ...unsteadyRuns("B", b, after), ...machineRuns(before, after)];
    process.stdout.write(formatComparison(rows, args.threshold, [before.length, after.length], differences, notes));
    process.exitCode = rows.some((c) => c.regression) ? 1 : 0;
  },
};
