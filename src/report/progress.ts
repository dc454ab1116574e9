import { writeSync } from "node:fs";
import cliProgress from "cli-progress";

/** Shows how many steps of the run are done. */
export interface Progress {
  update(stepsDone: number, totalSteps: number): void;
  stop(): void;
}

// Short runs finish before a bar would help; showing one would only flicker.
const SHOW_AFTER_MS = 2000;
/** Under `runner launch`, rank 0 reports steps on this file descriptor and the launcher draws the bar. */
export const PROGRESS_FD_ENV = "SPMD_PROGRESS_FD";
/**
 * And names its run directory on this one (the same channel, given alone where no bar is drawn, so that no
 * timer polls the steps), where the launcher finishes results.json if a rank dies: one line, RUN_DIR_LINE DIR.
 */
export const RUN_DIR_FD_ENV = "SPMD_RUN_DIR_FD";
export const RUN_DIR_LINE = "run ";

/** Rank 0 under `runner launch` tells the launcher where its run directory is: whether it was told. */
export function tellRunDir(dir: string): boolean {
  const fd = Number(process.env[RUN_DIR_FD_ENV]);
  if (!Number.isInteger(fd) || fd <= 2) return false;
  try {
    writeSync(fd, `${RUN_DIR_LINE}${dir}\n`);
    return true;
  } catch {
    // The launcher is going down: it finishes nothing then.
    return false;
  }
}

// What cli-progress turns off while it draws (the cursor, line wrapping), turned back on.
const RESTORE_TERMINAL = "\x1b[?25h\x1b[?7h\n";

/**
 * A progress bar on stderr that appears once a run has lasted a couple of seconds. A fault in drawing it
 * (its own redraw timer included) turns it off with one line and the terminal restored: the bar is never
 * worth failing a run for, nor worth the launcher dying and leaving its ranks behind. `unit` names what it counts.
 */
export function progressBar(unit = "steps"): Progress {
  const started = Date.now();
  let bar: cliProgress.SingleBar | undefined;
  let broken = false;
  const restore = () => process.stderr.write(RESTORE_TERMINAL);
  const guarded = <A extends unknown[]>(draw: (...a: A) => void) => (...a: A) => {
    if (broken) return;
    try {
      draw(...a);
    } catch (err) {
      broken = true;
      process.off("exit", restore);
      restore();
      process.stderr.write(`progress bar off: ${(err as Error).message}\n`);
    }
  };
  const start = (total: number, done: number) => {
    bar = new cliProgress.SingleBar(
      { format: `${unit} [{bar}] {percentage}% | {value}/{total} | ETA {eta_formatted}`, stream: process.stderr, hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    // The bar redraws itself from a timer too, which calls this property.
    bar.render = guarded(bar.render.bind(bar));
    // An exit while the bar is up (an error, a signal) still gives the cursor back.
    process.once("exit", restore);
    bar.start(total, done);
  };
  return {
    update: guarded((done: number, total: number) => {
      if (!bar && Date.now() - started < SHOW_AFTER_MS) return;
      if (!bar) start(total, done);
      bar!.setTotal(total);
      bar!.update(done);
    }),
    stop: guarded(() => {
      process.off("exit", restore);
      bar?.stop();
    }),
  };
}

/** Whether a person is watching this terminal: a TTY, outside CI, and not asked to be quiet. */
export function interactive(quiet: boolean): boolean {
  return !quiet && process.stderr.isTTY === true && !process.env.CI;
}

/**
 * Rank 0's progress: to the launcher's channel when one was given, else a bar on an interactive
 * terminal; other ranks and quiet or non-interactive runs show nothing (undefined: nobody polls the
 * step counter then, so no timer wakes a rank that shares its core while it runs).
 */
export function rankProgress(rank: number, quiet: boolean): Progress | undefined {
  if (rank !== 0 || quiet) return undefined;
  const fd = Number(process.env[PROGRESS_FD_ENV]);
  if (Number.isInteger(fd) && fd > 2) {
    return {
      update: (done, total) => {
        try {
          writeSync(fd, `${done} ${total}\n`);
        } catch {
          // The launcher stopped listening (it is going down): progress is not worth failing the run for.
        }
      },
      stop: () => {},
    };
  }
  return interactive(quiet) ? progressBar() : undefined;
}
