import path from "node:path";
import type winston from "winston";
import type { NativeCommunicator } from "../comm/native.js";
import type { Job } from "../config/job.js";
import { aggregate } from "../metrics/aggregate.js";
import { writeNpy } from "../report/npy.js";
import type { ResultRow } from "../report/result.js";
import { plan, sweepPoints } from "./plan.js";

export interface ExecuteOptions {
  log: winston.Logger;
  /**
   * Each rank writes `<dir>/<stage>/rank<r>.output.npy` and its inputs (`rank<r>.input.npy`, or
   * `rank<r>.input<i>.npy` for several) after every sweep point; the last point's files stay.
   */
  dumpDir?: string;
}

/** Runs every sweep point of the job on this rank; every rank gets the same rows. */
export async function execute(job: Job, comm: NativeCommunicator, o: ExecuteOptions): Promise<ResultRow[]> {
  const rows: ResultRow[] = [];
  for (const point of sweepPoints(job)) {
    const p = plan(job, comm.size, point);
    o.log.debug(`running ${p.stages.length} stages × ${job.warmup}+${job.iterations} steps${point === undefined ? "" : ` at count ${point}`}`);
    const results = await comm.run(p.program);
    rows.push(...(await aggregate(comm, p, results, job.check)));
    if (o.dumpDir) {
      p.stages.forEach(({ stage, dtype }, i) => {
        if (!dtype) return;
        const dir = path.join(o.dumpDir!, stage.id);
        const out = comm.output(i);
        writeNpy(path.join(dir, `rank${comm.rank}.output.npy`), out.dtype, out.data);
        const inputs = p.program.ops[i]!.inputs;
        inputs.forEach((t, k) => {
          const input = comm.tensor(t);
          writeNpy(path.join(dir, `rank${comm.rank}.input${inputs.length > 1 ? k : ""}.npy`), input.dtype, input.data);
        });
      });
    }
  }
  return rows;
}
