// `runner launch -n N JOB.json [run options]`: starts N local ranks, each running
// `runner run JOB.json [run options]`.

import path from "node:path";
import type { Argv, CommandModule } from "yargs";
import { PACKAGE_ROOT } from "../../version.js";
import { RUN_OPTIONS, type RunOptionArgs } from "../run-options.js";

const RUNNER_ENTRY = path.join(PACKAGE_ROOT, "runner/index.js");

type RunOptionName = keyof typeof RUN_OPTIONS;

export interface LaunchArgs extends RunOptionArgs {
  job: string;
  nprocs: number;
}

/** The run options the user gave, in a form `run` parses back to the same values. */
function forwardedRunArgs(argv: LaunchArgs): string[] {
  const forwarded: string[] = [];
  for (const name of Object.keys(RUN_OPTIONS) as RunOptionName[]) {
    const given: unknown = argv[name];
    if (given === undefined) continue;
    // A repeated option arrives as an array; each occurrence is passed on as given.
    for (const value of Array.isArray(given) ? given : [given]) {
      if (typeof value === "boolean") forwarded.push(value ? `--${name}` : `--no-${name}`);
      else forwarded.push(`--${name}`, String(value));
    }
  }
  return forwarded;
}

export const launchCommand: CommandModule<object, LaunchArgs> = {
  command: "launch <job>",
  describe: "Start N local ranks of a job (torchrun-style environment)",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("job", { type: "string", demandOption: true, describe: "Job file (JSON)" })
      .option("nprocs", { alias: "n", type: "number", demandOption: true, describe: "Number of ranks to start" })
      .options(RUN_OPTIONS)
      .group(Object.keys(RUN_OPTIONS), "Passed on to every rank's run:")
      .check((argv) => {
        if (!Number.isInteger(argv.nprocs) || argv.nprocs < 1) {
          throw new Error(`--nprocs must be an integer >= 1, got ${argv.nprocs}`);
        }
        // Strict mode does not look past "--", and silently dropping what is there would surprise.
        const stray = argv._.slice(1);
        if (stray.length > 0) {
          throw new Error(`unexpected arguments: ${stray.join(" ")} (run options go directly after the job file)`);
        }
        return true;
      })
      .example("$0 launch -n 4 jobs/quickstart.json", "Run the quickstart job on 4 local ranks")
      .example(
        "$0 launch -n 2 jobs/onebit.json --backend tcp --iterations 100 --json onebit.json",
        "Two ranks over TCP, 100 timed steps, results written as JSON",
      ),
  handler: async (argv) => {
    const [{ native }, { launch }, { interactive, progressBar }] = await Promise.all([
      import("../../comm/native.js"), import("../../launch/launcher.js"), import("../../report/progress.js"),
    ]);
    native(); // without a usable addon, one line saying how to build it, rather than one per rank
    // The ranks' output is piped through here, so the bar is drawn here, fed by rank 0.
    const bar = interactive(argv.quiet ?? false) ? progressBar() : undefined;
    const result = await launch({
      nprocs: argv.nprocs,
      command: [process.execPath, RUNNER_ENTRY, "run", argv.job, ...forwardedRunArgs(argv)],
      onProgress: bar && ((done, total) => bar.update(done, total)),
    });
    bar?.stop();
    if (result.message) process.stderr.write(`${result.message}\n`);
    process.exitCode = result.exitCode;
  },
};
