// `runner launch -n N JOB.json [run options]`: starts N local ranks, each running
// `runner JOB.json [run options]` (the run command, as the default); `runner launch -n N doctor [options]` starts N ranks of `runner doctor`.

import path from "node:path";
import type { Argv, CommandModule } from "yargs";
import { PACKAGE_ROOT } from "../../version.js";
import { RUN_OPTIONS, type RunOptionArgs } from "../run-options.js";
import { DOCTOR_OPTIONS, DOCTOR_RUN_OPTIONS } from "./doctor.js";

/** The job name that launches `runner doctor` instead of a job file. */
const DOCTOR = "doctor";

const RUNNER_ENTRY = path.join(PACKAGE_ROOT, "runner/index.js");

export interface LaunchArgs extends RunOptionArgs {
  job: string;
  nprocs: number;
  threshold?: number;
  size?: string;
}

/** The options among `names` the user gave, in a form the rank's command parses back to the same values. */
function forwardedArgs(argv: LaunchArgs, names: string[]): string[] {
  const forwarded: string[] = [];
  for (const name of names) {
    const given: unknown = (argv as unknown as Record<string, unknown>)[name];
    if (given === undefined) continue;
    // A repeated option arrives as an array; each occurrence is passed on as given.
    for (const value of Array.isArray(given) ? given : [given]) {
      if (typeof value === "boolean") forwarded.push(value ? `--${name}` : `--no-${name}`);
      else forwarded.push(`--${name}`, String(value));
    }
  }
  return forwarded;
}

/** A check's failure is bad input: exit code 2 (cli/index.ts). */
const badInput = (message: string) => Object.assign(new Error(message), { exitCode: 2 });

/**
 * What each rank runs: `JOB [run options]`, or `doctor [its options]`. A job runs as the default command, as
 * under mpirun: for a named one (`run JOB`) yargs lays out the whole help text while the handler starts, some
 * 30 ms of CPU at every rank's start. A bare file name is given as ./NAME, so that none reads as a command.
 */
function rankCommand(argv: LaunchArgs): string[] {
  if (argv.job === DOCTOR) return [DOCTOR, ...forwardedArgs(argv, [...Object.keys(DOCTOR_RUN_OPTIONS), ...Object.keys(DOCTOR_OPTIONS)])];
  return [argv.job.includes("/") ? argv.job : `./${argv.job}`, ...forwardedArgs(argv, Object.keys(RUN_OPTIONS))];
}

/**
 * A job that records its world size, launched at another: one line here rather than one per rank. A job
 * that does not load is left to the ranks, which say why as they would under mpirun.
 */
async function checkJobWorld(file: string, nprocs: number): Promise<void> {
  const [{ loadJob }, { checkWorldSize }] = await Promise.all([import("../../config/load.js"), import("../../graph/validate.js")]);
  let job;
  try {
    job = loadJob(file);
  } catch {
    return;
  }
  checkWorldSize(job, file, nprocs);
}

export const launchCommand: CommandModule<object, LaunchArgs> = {
  command: "launch <job>",
  describe: "Start N local ranks of a job (torchrun-style environment)",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("job", { type: "string", demandOption: true, describe: "Job file (JSON), or doctor" })
      .option("nprocs", { alias: "n", type: "number", demandOption: true, describe: "Number of ranks to start" })
      .options(RUN_OPTIONS)
      .options(DOCTOR_OPTIONS)
      .group(Object.keys(RUN_OPTIONS), "Passed on to every rank's run:")
      .check((argv) => {
        if (!Number.isInteger(argv.nprocs) || argv.nprocs < 1) {
          throw badInput(`--nprocs must be an integer >= 1, got ${argv.nprocs}`);
        }
        // Strict mode does not look past "--", and silently dropping what is there would surprise.
        const doctorOnly = Object.keys(DOCTOR_OPTIONS).filter((k) => argv[k] !== undefined);
        if (argv.job !== DOCTOR && doctorOnly.length > 0) throw badInput(`--${doctorOnly[0]} is an option of doctor only`);
        if (argv.job === DOCTOR && argv.check !== undefined) throw badInput("--check is not an option of doctor");
        const stray = argv._.slice(1);
        if (stray.length > 0) {
          throw badInput(`unexpected arguments: ${stray.join(" ")} (run options go directly after the job file)`);
        }
        return true;
      })
      .example("$0 launch -n 4 jobs/quickstart.json", "Run the quickstart job on 4 local ranks")
      .example("$0 launch -n 4 doctor", "Survey the links between 4 local ranks")
      .example(
        "$0 launch -n 2 jobs/onebit.json --backend tcp --iterations 100 --json onebit.json",
        "Two ranks over TCP, 100 timed steps, results written as JSON",
      ),
  handler: async (argv) => {
    const [{ native }, { launch }, { interactive, progressBar }] = await Promise.all([
      import("../../comm/native.js"), import("../../launch/launcher.js"), import("../../report/progress.js"),
    ]);
    native(); // without a usable addon, one line saying how to build it, rather than one per rank
    if (argv.job !== DOCTOR) await checkJobWorld(argv.job, argv.nprocs);
    // The ranks' output is piped through here, so the bar is drawn here, fed by rank 0.
    const bar = interactive(argv.quiet ?? false) ? progressBar() : undefined;
    const result = await launch({
      nprocs: argv.nprocs,
      command: [process.execPath, RUNNER_ENTRY, ...rankCommand(argv)],
      onProgress: bar && ((done, total) => bar.update(done, total)),
    });
    bar?.stop();
    if (result.message) process.stderr.write(`${result.message}\n`);
    process.exitCode = result.exitCode;
  },
};
