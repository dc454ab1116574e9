// A job of four sweep points of about 0.8 s each (a compute stage of 250 ms per step, 3 steps): long enough
// for a progress bar to appear and for a signal to land between points.
import { writeFileSync } from "node:fs";
import path from "node:path";

export const SLOW_SWEEP = {
  name: "sweep",
  iterations: 3,
  warmup: 0,
  tensors: { t: { dtype: "float32", count: 64 } },
  stages: [{ id: "ar", op: "allreduce", input: "t" }, { id: "wait", op: "compute", us: 250_000, after: ["ar"] }],
  sweep: { count: [16, 32, 64, 128] },
};

/** Writes the job (with `changes`) to `dir`/sweep.json; returns its path. */
export function writeSlowSweep(dir, changes = {}) {
  const file = path.join(dir, "sweep.json");
  writeFileSync(file, JSON.stringify({ ...SLOW_SWEEP, ...changes }));
  return file;
}
