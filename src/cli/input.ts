// Checks of the command line's values, each failing in one line that names the option and what was given.
import { MAX_WORLD } from "../config/job.js";

/** A check's failure is bad input: exit code 2 (cli/index.ts). */
export const badInput = (message: string) => Object.assign(new Error(message), { exitCode: 2 });

/**
 * A yargs `coerce` for a number option, read from the text given: yargs' number type would turn "abc" into
 * NaN before any check could name it.
 */
function numberFrom(flag: string, expected: string, fits: (n: number) => boolean) {
  return (given: unknown): number => {
    const n = typeof given === "string" && given.trim() !== "" ? Number(given) : typeof given === "number" ? given : NaN;
    if (!fits(n)) throw badInput(`${flag}: expected ${expected}, got ${Array.isArray(given) ? given.join(" and ") : String(given)}`);
    return n;
  };
}

/** An integer option of at least `min`. */
export const integerAtLeast = (flag: string, min: number) => numberFrom(flag, `an integer >= ${min}`, (n) => Number.isInteger(n) && n >= min);

/** A number of ranks, up to the job's cap: above it, refused before anything is planned for each rank. */
export const rankCount = (flag: string) =>
  numberFrom(flag, `an integer from 1 to ${MAX_WORLD} (the most ranks a job runs at)`, (n) => Number.isInteger(n) && n >= 1 && n <= MAX_WORLD);

/** A number of seconds above 0. */
export const positiveSeconds = (flag: string) => numberFrom(flag, "seconds > 0", (n) => n > 0);
