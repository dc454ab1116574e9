import { existsSync } from "node:fs";
import yargs, { type CommandModule } from "yargs";
import { hideBin } from "yargs/helpers";
import { rankForMessages } from "../env/discover.js";
import { sayFailure } from "../log/failure.js";
import { VERSION } from "../version.js";
import { buildCommand } from "./commands/build.js";
import { compareCommand } from "./commands/compare.js";
import { doctorCommand } from "./commands/doctor.js";
import { expCommand } from "./commands/exp.js";
import { infoCommand } from "./commands/info.js";
import { launchCommand } from "./commands/launch.js";
import { runCommand } from "./commands/run.js";
import { traceCommand } from "./commands/trace.js";
import { validateCommand } from "./commands/validate.js";

/** Exit code 2 for bad input (configs, flags, environment), 1 for everything else. */
function fail(err: unknown): never {
  sayFailure(err, rankForMessages(process.env));
  const { exitCode } = err as { exitCode?: number };
  process.exit(typeof exitCode === "number" ? exitCode : 1);
}

// One list registers the commands and names them in messages, so a new command is never missing from either.
// (Each module's argument type differs; yargs takes them one at a time, so the list forgets them.)
const COMMANDS: readonly CommandModule<object, any>[] = [runCommand, launchCommand, validateCommand, infoCommand, compareCommand, doctorCommand, expCommand, buildCommand, traceCommand];
const COMMAND_NAMES = COMMANDS.map((c) => String([c.command].flat()[0]).split(" ")[0]!);

/** Levenshtein distance, for the command a mistyped word was most likely meant to be. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/**
 * A first word that is neither a command nor a file: the default command would take it for a job file and
 * then call the rest unknown arguments (`lauch -n 2 job.json`: "Unknown arguments: n, job.json").
 */
function notACommand(first: string | undefined): Error | undefined {
  if (first === undefined || /[-./]/.test(first[0]!) || first.includes(".") || COMMAND_NAMES.includes(first) || existsSync(first)) return undefined;
  const [closest] = [...COMMAND_NAMES].sort((a, b) => distance(first, a) - distance(first, b));
  const hint = distance(first, closest!) <= 2 ? `did you mean ${closest}?` : `commands: ${COMMAND_NAMES.join(", ")}`;
  return Object.assign(new Error(`${first} is not a command (${hint}), nor a job file`), { exitCode: 2 });
}

/** yargs' line for a value outside an option's choices: `--backend "shmm": expected one of "auto", ...`. */
const CHOICE_STRINGS = { "Argument: %s, Given: %s, Choices: %s": "--%s %s: expected one of %s" };

/** The command line (the process's own by default): runner/index.js calls it from the bundle. */
export async function main(argv: string[] = hideBin(process.argv)): Promise<void> {
  try {
    const stray = notACommand(argv[0]);
    if (stray) throw stray;
    await yargs(argv)
      .scriptName("runner")
      .command(COMMANDS as CommandModule<object, any>[])
      .strict()
      .updateStrings(CHOICE_STRINGS)
      .demandCommand(1, `give a job file: node runner JOB.json (or a command: ${COMMAND_NAMES.join(", ")})`)
      .version(VERSION)
      .help()
      .wrap(Math.min(120, process.stdout.columns ?? 100))
      .fail((msg, err) => {
        // yargs' own errors (YError: a coerce check's too) are bad input; a handler's keep their exit code.
        if (err && err.name !== "YError") throw err;
        // The heading of yargs' list of wrong values ("Invalid values:") goes; each of its lines names one.
        const line = msg.split("\n").map((l) => l.trim()).filter((l) => l && !l.endsWith(":")).join("; ");
        throw Object.assign(new Error(`${line} (see --help)`), { exitCode: 2 });
      })
      .parseAsync();
  } catch (err) {
    fail(err);
  }
}

