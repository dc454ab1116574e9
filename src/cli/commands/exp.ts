// `runner exp plan|run|status|query|report|compare`: experiment campaigns (DESIGN.md, "Experiments").
import path from "node:path";
import type { Argv, CommandModule } from "yargs";
import { DEFAULT_THRESHOLD } from "../../metrics/verdict.js";
import { badInput } from "../input.js";

interface DirArgs {
  file?: string;
  dir?: string;
}

/** The experiment, its plan and its folder (--dir, else experiments/<name>). */
async function planned(args: DirArgs & { file: string }) {
  const [{ CONTROL, loadExperiment }, { planExperiment }] = await Promise.all([import("../../exp/file.js"), import("../../exp/plan.js")]);
  const exp = loadExperiment(args.file);
  const dir = args.dir ?? path.join("experiments", exp.name);
  // The folder's path is written into batch scripts and command lines, like the experiment file's values.
  if (CONTROL.test(path.resolve(dir))) throw badInput(`--dir ${JSON.stringify(path.resolve(dir))}: a control character in the campaign's path, which would reach a batch script or command line as it is`);
  return { exp, plan: planExperiment(exp), dir };
}

/** The campaign folder of a command whose experiment file is optional. */
async function campaignDir(args: DirArgs): Promise<string> {
  if (args.dir) return args.dir;
  if (!args.file) throw badInput("give the experiment file or --dir DIR");
  const { loadExperiment } = await import("../../exp/file.js");
  return path.join("experiments", loadExperiment(args.file).name);
}

const withDir = <T>(y: Argv<T>) => y.option("dir", { type: "string", requiresArg: true, describe: "The campaign's folder (default: experiments/<name>)" });
const fileArg = <T>(y: Argv<T>, demandOption: boolean) =>
  withDir(y).positional("file", { type: "string", demandOption, describe: "Experiment file (JSON with comments) (a regular file of at most 64 MiB; SPMD_RUNNER_MAX_INPUT=SIZE raises the cap)" });

const plan: CommandModule<object, DirArgs & { file: string }> = {
  command: "plan <file>",
  describe: "Expand and validate every point; show their ids, states, exclusions and stale points",
  builder: (y) => fileArg(y, true) as Argv<DirArgs & { file: string }>,
  handler: async (args) => {
    const { exp, plan: p, dir } = await planned(args);
    const { campaignStatus, formatStatus } = await import("../../exp/status.js");
    const runs = p.points.length * exp.repetitions;
    const executor = p.points[0]!.params.executor;
    process.stdout.write(`# ${exp.name}: ${p.points.length} points, ${p.excluded.length} excluded, ${exp.repetitions} repetition${exp.repetitions === 1 ? "" : "s"} each (${runs} runs, order ${exp.order}, executor ${exp.executor.kind}${executor === exp.executor.kind ? "" : ` (${executor})`})\n`);
    process.stdout.write(formatStatus(campaignStatus(dir, p, exp), false));
  },
};

const run: CommandModule<object, DirArgs & { file: string; "fail-fast": boolean; "dry-run": boolean; quiet: boolean }> = {
  command: "run <file>",
  describe: "Run the pending, failed and stale points' repetitions (run it again to resume)",
  builder: (y) =>
    fileArg(y, true)
      .option("fail-fast", { type: "boolean", default: false, describe: "Stop at the first failed repetition" })
      .option("dry-run", { type: "boolean", default: false, describe: "Print what would run (commands, or SLURM batch scripts) and run nothing" })
      .option("quiet", { type: "boolean", default: false, describe: "No progress on stderr" }) as Argv<DirArgs & { file: string; "fail-fast": boolean; "dry-run": boolean; quiet: boolean }>,
  handler: async (args) => {
    const { exp, plan: p, dir } = await planned(args);
    if (args["dry-run"]) {
      const { dryRun } = await import("../../exp/run.js");
      process.stdout.write(dryRun(exp, p, dir));
      return;
    }
    const { runExperiment } = await import("../../exp/run.js");
    process.exitCode = await runExperiment(exp, p, { dir, failFast: args["fail-fast"], quiet: args.quiet });
  },
};

const status: CommandModule<object, DirArgs & { json: boolean }> = {
  command: "status [file]",
  describe: "Counts by state; each point's state, attempts, exit code, and the log tail of failures",
  builder: (y) => fileArg(y, false).option("json", { type: "boolean", default: false, describe: "The same as JSON" }) as Argv<DirArgs & { json: boolean }>,
  handler: async (args) => {
    const { campaignStatus, formatStatus } = await import("../../exp/status.js");
    const s = args.file ? await planned({ ...args, file: args.file }).then(({ exp, plan: p, dir }) => campaignStatus(dir, p, exp)) : campaignStatus(await campaignDir(args));
    process.stdout.write(args.json ? JSON.stringify(s, null, 2) + "\n" : formatStatus(s, true));
  },
};

const FORMATS = ["table", "csv", "json"] as const;
const query: CommandModule<object, DirArgs & { sql: string; format: (typeof FORMATS)[number] }> = {
  command: "query <sql> [file]",
  describe: "Run SQL over the campaign's database (tables points, rows, env)",
  builder: (y) =>
    fileArg(y, false)
      .positional("sql", { type: "string", demandOption: true, describe: "One SQL statement" })
      .option("format", { choices: FORMATS, default: "table" as const, describe: "Output format" }) as Argv<DirArgs & { sql: string; format: (typeof FORMATS)[number] }>,
  handler: async (args) => {
    const [{ queryStore }, { formatRows }] = await Promise.all([import("../../exp/store.js"), import("../../exp/status.js")]);
    process.stdout.write(formatRows(await queryStore(await campaignDir(args), args.sql), args.format));
  },
};

/** What a campaign is compared on: the experiment's metrics and tolerances where one is given. */
async function campaignSide(target: string, dir?: string) {
  const { existsSync, statSync } = await import("node:fs");
  if (existsSync(target) && statSync(target).isDirectory()) return { dir: target };
  const { loadExperiment } = await import("../../exp/file.js");
  const exp = loadExperiment(target);
  return { dir: dir ?? path.join("experiments", exp.name), exp };
}

const report: CommandModule<object, DirArgs & { output?: string; baseline?: string }> = {
  command: "report [file]",
  describe: "One self-contained HTML report of the campaign (and Markdown beside it)",
  builder: (y) =>
    fileArg(y, false)
      .option("output", { alias: "o", type: "string", requiresArg: true, describe: "The HTML file (default DIR/report.html); the Markdown goes beside it (.md)" })
      .option("baseline", { type: "string", requiresArg: true, describe: "A campaign folder to compare with (default: the experiment's compare.baseline)" }) as Argv<DirArgs & { output?: string; baseline?: string }>,
  handler: async (args) => {
    const { writeCampaignReport } = await import("../../exp/compare.js");
    const side = args.file ? await campaignSide(args.file, args.dir) : { dir: await campaignDir(args) };
    const written = await writeCampaignReport(side, args.baseline, args.output);
    process.stdout.write(`${written.join("\n")}\n`);
  },
};

const compare: CommandModule<object, DirArgs & { a: string; b?: string; threshold: number }> = {
  command: "compare <a> [b]",
  describe: "Compare two campaigns (folders or experiment files), or one experiment with its baseline; exit 1 on a regression",
  builder: (y) =>
    withDir(y)
      .positional("a", { type: "string", demandOption: true, describe: "Baseline campaign (folder or experiment file); alone: an experiment with compare.baseline" })
      .positional("b", { type: "string", describe: "The campaign to check" })
      .option("threshold", { type: "number", default: DEFAULT_THRESHOLD, describe: "Tolerance where the experiment gives none, as a fraction" }) as Argv<DirArgs & { a: string; b?: string; threshold: number }>,
  handler: async (args) => {
    const { compareSides, comparisonFails, formatChanges } = await import("../../exp/compare.js");
    const sides = await Promise.all([args.a, args.b].filter((x): x is string => x !== undefined).map((t) => campaignSide(t, args.b ? undefined : args.dir)));
    const comparison = await compareSides(sides, args.threshold);
    process.stdout.write(formatChanges(comparison));
    process.exitCode = comparisonFails(comparison) ? 1 : 0;
  },
};

export const expCommand: CommandModule<object, object> = {
  command: "exp",
  describe: "Experiment campaigns: plan, run, status, query, report, compare",
  builder: (y) =>
    y.command(plan).command(run).command(status).command(query).command(report).command(compare)
      .demandCommand(1, "give a command: runner exp plan|run|status|query|report|compare")
      .example("$0 exp plan experiments/backends.json", "the points, their ids and states")
      .example("$0 exp run experiments/backends.json", "run what is not done yet")
      .example("$0 exp query \"SELECT backend, max(busbw) FROM rows JOIN points USING (point_id) GROUP BY backend\" --dir experiments/backends", ""),
  handler: () => {},
};
