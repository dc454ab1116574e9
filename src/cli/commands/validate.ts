// `runner validate JOB.json`: schema and graph checks, no communication.
import type { Argv, CommandModule } from "yargs";
import { loadJob } from "../../config/load.js";
import { validateGraph } from "../../graph/validate.js";
import { schedule } from "../../graph/schedule.js";
import { sweepPoints } from "../../graph/sweep.js";

export interface ValidateArgs {
  job: string;
  "world-size"?: number;
}

export const validateCommand: CommandModule<object, ValidateArgs> = {
  command: "validate <job>",
  describe: "Check a job file (schema and graph) without running it",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("job", { type: "string", demandOption: true, describe: "Job file (JSON)" })
      .option("world-size", { alias: "n", type: "number", describe: "Also check roots and node layouts against this many ranks" })
      .example("$0 validate jobs/quickstart.json", "")
      .example("$0 validate -n 8 jobs/quickstart.json", "roots must be < 8") as Argv<ValidateArgs>,
  handler: (args) => {
    const job = loadJob(args.job);
    validateGraph(job, args.job, args["world-size"]);
    const order = schedule(job).map((s) => s.id);
    const points = sweepPoints(job).length;
    console.log(`${args.job}: ok (${order.length} stages in order ${order.join(", ")}; ${points} sweep point${points === 1 ? "" : "s"})`);
  },
};
