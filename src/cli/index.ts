import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { rankForMessages } from "../env/discover.js";
import { VERSION } from "../version.js";
import { buildCommand } from "./commands/build.js";
import { compareCommand } from "./commands/compare.js";
import { doctorCommand } from "./commands/doctor.js";
import { expCommand } from "./commands/exp.js";
import { infoCommand } from "./commands/info.js";
import { launchCommand } from "./commands/launch.js";
import { runCommand } from "./commands/run.js";
import { validateCommand } from "./commands/validate.js";

/** Exit code 2 for bad input (configs, flags, environment), 1 for everything else. */
function fail(err: unknown): never {
  const e = err as { message?: string; exitCode?: number; code?: string };
  const rank = rankForMessages(process.env);
  const where = rank !== undefined ? `runner (rank ${rank})` : "runner";
  process.stderr.write(`${where}: ${(e.message ?? String(err)).split("\n")[0]}\n`);
  process.exit(typeof e.exitCode === "number" ? e.exitCode : 1);
}

/** The command line (the process's own by default): runner/index.js calls it from the bundle. */
export async function main(argv: string[] = hideBin(process.argv)): Promise<void> {
  try {
    await yargs(argv)
      .scriptName("runner")
      .command(runCommand)
      .command(launchCommand)
      .command(validateCommand)
      .command(infoCommand)
      .command(compareCommand)
      .command(doctorCommand)
      .command(expCommand)
      .command(buildCommand)
      .strict()
      .demandCommand(1, "give a job file: node runner JOB.json (or a command: run, launch, validate, info, doctor, compare, exp, build)")
      .version(VERSION)
      .help()
      .wrap(Math.min(120, process.stdout.columns ?? 100))
      .fail((msg, err) => {
        if (err) throw err;
        throw Object.assign(new Error(`${msg} (see --help)`), { exitCode: 2 });
      })
      .parseAsync();
  } catch (err) {
    fail(err);
  }
}

