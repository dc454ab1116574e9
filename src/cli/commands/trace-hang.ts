// `runner trace hang DUMPS... [--json]`: the ranks that stopped a hung job, from PyTorch flight-recorder dumps
// or the runner's own flight records (trace/hang.ts).
import type { Argv, CommandModule } from "yargs";

interface TraceHangArgs {
  dumps: string[];
  json?: boolean;
}

export const hangCommand: CommandModule<object, TraceHangArgs> = {
  command: "hang <dumps..>",
  describe: "Name the ranks that stopped a hung job, from PyTorch flight-recorder dumps (pickle or JSON, one per rank) or the runner's flight records (a run's flight/ folder)",
  builder: (yargs: Argv<object>) =>
    yargs
      .positional("dumps", { type: "string", array: true, demandOption: true, describe: "Dump files (<prefix><rank>: nccl_trace_rank_0, _dump_0, rank0.txt) or folders of them" })
      .option("json", { type: "boolean", describe: "Print the diagnosis as JSON" })
      .example("$0 trace hang fr-dumps/", "stopped ranks: 9, 14 ... then one table per stalled process group")
      .example("$0 trace hang runs/latest/flight --json", "the runner's own flight records, for machines") as Argv<TraceHangArgs>,
  handler: async (args) => {
    const { readDumps } = await import("../../trace/flight-recorder.js");
    const { diagnose, hangText } = await import("../../trace/hang.js");
    const diagnosis = diagnose(await readDumps(args.dumps));
    process.stdout.write(args.json ? `${JSON.stringify(diagnosis, null, 2)}\n` : `${hangText(diagnosis).join("\n")}\n`);
  },
};
