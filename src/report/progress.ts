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

const none: Progress = { update: () => {}, stop: () => {} };

/** A progress bar on stderr that appears once a run has lasted a couple of seconds; `unit` names what it counts. */
export function progressBar(unit = "steps"): Progress {
  const started = Date.now();
  let bar: cliProgress.SingleBar | undefined;
  return {
    update(done, total) {
      if (!bar && Date.now() - started < SHOW_AFTER_MS) return;
      if (!bar) {
        bar = new cliProgress.SingleBar(
          { format: `${unit} [{bar}] {percentage}% | {value}/{total} | ETA {eta_formatted}`, stream: process.stderr, hideCursor: true },
          cliProgress.Presets.shades_classic,
        );
        bar.start(total, done);
      }
      bar.setTotal(total);
      bar.update(done);
    },
    stop: () => bar?.stop(),
  };
}

/** Whether a person is watching this terminal: a TTY, outside CI, and not asked to be quiet. */
export function interactive(quiet: boolean): boolean {
  return !quiet && process.stderr.isTTY === true && !process.env.CI;
}

/**
 * Rank 0's progress: to the launcher's channel when one was given, else a bar on an interactive
 * terminal; other ranks and quiet or non-interactive runs show nothing.
 */
export function rankProgress(rank: number, quiet: boolean): Progress {
  if (rank !== 0 || quiet) return none;
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
  return interactive(quiet) ? progressBar() : none;
}
