import { existsSync } from "node:fs";
import yargs, { type CommandModule } from "yargs";
import { hideBin } from "yargs/helpers";
import { closest } from "../config/errors.js";
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

/**
 * A first word that is neither a command nor a file: the default command would take it for a job file and
 * then call the rest unknown arguments (`lauch -n 2 job.json`: "Unknown arguments: n, job.json").
 */
function notACommand(first: string | undefined): Error | undefined {
  if (first === undefined || /[-./]/.test(first[0]!) || first.includes(".") || COMMAND_NAMES.includes(first) || existsSync(first)) return undefined;
  const meant = closest(first, COMMAND_NAMES);
  const hint = meant ? `did you mean ${meant}?` : `commands: ${COMMAND_NAMES.join(", ")}`;
  return Object.assign(new Error(`${first} is not a command (${hint}), nor a job file`), { exitCode: 2 });
}

/** yargs' line for a value outside an option's choices: `--backend "shmm": expected one of "auto", ...`. */
const CHOICE_STRINGS = { "Argument: %s, Given: %s, Choices: %s": "--%s %s: expected one of %s" };

/** An option as typed: -n, --iterations. */
const flag = (name: string) => (name.length === 1 ? `-${name}` : `--${name}`);

/**
 * yargs' "Unknown arguments: iteration, N" with the flag each was most likely meant to be, among the options of
 * the command that ran (`known`): "--iteration (did you mean --iterations?), -N (did you mean -n?)".
 */
function unknownFlags(msg: string, known: readonly string[]): string | undefined {
  const unknown = /^Unknown arguments?: (.+)$/.exec(msg)?.[1];
  if (unknown === undefined) return undefined;
  const hinted = unknown.split(", ").map((name) => {
    // Fewer edits than the name has letters: "ab" is not a mistyped "job", "N" may be "n".
    const meant = closest(name, known, Math.min(2, name.length - 1));
    return meant ? `${flag(name)} (did you mean ${flag(meant)}?)` : flag(name);
  });
  return `unknown option${hinted.length === 1 ? "" : "s"} ${hinted.join(", ")}`;
}

/**
 * The options typed in `argv` that the command does not have. yargs takes the word after an unknown option for
 * its value (`launch -n 2 --chek job.json`), then says only that the job file is missing: the unknown option is
 * the mistake to name.
 */
function typedUnknown(argv: readonly string[], known: readonly string[]): string[] {
  return argv
    .filter((a) => /^(--[A-Za-z][\w-]*|-[A-Za-z])(=|$)/.test(a))
    .map((a) => a.replace(/^--?/, "").split("=")[0]!)
    .filter((name) => !known.includes(name) && !(name.startsWith("no-") && known.includes(name.slice(3))));
}

/** The command line (the process's own by default): runner/index.js calls it from the bundle. */
export async function main(argv: string[] = hideBin(process.argv)): Promise<void> {
  try {
    const stray = notACommand(argv[0]);
    if (stray) throw stray;
    const cli = yargs(argv);
    await cli
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
        // The instance holds the options of the command that ran when it fails (its builder ran on it); its
        // typings leave getOptions out.
        const options = (cli as unknown as { getOptions(): { key: Record<string, unknown>; alias: Record<string, string[]> } }).getOptions();
        const known = [...Object.keys(options.key), ...Object.values(options.alias).flat()];
        const unknown = /^Not enough non-option arguments/.test(msg) ? typedUnknown(argv, known) : [];
        if (unknown.length) msg = `Unknown arguments: ${unknown.join(", ")}`;
        const line = unknownFlags(msg, known) ?? msg.split("\n").map((l) => l.trim()).filter((l) => l && !l.endsWith(":")).join("; ");
        throw Object.assign(new Error(`${line} (see --help)`), { exitCode: 2 });
      })
      .parseAsync();
  } catch (err) {
    fail(err);
  }
}

