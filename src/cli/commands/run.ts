// `runner run JOB.json` (also the default command): this process is one rank of the job.
import type { Argv, CommandModule } from "yargs";
import { RUN_OPTIONS, runRequest, type RunOptionArgs } from "../run-options.js";

export interface RunArgs extends RunOptionArgs {
  job: string;
}

export const runCommand: CommandModule<object, RunArgs> = {
  command: ["run <job>", "$0 <job>"],
  describe: "Run a job as one rank (rank, size and master come from the launcher's environment)",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("job", { type: "string", demandOption: true, describe: "Job file (JSON) (a regular file of at most 64 MiB; SPMD_RUNNER_MAX_INPUT=SIZE raises the cap)" })
      .options(RUN_OPTIONS)
      .example("$0 jobs/quickstart.json", "one rank, no launcher")
      .example("mpirun -np 8 node runner jobs/quickstart.json", "under an MPI launcher")
      .example(
        "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 node runner jobs/quickstart.json",
        "one rank of a torchrun-style start",
      ) as Argv<RunArgs>,
  handler: async (a) => {
    // Loaded here, not at the top: `runner --version` and --help need none of a rank's code.
    const { runRank } = await import("../../run/rank.js");
    process.exitCode = await runRank(runRequest(a.job, a));
  },
};
