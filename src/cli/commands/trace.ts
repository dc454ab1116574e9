// `runner trace import TRACE... [-o JOB.json] [--world N] [--compute gaps]`: PyTorch ET / Kineto traces -> a job.
import type { Argv, CommandModule } from "yargs";

export interface TraceImportArgs {
  traces: string[];
  output?: string;
  world?: number;
  compute?: string;
}

const badInput = (message: string) => Object.assign(new Error(message), { exitCode: 2 });

const importCommand: CommandModule<object, TraceImportArgs> = {
  command: "import <traces..>",
  describe: "Write a job file that replays the collectives of PyTorch Execution Traces or Kineto traces (plain or .gz; files or folders)",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("traces", { type: "string", array: true, demandOption: true, describe: "Trace files (one per rank) or folders of them" })
      .option("output", { alias: "o", type: "string", describe: "Write the job here (default: stdout)" })
      .option("world", { type: "number", describe: "Replay at N ranks (only where every collective is on the whole world without rank-dependent splits)" })
      .option("compute", { type: "string", choices: ["gaps"], describe: "gaps: compute stages holding the time between collectives (Kineto)" })
      .check((argv) => {
        if (argv.world !== undefined && (!Number.isInteger(argv.world) || argv.world < 1)) throw badInput(`--world must be an integer >= 1, got ${argv.world}`);
        return true;
      })
      .example("$0 trace import rank0.json.gz rank1.json.gz -o step.json", "")
      .example("$0 trace import traces/ --world 8 -o step8.json", "DDP-style traces replayed at 8 ranks") as Argv<TraceImportArgs>,
  handler: async (args) => {
    const { importTraces } = await import("../../trace/import.js");
    const { text, summary } = importTraces(args.traces, { world: args.world, computeGaps: args.compute === "gaps", output: args.output });
    if (args.output === undefined) {
      process.stdout.write(text);
      for (const line of summary) process.stderr.write(`${line}\n`);
    } else {
      for (const line of summary) process.stdout.write(`${line}\n`);
    }
  },
};

export const traceCommand: CommandModule<object, object> = {
  command: "trace <command>",
  describe: "Replay real training steps: import PyTorch Execution Traces and Kineto traces as job files",
  builder: (yargs: Argv<object>) => yargs.command(importCommand).demandCommand(1, "give a trace command: import"),
  handler: () => {},
};
