// `runner exp run`: the controller, one per campaign (the lock in run.json). It runs the repetitions not yet
// done, one at a time, each as a child process (the executor's command) in a process group of its own that a
// watchdog ends if the controller dies, and marks each done or failed when it ends. Resuming is running it again.
// A SIGINT or SIGTERM goes to the running repetition (whose launcher stops its ranks); the controller waits
// for it, marks nothing, and exits: an unfinished repetition is never done.
import { spawn } from "node:child_process";
import { closeSync, rmSync } from "node:fs";
import { constants } from "node:os";
import path from "node:path";
import { interactive, progressBar, type Progress } from "../report/progress.js";
import { createNewFile, makeDirectory, writeFileAtomic } from "../report/write-atomic.js";
import { clearRunRecord, endRepetition, lockCampaign, pointRecord, processStart, preparePoint, readMarker, repDir, setAside, stalePoints, writeMeasures, writePointRecord, writeRunRecord, type CheckedMarker, type PointRecord, type RunRecord } from "./campaign.js";
import { repetitionCommand, shellQuote, shellWord } from "./executors.js";
import type { LoadedExperiment } from "./file.js";
import { describeParams, taskOrder, type Plan, type Task } from "./plan.js";
import { activeJobs, batchScripts, cancel, cancelFile, drained, submit } from "./slurm.js";
import { syncStore } from "./store.js";

export interface RunOptions {
  dir: string;
  failFast: boolean;
  quiet: boolean;
}

/** How often a repetition's watchdog looks for its controller, and how long SIGTERM has before SIGKILL. */
const WATCH_MS = 200;
const KILL_AFTER_MS = 5000;

/** A full disk's line in a failed repetition's log ("ENOSPC: no space left on device, open '.../results.json'; "), or "". */
const diskFull = (tail: string) => {
  const line = /[^\n]*ENOSPC[^\n]*/.exec(tail)?.[0].trim();
  return line ? `${line}; ` : "";
};

/** A shell's exit code for death by `signal`: 128 + its number. */
const signalCode = (signal: NodeJS.Signals) => 128 + (constants.signals[signal] ?? 0);

/**
 * Watches a repetition's process group from a process of its own: when the controller dies (even by SIGKILL,
 * which it cannot pass on) it sends the group SIGTERM (the launcher stops its ranks as at Ctrl-C), then
 * SIGKILL; when the group is gone it exits. Run as `node -e WATCHDOG CONTROLLER GROUP`.
 */
const WATCHDOG = `const [parent, group] = process.argv.slice(1).map(Number);
const gone = (id) => { try { process.kill(id, 0); return false; } catch (e) { return e.code === "ESRCH"; } };
const send = (signal) => { try { process.kill(-group, signal); } catch {} };
setInterval(() => {
  if (gone(-group)) process.exit(0);
  if (process.ppid === parent) return;
  send("SIGTERM");
  setTimeout(() => { send("SIGKILL"); process.exit(0); }, ${KILL_AFTER_MS}).unref();
}, ${WATCH_MS});`;

/**
 * Runs one repetition to its end, in a process group of its own that a watchdog ends if this process dies;
 * `onStart` gets the group and a way to signal it. The exit code, or the signal's 128 + n.
 */
function runRepetition(argv: string[], env: Record<string, string>, log: string, onStart: (group: number | undefined, kill: (s: NodeJS.Signals) => void) => void): Promise<number> {
  const fd = createNewFile(log);
  const [program, ...args] = argv;
  const child = spawn(program!, args, { env: { ...process.env, ...env }, stdio: ["ignore", fd, fd], detached: true });
  closeSync(fd);
  if (child.pid !== undefined) spawn(process.execPath, ["-e", WATCHDOG, String(process.pid), String(child.pid)], { stdio: "ignore", detached: true }).unref();
  onStart(child.pid, (signal) => child.pid !== undefined && child.exitCode === null && child.kill(signal));
  return new Promise((resolve) => {
    child.on("error", () => resolve(127)); // could not start: no exit event follows
    child.on("exit", (code, signal) => resolve(signal ? signalCode(signal) : (code ?? 1)));
  });
}

/** The repetitions still to run, in the experiment's order; stale points' old files set aside first. */
function pendingTasks(exp: LoadedExperiment, plan: Plan, dir: string, say: (line: string) => void): { tasks: Task[]; records: Map<string, PointRecord> } {
  for (const [id, old] of stalePoints(dir, plan.points)) say(`exp: point ${id} replaces stale ${old.id} (${describeParams(old.params)}); old results kept in ${setAside(dir, old)}`);
  const records = new Map(plan.points.map((p) => [p.id, pointRecord(dir, p, exp.repetitions)]));
  const tasks = taskOrder(exp, plan.points).filter((t) => readMarker(dir, t.point.id, t.rep)?.state !== "done");
  return { tasks, records };
}

/** Stops at SIGINT, SIGTERM or SIGHUP: `onStop` gets the signal; the process does not exit by itself meanwhile. */
function stopOnSignals(onStop: (signal: NodeJS.Signals) => void): { stopped: () => NodeJS.Signals | undefined; release: () => void } {
  let stop: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    stop ??= signal;
    onStop(signal);
  };
  const signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  for (const s of signals) process.on(s, onSignal);
  return { stopped: () => stop, release: () => signals.forEach((s) => process.off(s, onSignal)) };
}

/** How a run ended: repetitions that failed, and the signal that stopped it. */
type Outcome = { failed: number; stop?: NodeJS.Signals };

interface Session {
  exp: LoadedExperiment;
  plan: Plan;
  opts: RunOptions;
  tasks: Task[];
  records: Map<string, PointRecord>;
  jobFiles: Map<string, string>;
  say: (line: string) => void;
  bar?: Progress;
  /** This run's lock record (run.json). */
  lock: RunRecord;
}

/** The line a repetition's end gets (without a progress bar), however it ran: "exp: [3/8] 1a2b... rep 2: done". */
function sayRepetition(s: Session, n: number, task: Task, marker: Pick<CheckedMarker, "state" | "exit_code" | "tail">): void {
  const log = path.join(repDir(s.opts.dir, task.point.id, task.rep), "log.txt");
  const how = marker.state === "done" ? "done" : `FAILED (exit ${marker.exit_code}; ${diskFull(marker.tail ?? "")}${log})`;
  if (s.bar) s.bar.update(n, s.tasks.length);
  else s.say(`exp: [${n}/${s.tasks.length}] ${task.point.id} ${describeParams(task.point.params)} rep ${task.rep}: ${how}`);
}

/** One repetition after another on this machine (local launcher or mpirun); how many failed, and the signal that stopped it. */
async function runHere(s: Session): Promise<Outcome> {
  let killChild: ((sig: NodeJS.Signals) => void) | undefined;
  const signals = stopOnSignals((sig) => killChild?.(sig));
  let failed = 0;
  try {
    for (const [n, { point, rep }] of s.tasks.entries()) {
      if (signals.stopped()) break;
      const record = s.records.get(point.id)!;
      const dir = repDir(s.opts.dir, point.id, rep);
      rmSync(dir, { recursive: true, force: true }); // a failed or interrupted attempt's files
      preparePoint(s.opts.dir, point, { ...record, attempts: ++record.attempts });
      makeDirectory(dir);
      const started = new Date().toISOString();
      const log = path.join(dir, "log.txt");
      const code = await runRepetition(repetitionCommand(s.exp.executor, point, s.jobFiles.get(point.id)!, dir), point.env, log, (group, kill) => {
        killChild = kill;
        if (group !== undefined) writeRunRecord(s.opts.dir, { ...s.lock, group: { id: group, started: processStart(group) } });
      });
      killChild = undefined;
      writeRunRecord(s.opts.dir, s.lock);
      if (signals.stopped()) break; // ended by our signal: neither done nor failed
      const marker = endRepetition(dir, code, started);
      if (marker.state !== "done") failed++;
      sayRepetition(s, n + 1, { point, rep }, marker);
      if (marker.state !== "done" && s.opts.failFast) break;
    }
  } finally {
    signals.release();
  }
  return { failed, stop: signals.stopped() };
}

const POLL_MS = 1000;
/** SLURM's KillWait (30 s by default) and then some: how long a cancelled job may take to go. */
const CANCEL_WAIT_MS = 45_000;

/** Submits the batch jobs and waits for them, counting markers; a signal cancels them. */
async function runSlurm(s: Session): Promise<Outcome> {
  const slurm = s.exp.executor as Extract<LoadedExperiment["executor"], { kind: "slurm" }>;
  for (const { point, rep } of s.tasks) {
    s.records.get(point.id)!.attempts++;
    rmSync(repDir(s.opts.dir, point.id, rep), { recursive: true, force: true }); // a failed attempt's marker must not count
  }
  const cancelled = cancelFile(path.resolve(s.opts.dir));
  rmSync(cancelled, { force: true });
  const ids = submit(batchScripts(s.exp, slurm, s.tasks, s.opts.dir), slurm);
  writeRunRecord(s.opts.dir, { ...s.lock, jobs: ids });
  s.say(`exp: submitted SLURM job${ids.length === 1 ? "" : "s"} ${ids.join(", ")}`);
  // Cancelled from here, the jobs' traps leave the repetitions they interrupt pending (slurm.ts).
  const signals = stopOnSignals(() => {
    writeFileAtomic(cancelled, `${process.pid}\n`);
    cancel(ids);
  });
  const marked = () => s.tasks.map((t) => readMarker(s.opts.dir, t.point.id, t.rep)).filter((m) => m !== undefined);
  // Each repetition said as its marker appears, in the order they end, as runHere says them.
  const said = new Set<Task>();
  const sayEnded = () => {
    for (const t of s.tasks) {
      const m = said.has(t) ? undefined : readMarker(s.opts.dir, t.point.id, t.rep);
      if (m) sayRepetition(s, said.add(t).size, t, m);
    }
  };
  try {
    while (activeJobs(ids).length && !signals.stopped()) {
      sayEnded();
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    // Cancelled: the jobs' traps clear the repetitions they interrupt once SLURM has signalled them.
    if (signals.stopped()) await drained(ids, CANCEL_WAIT_MS, POLL_MS);
    else sayEnded();
  } finally {
    signals.release();
  }
  const markers = marked();
  if (markers.length < s.tasks.length && !signals.stopped()) s.say(`exp: ${s.tasks.length - markers.length} repetitions left no marker (the job was killed outright? see ${path.join(s.opts.dir, "slurm")})`);
  return { failed: markers.filter((m) => m.state === "failed").length, stop: signals.stopped() };
}

/** Runs the pending repetitions under the campaign's lock; the point records written however it ends. */
async function runPending(exp: LoadedExperiment, plan: Plan, opts: RunOptions, say: (line: string) => void, lock: RunRecord): Promise<Outcome> {
  const { tasks, records } = pendingTasks(exp, plan, opts.dir, say);
  writeMeasures(opts.dir, { metrics: exp.metrics, tolerance: exp.compare.tolerance });
  const jobFiles = new Map(plan.points.map((p) => [p.id, preparePoint(opts.dir, p, records.get(p.id)!)]));
  const bar = interactive(opts.quiet) ? progressBar("repetitions") : undefined;
  say(`exp: ${tasks.length} repetition${tasks.length === 1 ? "" : "s"} to run of ${plan.points.length} points, in ${opts.dir}`);
  const session: Session = { exp, plan, opts, tasks, records, jobFiles, say, bar, lock };
  try {
    return await (exp.executor.kind === "slurm" ? runSlurm(session) : runHere(session));
  } finally {
    bar?.stop();
    for (const r of records.values()) writePointRecord(opts.dir, r);
  }
}

/** Runs what is pending; the process's exit code: 0 all done, 1 a point failed, 128 + n interrupted by signal n. */
export async function runExperiment(exp: LoadedExperiment, plan: Plan, opts: RunOptions): Promise<number> {
  const say = (line: string) => void (opts.quiet || process.stderr.write(`${line}\n`));
  const lock = lockCampaign(opts.dir, say);
  let outcome: Outcome | undefined;
  try {
    outcome = await runPending(exp, plan, opts, say, lock);
  } finally {
    clearRunRecord(opts.dir);
    // The index is rebuilt from the files however the run ended; where the run itself failed (a full disk
    // writing a marker), its error is the one to see, and the index's own only said, unless it is the same
    // full disk again: then one line names the file and ENOSPC.
    await syncStore(opts.dir).then((db) => db.close(), (err: Error) => {
      if (outcome) throw err;
      if (!err.message.includes("ENOSPC")) say(`exp: ${err.message}`);
    });
  }
  if (outcome.stop) {
    say(`exp: interrupted by ${outcome.stop}; run again to resume`);
    return signalCode(outcome.stop);
  }
  if (outcome.failed) say(`exp: ${outcome.failed} repetition${outcome.failed === 1 ? "" : "s"} failed (runner exp status shows their logs)`);
  else say(`exp: every repetition done, in ${opts.dir}`);
  return outcome.failed ? 1 : 0;
}

/** What `exp run` would start, one command line per pending repetition; nothing is written. */
export function dryRun(exp: LoadedExperiment, plan: Plan, dir: string): string {
  const tasks = taskOrder(exp, plan.points).filter((t) => readMarker(dir, t.point.id, t.rep)?.state !== "done");
  if (exp.executor.kind === "slurm") return batchScripts(exp, exp.executor, tasks, dir).map((b) => `# ${b.file}\n${b.text}`).join("\n");
  return tasks.map(({ point, rep }) => {
    // Keys are names the schema checked ([A-Za-z_][A-Za-z0-9_]*); every value is quoted.
    const env = Object.entries(point.env).map(([k, v]) => `${k}=${shellQuote(v)} `).join("");
    const jobFile = path.join(dir, "points", point.id, "job.json");
    return `${env}${repetitionCommand(exp.executor, point, jobFile, repDir(dir, point.id, rep)).map(shellWord).join(" ")}\n`;
  }).join("");
}
