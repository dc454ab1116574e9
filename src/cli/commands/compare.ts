// `runner compare A.json B.json`: per-row ratios of two result files; exit 1 on a regression (a CI gate).
import type { Argv, CommandModule } from "yargs";

export interface CompareArgs {
  before: string;
  after: string;
  threshold: number;
}

export const compareCommand: CommandModule<object, CompareArgs> = {
  command: "compare <before> <after>",
  describe: "Compare two result JSON files row by row; non-zero exit on a regression",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("before", { type: "string", demandOption: true, describe: "Baseline result JSON" })
      .positional("after", { type: "string", demandOption: true, describe: "Result JSON to check" })
      .option("threshold", { type: "number", default: 0.05, describe: "Allowed slowdown as a fraction (0.05 = 5%)" })
      .check((a) => {
        if (!(a.threshold >= 0 && a.threshold < 1)) throw new Error(`--threshold: expected a fraction in [0, 1), got ${a.threshold}`);
        return true;
      })
      .example("$0 compare base/results.json new/results.json --threshold 0.1", "fail if any row is >10% slower") as Argv<CompareArgs>,
  handler: async (args) => {
    const { compareResults, formatComparison, loadResults } = await import("../../report/compare.js");
    const a = loadResults(args.before);
    const b = loadResults(args.after);
    const rows = compareResults(a.results, b.results, args.threshold);
    process.stdout.write(formatComparison(rows, args.threshold));
    process.exitCode = rows.some((c) => c.regression) ? 1 : 0;
  },
};
