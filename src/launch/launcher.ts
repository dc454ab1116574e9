// The built-in launcher: starts N local ranks with a torchrun-style environment,
// prefixes their output, and takes the whole job down when one rank fails.

import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { constants } from "node:os";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { LAUNCHER_PID_ENV } from "../env/discover.js";
import { freePort } from "./ports.js";
import { PROGRESS_FD_ENV, RUN_DIR_FD_ENV, RUN_DIR_LINE } from "../report/progress.js";

export type OutputStream = "stdout" | "stderr";

export interface LaunchOptions {
  nprocs: number;
  /** Program and arguments every rank runs. */
  command: string[];
  /** Base environment for the ranks; defaults to this process's. */
  env?: NodeJS.ProcessEnv;
  masterAddr?: string;
  /** Prefix each line with "[rank] " (default true). */
  prefixOutput?: boolean;
  /** Time between SIGTERM and SIGKILL when taking ranks down (default 5000 ms). */
  graceMs?: number;
  /**
   * After one rank failed, how long the others get to fail by themselves before they are signalled
   * (default 2000 ms): a rank that notices a dead peer or an abort says which rank and where, where a
   * SIGTERM would only say that it was stopped.
   */
  settleMs?: number;
  /** Receives each output line instead of this process's stdout/stderr. */
  onLine?: (rank: number, stream: OutputStream, line: string) => void;
  /** Receives rank 0's progress (steps done of total) over a side channel, kept apart from its output. */
  onProgress?: (done: number, total: number) => void;
  /** Receives the run directory rank 0 made, over the same channel: where the launcher finishes results.json. */
  onRunDir?: (dir: string) => void;
}

export interface LaunchResult {
  exitCode: number;
  failedRank?: number;
  message?: string;
  /** The rank that ended the launch, as results.json's `interrupted.by` says it: "rank 1 (SIGKILL)", "rank 1 (stopped)". */
  by?: string;
}

/** A rank's failure, and whether a signal this launcher did not send ended it. */
interface Failure {
  result: LaunchResult;
  killed: boolean;
}

const FORWARDED_SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
// A grandchild that inherited a rank's pipes can hold them open after the rank exits;
// output is not waited for longer than this once the rank itself is gone.
const PIPE_DRAIN_MS = 1000;

function forEachLine(stream: Readable, onLine: (line: string) => void): void {
  // readline also emits a final line that lacks its newline when the stream ends.
  createInterface({ input: stream, crlfDelay: Infinity }).on("line", onLine);
}

function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/**
 * Whether a process is stopped (SIGSTOP, SIGTSTP, a debugger): alive, so no exit names it, but silent, so the
 * others give up on it one by one and the first of them to exit would be taken for the cause.
 */
function isStopped(pid: number): boolean {
  try {
    // /proc/PID/stat: "pid (comm) state ...", comm may hold spaces and parentheses, the state follows the last ")".
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return /^[Tt]/.test(stat.slice(stat.lastIndexOf(")") + 2));
  } catch {
    return false;
  }
}

export async function launch(opts: LaunchOptions): Promise<LaunchResult> {
  const sideChannel = (rank: number) => rank === 0 && (opts.onProgress !== undefined || opts.onRunDir !== undefined);
  if (!Number.isInteger(opts.nprocs) || opts.nprocs < 1) {
    throw new Error(`runner launch: the number of ranks must be an integer >= 1, got ${opts.nprocs}`);
  }
  if (opts.command.length === 0) throw new Error("runner launch: no command to run");
  const masterAddr = opts.masterAddr ?? "127.0.0.1";
  const graceMs = opts.graceMs ?? 5000;
  const settleMs = opts.settleMs ?? 2000;
  const prefix = opts.prefixOutput ?? true;
  const port = await freePort(masterAddr);
  // A fresh token per launch, so a rank left over from another job cannot join this one.
  const token = randomBytes(16).toString("hex");
  const [program, ...args] = opts.command;

  // Unprefixed output with no line consumer is simply inherited, byte for byte.
  const piped = prefix || opts.onLine !== undefined;
  const sink =
    opts.onLine ??
    ((rank: number, stream: OutputStream, line: string) => process[stream].write(`[${rank}] ${line}\n`));

  const children: ChildProcess[] = [];
  const failures: Failure[] = [];
  let stopped: number | undefined;
  let signalled = false;
  let interrupt: NodeJS.Signals | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  let settleTimer: NodeJS.Timeout | undefined;

  const live = (child: ChildProcess) => child.pid !== undefined && child.exitCode === null && child.signalCode === null;
  const findStopped = () => {
    const rank = children.findIndex((c) => live(c) && isStopped(c.pid!));
    if (rank >= 0) stopped ??= rank;
  };
  const signalAll = (signal: NodeJS.Signals) => {
    // From here on a rank that dies by a signal died by this launcher's.
    signalled = true;
    for (const child of children) {
      // No pid means the spawn failed. Node reports that a tick later, and a kill in
      // between would reach kill(0, ...), i.e. our whole process group.
      if (live(child)) child.kill(signal);
    }
  };
  // Ranks get `signal` first so they can clean up; whatever is left after the grace period is killed.
  const takeDown = (signal: NodeJS.Signals) => {
    signalAll(signal);
    killTimer ??= setTimeout(() => signalAll("SIGKILL"), graceMs);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    interrupt ??= signal;
    takeDown(signal);
  };
  const recordFailure = (result: LaunchResult, signal?: NodeJS.Signals) => {
    if (interrupt) return;
    failures.push({ result, killed: !!signal && !signalled });
    if (failures.length > 1) return;
    findStopped();
    settleTimer = setTimeout(() => {
      findStopped();
      takeDown("SIGTERM");
    }, settleMs);
  };

  for (const signal of FORWARDED_SIGNALS) process.on(signal, onSignal);
  try {
    const finished = Array.from({ length: opts.nprocs }, (_, rank) => {
      const child = spawn(program, args, {
        env: {
          ...(opts.env ?? process.env),
          RANK: String(rank),
          WORLD_SIZE: String(opts.nprocs),
          LOCAL_RANK: String(rank),
          LOCAL_WORLD_SIZE: String(opts.nprocs),
          GROUP_RANK: "0",
          MASTER_ADDR: masterAddr,
          MASTER_PORT: String(port),
          SPMD_RUNNER_TOKEN: token,
          [LAUNCHER_PID_ENV]: String(process.pid),
          ...(sideChannel(rank) && opts.onProgress && { [PROGRESS_FD_ENV]: "3" }),
          ...(sideChannel(rank) && opts.onRunDir && { [RUN_DIR_FD_ENV]: "3" }),
        },
        stdio: ["ignore", piped ? "pipe" : "inherit", piped ? "pipe" : "inherit", ...(sideChannel(rank) ? ["pipe" as const] : [])],
      });
      children.push(child);
      if (sideChannel(rank)) {
        forEachLine(child.stdio[3] as Readable, (line) => {
          if (line.startsWith(RUN_DIR_LINE)) return opts.onRunDir?.(line.slice(RUN_DIR_LINE.length));
          const [done, total] = line.split(" ").map(Number);
          if (Number.isFinite(done) && Number.isFinite(total)) opts.onProgress?.(done!, total!);
        });
      }
      if (piped) {
        forEachLine(child.stdout!, (line) => sink(rank, "stdout", line));
        forEachLine(child.stderr!, (line) => sink(rank, "stderr", line));
      }
      return new Promise<void>((resolve) => {
        let drainTimer: NodeJS.Timeout | undefined;
        child.on("error", (err) => {
          if (child.pid === undefined) {
            recordFailure({ exitCode: 127, failedRank: rank, message: `runner launch: rank ${rank} could not start: ${err.message}`, by: `rank ${rank} (could not start)` });
          }
        });
        child.once("exit", (code, signal) => {
          if (signal) {
            recordFailure({ exitCode: signalExitCode(signal), failedRank: rank, message: `runner launch: rank ${rank} was killed by ${signal}`, by: `rank ${rank} (${signal})` }, signal);
          } else if (code !== 0) {
            recordFailure({ exitCode: code ?? 1, failedRank: rank, message: `runner launch: rank ${rank} exited with code ${code}`, by: `rank ${rank} (exit code ${code})` });
          }
          drainTimer = setTimeout(() => {
            child.stdout?.destroy();
            child.stderr?.destroy();
          }, PIPE_DRAIN_MS).unref();
        });
        // "close" comes after "exit" and after the output pipes are drained.
        child.once("close", () => {
          clearTimeout(drainTimer);
          resolve();
        });
      });
    });
    await Promise.all(finished);
  } finally {
    clearTimeout(settleTimer);
    clearTimeout(killTimer);
    for (const signal of FORWARDED_SIGNALS) process.off(signal, onSignal);
  }

  // Whichever came first, a rank failing or the launcher being interrupted, is the story; of the ranks' failures,
  // the culprit, not the first of the ranks that gave up on it.
  if (failures.length) return culprit(failures, stopped);
  if (interrupt) return { exitCode: signalExitCode(interrupt), message: `runner launch: interrupted by ${interrupt}` };
  return { exitCode: 0 };
}

/** A rank killed by a signal not this launcher's, else one found stopped, else the first to fail. */
function culprit(failures: readonly Failure[], stopped: number | undefined): LaunchResult {
  const killed = failures.find((f) => f.killed);
  if (killed || stopped === undefined) return (killed ?? failures[0]!).result;
  return {
    exitCode: failures[0]!.result.exitCode,
    failedRank: stopped,
    message: `runner launch: rank ${stopped} stopped answering (its process was stopped, as by SIGSTOP); the others gave up waiting for it`,
    by: `rank ${stopped} (stopped)`,
  };
}
