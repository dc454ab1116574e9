import path from "node:path";
import type { NativeCommunicator } from "../comm/native.js";
import type { Job } from "../config/job.js";
import type { Logger } from "../log/logger.js";
import { aggregate } from "../metrics/aggregate.js";
import { graphMetric, isConcurrent, soloProgram } from "../metrics/graph.js";
import { writeNpy } from "../report/npy.js";
import type { Progress } from "../report/progress.js";
import type { ResultRow } from "../results.js";
import type { Plan } from "../plan.js";
import { plan, worldGroups } from "./plan.js";
import { sweepPoints, type SweepPoint } from "./sweep.js";

export interface ExecuteOptions {
  log: Logger;
  /** Each rank's host (Topology.hostOf): where a hierarchical stage that names no layout splits. */
  hostOf: readonly number[];
  /**
   * Each rank writes `<dir>/<stage>/rank<r>.output.npy`, its inputs (`rank<r>.input.npy`, or
   * `rank<r>.input<i>.npy` for several) and any op state (`rank<r>.worker_error.npy`, ...) after every
   * sweep point; the last point's files stay. Overrides the dumpDir a stage may set for itself.
   */
  dumpDir?: string;
  /** Where steps done are reported (report/progress.ts). */
  progress?: Progress;
  /** Keep every iteration's time in the rows (--samples). */
  samples?: boolean;
  /** Time concurrent stages alone over the job's own steps, not a calibration pass (--solo). */
  solo?: boolean;
  /** Report each stage's bytes and time per link class (the hybrid transport, every rank on a host with others). */
  links?: boolean;
  /** Called with each sweep point's rows once they are complete: what a run stopped by a signal keeps. */
  onPoint?: (point: SweepPoint, rows: ResultRow[]) => void;
}

const POLL_MS = 200;

/** Runs one program, feeding the progress display (if any) with the native step counter while it runs. */
async function runWithProgress(comm: NativeCommunicator, program: Plan["program"], onSteps?: (done: number) => void) {
  if (!onSteps) return comm.run(program);
  const timer = setInterval(() => onSteps(comm.stepsDone), POLL_MS);
  try {
    return await comm.run(program);
  } finally {
    clearInterval(timer);
  }
}

/** Op i's output, inputs and state (e.g. the error buffers of estimating stages) as this rank's .npy files. */
function dumpStage(comm: NativeCommunicator, p: Plan, i: number, dir: string): void {
  const file = (what: string) => path.join(dir, `rank${comm.rank}.${what}.npy`);
  const out = comm.output(i);
  writeNpy(file("output"), out.dtype, out.data);
  const inputs = p.program.ops[i]!.inputs;
  inputs.forEach((t, k) => {
    const input = comm.tensor(t);
    writeNpy(file(`input${inputs.length > 1 ? k : ""}`), input.dtype, input.data);
  });
  for (const s of comm.state(i)) writeNpy(file(s.name), s.dtype, s.data);
}

/** Runs every sweep point of the job on this rank; every rank gets the same rows. */
export async function execute(job: Job, comm: NativeCommunicator, o: ExecuteOptions): Promise<ResultRow[]> {
  const rows: ResultRow[] = [];
  const points = sweepPoints(job);
  const perPoint = job.warmup + job.iterations;
  const total = points.length * perPoint;
  const { progress } = o;
  const world = { size: comm.size, hostOf: o.hostOf };
  const groups = worldGroups(job, world);
  try {
    for (const [index, point] of points.entries()) {
      const p = plan(job, world, point, groups);
      o.log.debug(`running ${p.stages.length} stages × ${job.warmup}+${job.iterations} steps at ${JSON.stringify(point)}`);
      // Concurrent stages are timed alone first, left out of the rows, so their outputs are the step loop's.
      const solo = isConcurrent(p) ? await comm.run(soloProgram(p.program, o.solo)) : undefined;
      const results = await runWithProgress(comm, p.program, progress && ((done) => progress.update(index * perPoint + done, total)));
      progress?.update((index + 1) * perPoint, total);
      const pointRows = await aggregate(comm, p, results, job.check, { samples: o.samples, links: o.links });
      const graph = solo && (await graphMetric(comm, p, results, solo));
      const done = pointRows.map((row) => (graph ? { ...row, graph } : row));
      rows.push(...done);
      o.onPoint?.(point, done);
      p.stages.forEach(({ stage, dtype }, i) => {
        // The command line's --dump-dir overrides a stage's own dumpDir, as flags override the job.
        const dumpDir = o.dumpDir ?? ("dumpDir" in stage ? stage.dumpDir : undefined);
        if (dumpDir && dtype) dumpStage(comm, p, i, path.join(dumpDir, stage.id));
      });
    }
  } finally {
    progress?.stop();
  }
  return rows;
}
