// `runner trace import TRACE... [-o JOB.json] [--world N] [--step N|all] [--compute gaps] [--max-bytes SIZE]`: PyTorch ET,
// Kineto and Chakra traces -> a job. `runner trace export JOB.json -o DIR`: a job -> Chakra traces, one per rank.
import type { Argv, CommandModule } from "yargs";
import { parseSize } from "../../config/size.js";
import { DEFAULT_MAX_BYTES, MAX_WORLD } from "../../trace/limits.js";
import { hangCommand } from "./trace-hang.js";

export interface TraceImportArgs {
  traces: string[];
  output?: string;
  world?: number;
  compute?: string;
  step?: string;
  "max-bytes"?: string;
}

const badInput = (message: string) => Object.assign(new Error(message), { exitCode: 2 });

function maxBytes(value: string): number {
  try {
    const n = parseSize(value);
    if (n < 1) throw new RangeError("expected at least 1 byte");
    return n;
  } catch (error) {
    throw badInput(`--max-bytes: ${(error as Error).message}`);
  }
}

const importCommand: CommandModule<object, TraceImportArgs> = {
  command: "import <traces..>",
  describe: "Write a job file that replays the collectives of PyTorch Execution Traces, Kineto or Chakra traces (plain or .gz, files, folders or .tar/.tar.gz archives)",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("traces", { type: "string", array: true, demandOption: true, describe: "Trace files (one per rank) or folders of them" })
      .option("output", { alias: "o", type: "string", describe: "Write the job here (default: stdout)" })
      .option("world", { type: "number", describe: "Replay at N ranks (only where every collective is on the whole world without rank-dependent splits)" })
      .option("compute", { type: "string", choices: ["gaps"], describe: "gaps: compute stages holding the time between collectives (Kineto)" })
      .option("step", { type: "string", describe: "N: replay ProfilerStep#N; all: every profiled step in order (default: the last step every rank recorded completely)" })
      .option("max-bytes", { type: "string", describe: `Refuse a trace that decompresses to more than this (default ${DEFAULT_MAX_BYTES / 1024 ** 3}Gi; "8Gi", "16Gi"...)` })
      .check((argv) => {
        checkWorld(argv.world);
        if (argv.step !== undefined && argv.step !== "all" && !/^\d{1,15}$/.test(String(argv.step))) throw badInput(`--step must be a step number or "all", got ${JSON.stringify(String(argv.step))}`);
        if (argv["max-bytes"] !== undefined) maxBytes(argv["max-bytes"]);
        return true;
      })
      .example("$0 trace import rank0.json.gz rank1.json.gz -o step.json", "")
      .example("$0 trace import traces/ --world 8 -o step8.json", "DDP-style traces replayed at 8 ranks")
      .example("$0 trace import traces.json.tar.gz --step all -o steps.json", "every profiled step of the traces in an archive") as Argv<TraceImportArgs>,
  handler: async (args) => {
    const { importTraces } = await import("../../trace/import.js");
    const step = args.step === undefined ? undefined : args.step === "all" ? "all" as const : Number(args.step);
    const { text, summary } = await importTraces(args.traces, {
      world: args.world, computeGaps: args.compute === "gaps", output: args.output, step,
      maxBytes: args["max-bytes"] === undefined ? undefined : maxBytes(args["max-bytes"]),
    });
    if (args.output === undefined) {
      process.stdout.write(text);
      for (const line of summary) process.stderr.write(`${line}\n`);
    } else {
      for (const line of summary) process.stdout.write(`${line}\n`);
    }
  },
};

interface TraceExportArgs {
  job: string;
  output: string;
  world?: number;
}

const exportCommand: CommandModule<object, TraceExportArgs> = {
  command: "export <job>",
  describe: "Write a job as Chakra execution traces (one <name>.<rank>.et per rank), as ASTRA-sim and PARAM read them",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("job", { type: "string", demandOption: true, describe: "The job file (hand-written or imported) (a regular file of at most 64 MiB; SPMD_RUNNER_MAX_INPUT=SIZE raises the cap)" })
      .option("output", { alias: "o", type: "string", demandOption: true, describe: "The folder for the .et files" })
      .option("world", { type: "number", describe: "The world size, for a job that records none" })
      .check((argv) => {
        checkWorld(argv.world);
        return true;
      })
      .example("$0 trace export step.json -o chakra/", "chakra/step.0.et, chakra/step.1.et, ...") as Argv<TraceExportArgs>,
  handler: async (args) => {
    const { exportJob } = await import("../../trace/export.js");
    const files = await exportJob(args.job, { output: args.output, world: args.world });
    process.stdout.write(`wrote ${files.length} Chakra trace${files.length > 1 ? "s" : ""}: ${files.length > 2 ? `${files[0]} ... ${files.at(-1)}` : files.join(", ")}\n`);
  },
};

/** --world of import and export alike: a world size the runner can run. */
function checkWorld(world: number | undefined): void {
  if (world !== undefined && (!Number.isInteger(world) || world < 1 || world > MAX_WORLD)) throw badInput(`--world must be an integer from 1 to ${MAX_WORLD}, got ${world}`);
}

export const traceCommand: CommandModule<object, object> = {
  command: "trace <command>",
  describe: "Replay real training steps: import PyTorch Execution Traces, Kineto and Chakra traces as job files; export jobs as Chakra traces; name the ranks that stopped a hung job",
  builder: (yargs: Argv<object>) => yargs.command(importCommand).command(exportCommand).command(hangCommand).demandCommand(1, "give a trace command: import, export, hang"),
  handler: () => {},
};
