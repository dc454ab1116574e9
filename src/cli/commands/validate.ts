// `runner validate JOB.json`: schema and graph checks, no communication.
import type { Argv, CommandModule } from "yargs";
import { loadJob } from "../../config/load.js";
import { BACKENDS } from "../run-options.js";
import { validateBackend, validateGraph } from "../../graph/validate.js";
import { schedule } from "../../graph/schedule.js";
import { sweepPoints } from "../../graph/sweep.js";

export interface ValidateArgs {
  job: string;
  "world-size"?: number;
  backend: string;
}

export const validateCommand: CommandModule<object, ValidateArgs> = {
  command: "validate <job>",
  describe: "Check a job file (schema and graph) without running it",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("job", { type: "string", demandOption: true, describe: "Job file (JSON)" })
      .option("world-size", { alias: "n", type: "number", describe: "Also check roots and node layouts against this many ranks" })
      .option("backend", { type: "string", choices: BACKENDS, default: "auto", describe: "Also check what this backend cannot run (MPI's int counts, shm-only algorithms)" })
      .example("$0 validate jobs/quickstart.json", "")
      .example("$0 validate -n 8 jobs/quickstart.json", "roots must be < 8")
      .example("$0 validate -n 8 --backend mpi jobs/quickstart.json", "sizes within MPI's int counts") as Argv<ValidateArgs>,
  handler: (args) => {
    const job = loadJob(args.job);
    validateGraph(job, args.job, args["world-size"]);
    validateBackend(job, args.job, args.backend, args["world-size"]);
    const order = schedule(job).map((s) => s.id);
    const points = sweepPoints(job).length;
    console.log(`${args.job}: ok (${order.length} stages in order ${order.join(", ")}; ${points} sweep point${points === 1 ? "" : "s"})`);
  },
};
