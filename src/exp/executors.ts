// How one repetition of a point is started: the local launcher (`runner launch -n W`) or mpirun; each a normal
// run of the point's job that writes its results into the repetition's folder.
import path from "node:path";
import { PACKAGE_ROOT } from "../version.js";
import type { Executor } from "./file.js";
import type { Point } from "./plan.js";

export const RUNNER_ENTRY = path.join(PACKAGE_ROOT, "runner/index.js");

/** What every repetition's ranks are told: the backend, and where the results go. */
export function runArgs(point: Point, rep: string): string[] {
  return ["--backend", point.params.backend, "--out", path.join(rep, "run"), "--json", path.join(rep, "results.json"), "--quiet"];
}

/** The command line of one repetition. */
export function repetitionCommand(executor: Executor, point: Point, jobFile: string, rep: string, node = process.execPath): string[] {
  const { world_size: w, hosts } = point.params;
  switch (executor.kind) {
    case "local":
      return [node, RUNNER_ENTRY, "launch", "-n", String(w), jobFile, ...runArgs(point, rep)];
    case "mpirun":
      return [
        executor.command, "-np", String(w),
        ...(executor.hostfile ? ["--hostfile", executor.hostfile] : []),
        // As many ranks on each of the point's hosts (the last takes the rest).
        ...(hosts > 1 ? ["--map-by", `ppr:${Math.ceil(w / hosts)}:node`] : []),
        ...executor.args, node, RUNNER_ENTRY, jobFile, ...runArgs(point, rep),
      ];
    case "slurm":
      throw new Error("slurm points run inside batch jobs (exp/slurm.ts)");
  }
}
