// How one repetition of a point is started: the local launcher (`runner launch -n W`) or mpirun; each a normal
// run of the point's job that writes its results into the repetition's folder.
import path from "node:path";
import { PACKAGE_ROOT } from "../version.js";
import type { Executor } from "./file.js";
import type { Params, Point } from "./plan.js";

export const RUNNER_ENTRY = path.join(PACKAGE_ROOT, "runner/index.js");

/** A word for sh, always quoted: env values and batch-script words. */
export const shellQuote = (w: string) => `'${w.replace(/'/g, `'\\''`)}'`;

/** A word for sh, quoted only where it needs to be (a dry run's command lines stay readable). */
export const shellWord = (w: string) => (/^[\w@%+=:,./-]+$/.test(w) ? w : shellQuote(w));

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

/** What of an executor shapes a run, in one line: part of every point's id, shown by plan and report. */
export function describeExecutor(e: Executor): string {
  switch (e.kind) {
    case "local":
      return "local";
    case "mpirun":
      return [e.command, ...(e.hostfile ? ["--hostfile", e.hostfile] : []), ...e.args].join(" ");
    case "slurm":
      return ["slurm", ...(e.partition ? [`--partition=${e.partition}`] : []), ...(e.concurrent ? [] : ["--exclusive"]), ...e.sbatch].join(" ");
  }
}

/** The hosts a hostfile's text names (its first word per line; comments and blank lines skipped). */
export function hostfileHosts(text: string): string[] {
  const lines = text.split("\n").map((l) => l.replace(/#.*/, "").trim().split(/\s+/)[0]!);
  return [...new Set(lines.filter((h) => h))];
}

/** The hosts an executor can give: their names, and how many there are in words ("the hostfile names 2"). */
export interface Available {
  names: string[];
  count: (n: number) => string;
}

/** Why the executor cannot start the point (undefined where it can), given the hosts it can give where known. */
export function cannotStart(e: Executor, p: Params, hosts?: Available): string | undefined {
  if (e.kind === "local" && p.backend === "mpi") return "backend mpi needs ranks started by an MPI launcher: use the mpirun or slurm executor";
  if (e.kind === "local" && p.hosts > 1) return `the local executor starts every rank on this host; hosts ${p.hosts} needs the mpirun or slurm executor`;
  if (hosts && p.hosts > hosts.names.length) return `hosts ${p.hosts}, but ${hosts.count(hosts.names.length)}`;
  return undefined;
}
