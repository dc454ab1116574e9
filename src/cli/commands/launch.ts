// `runner launch -n N JOB.json [run options]`: starts N local ranks, each running
// `runner JOB.json [run options]` (the run command, as the default); `runner launch -n N doctor [options]` starts N ranks of `runner doctor`.

import os from "node:os";
import path from "node:path";
import type { Argv, CommandModule } from "yargs";
import { plural } from "../../config/errors.js";
import { MAX_WORLD } from "../../config/job.js";
import { PACKAGE_ROOT } from "../../version.js";
import { badInput, rankCount } from "../input.js";
import { RUN_OPTIONS, runRequest, type RunOptionArgs } from "../run-options.js";
import { checkDoctorWorld } from "../../doctor/run.js";
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

/**
 * What each rank runs: `JOB [run options]`, or `doctor [its options]`. A job runs as the default command, as
 * under mpirun: for a named one (`run JOB`) yargs lays out the whole help text while the handler starts, some
 * 30 ms of CPU at every rank's start. A bare file name is given as ./NAME, so that none reads as a command.
 */
function rankCommand(argv: LaunchArgs): string[] {
  if (argv.job === DOCTOR) return [DOCTOR, ...forwardedArgs(argv, [...Object.keys(DOCTOR_RUN_OPTIONS), ...Object.keys(DOCTOR_OPTIONS)])];
  return [argv.job.includes("/") ? argv.job : `./${argv.job}`, ...forwardedArgs(argv, Object.keys(RUN_OPTIONS))];
}

/** Said once here, where every rank would otherwise find it alone: times then include waiting for a core. */
function warnOversubscribed(nprocs: number): void {
  const cores = os.availableParallelism();
  if (nprocs > cores) {
    process.stderr.write(`runner launch: ${nprocs} ranks on ${plural(cores, "core")}: the ranks take turns, so times include waiting for a core (results stay exact)\n`);
  }
}

export const launchCommand: CommandModule<object, LaunchArgs> = {
  command: "launch <job>",
  describe: "Start N local ranks of a job (torchrun-style environment)",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("job", { type: "string", demandOption: true, describe: "Job file (JSON), or doctor (a regular file of at most 64 MiB; SPMD_RUNNER_MAX_INPUT=SIZE raises the cap)" })
      .option("nprocs", { alias: "n", requiresArg: true, coerce: rankCount("-n"), describe: `Number of ranks to start, 1 to ${MAX_WORLD} (required)` })
      .options(RUN_OPTIONS)
      .options(DOCTOR_OPTIONS)
      .group(Object.keys(RUN_OPTIONS), "Passed on to every rank's run:")
      .check((argv) => {
        // Named as the README names it, where yargs' demandOption would say "Missing required argument: nprocs".
        if (argv.nprocs === undefined) throw badInput("launch: give the number of ranks to start: -n N");
        // Strict mode does not look past "--", and silently dropping what is there would surprise.
        const doctorOnly = Object.keys(DOCTOR_OPTIONS).filter((k) => argv[k] !== undefined);
        if (argv.job !== DOCTOR && doctorOnly.length > 0) throw badInput(`--${doctorOnly[0]} is an option of doctor only`);
        if (argv.job === DOCTOR && argv.check !== undefined) throw badInput("--check is not an option of doctor");
        if (argv.job === DOCTOR) checkDoctorWorld(argv.nprocs);
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
      ) as Argv<LaunchArgs>,
  handler: async (argv) => {
    const [{ native }, { launch }, { RankErrors }, { interactive, progressBar }, { checkLaunch }, { finishLaunch }] = await Promise.all([
      import("../../comm/native.js"), import("../../launch/launcher.js"), import("../../launch/rank-errors.js"), import("../../report/progress.js"),
      import("../../run/rank.js"), import("../../run/journal.js"),
    ]);
    native(); // without a usable addon, one line saying how to build it, rather than one per rank
    // Bad input said once, here, rather than by every rank.
    if (argv.job !== DOCTOR) checkLaunch(runRequest(argv.job, argv), argv.nprocs);
    warnOversubscribed(argv.nprocs);
    // The ranks' output is piped through here, so the bar is drawn here, fed by rank 0.
    const bar = interactive(argv.quiet ?? false) ? progressBar() : undefined;
    const errors = new RankErrors();
    let runDir: string | undefined;
    const result = await launch({
      nprocs: argv.nprocs,
      command: [process.execPath, RUNNER_ENTRY, ...rankCommand(argv)],
      onProgress: bar && ((done, total) => bar.update(done, total)),
      onRunDir: argv.job === DOCTOR ? undefined : (dir) => (runDir = dir),
      onLine: (rank, stream, line) => {
        if (stream === "stdout" || !errors.take(rank, line)) process[stream].write(`[${rank}] ${line}\n`);
      },
    }).finally(() => bar?.stop());
    const unfinished = runDir === undefined ? undefined : await finishLaunch(runDir, result.by, argv.quiet ?? false);
    // What ended the launch first, then each rank's error once, with the ranks that gave it.
    const lines = [...(result.message ? [result.message] : []), ...errors.lines(), ...(unfinished ? [unfinished] : [])];
    process.stderr.write(lines.map((l) => `${l}\n`).join(""));
    process.exitCode = result.exitCode;
  },
};
