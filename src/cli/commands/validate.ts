// `runner validate JOB.json`: schema and graph checks, no communication.
import type { Argv, CommandModule } from "yargs";
import { rankCount } from "../input.js";
import { BACKENDS } from "../run-options.js";

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
      .positional("job", { type: "string", demandOption: true, describe: "Job file (JSON) (a regular file of at most 64 MiB; SPMD_RUNNER_MAX_INPUT=SIZE raises the cap)" })
      .option("world-size", { alias: "n", requiresArg: true, coerce: rankCount("-n"), describe: "Also check roots, node layouts and each rank's memory against this many ranks" })
      .option("backend", { type: "string", choices: BACKENDS, default: "auto", describe: "Also check what this backend cannot run (MPI's int counts, shm-only algorithms)" })
      .example("$0 validate jobs/quickstart.json", "")
      .example("$0 validate -n 8 jobs/quickstart.json", "roots must be < 8")
      .example("$0 validate -n 8 --backend mpi jobs/quickstart.json", "sizes within MPI's int counts") as Argv<ValidateArgs>,
  handler: async (args) => {
    const [{ loadJob }, { formatSize }, { plannedPlace }, { checkPlaceMemory }, { validateBackend, validateGraph }, { schedule }, { sweepPoints }] = await Promise.all([
      import("../../config/load.js"), import("../../config/size.js"), import("../../env/discover.js"), import("../../graph/memory-plan.js"),
      import("../../graph/validate.js"), import("../../graph/schedule.js"), import("../../graph/sweep.js"),
    ]);
    const job = loadJob(args.job);
    // A job that records its world size (a replayed trace's) is checked at it unless -n names another.
    const n = args["world-size"] ?? job.worldSize;
    validateGraph(job, args.job, n);
    validateBackend(job, args.job, args.backend, n);
    let memory = "";
    if (n !== undefined) {
      // The run's own check: this host's ranks together (the launcher's, or all n as `launch -n` starts them),
      // and a device where its runtime loads (a GPU node; on a login node, the bytes alone).
      const place = plannedPlace(n, process.env);
      const { plan, device } = checkPlaceMemory(job, args.job, place);
      memory = `; ${formatSize(plan.total)} per rank${job.device === "cpu" ? "" : `, ${formatSize(device)} of them on its ${job.device} device`}`;
      memory += `, ${place.localSize} rank${place.localSize === 1 ? "" : "s"} on this host`;
    }
    const order = schedule(job).map((s) => s.id);
    const points = sweepPoints(job).length;
    console.log(`${args.job}: ok (${order.length} stages in order ${order.join(", ")}; ${points} sweep point${points === 1 ? "" : "s"}${memory})`);
  },
};
