// `runner doctor`: one rank of the built-in diagnosis, started by any launcher as a job's rank would be.
import type { Argv, CommandModule, Options } from "yargs";
import { parseSize } from "../../config/size.js";
import { runDoctor } from "../../doctor/run.js";
import { RUN_OPTIONS, type RunOptionArgs } from "../run-options.js";

/** doctor's own options, which `launch -n N doctor` also accepts and forwards (so no yargs defaults here). */
export const DOCTOR_OPTIONS = {
  threshold: { type: "number", requiresArg: true, describe: "doctor: name hosts and links below this fraction of their reference (0.5)" },
  expect: { type: "number", requiresArg: true, describe: "doctor: GB/s each link should carry each way; every link below the threshold of it is named (default: the NICs' speed)" },
  size: { type: "string", requiresArg: true, describe: "doctor: bytes each pair exchanges to measure bandwidth (4Mi)" },
} satisfies Record<string, Options>;

const { check: _check, "dump-dir": _dump, samples: _samples, solo: _solo, ...doctorRunOptions } = RUN_OPTIONS;
/** The run options that mean something to doctor. */
export const DOCTOR_RUN_OPTIONS = doctorRunOptions;

export interface DoctorArgs extends RunOptionArgs {
  threshold?: number;
  size?: string;
  expect?: number;
}

function bytes(size: string): number {
  try {
    return parseSize(size);
  } catch (err) {
    throw Object.assign(new Error(`--size: ${(err as Error).message}`), { exitCode: 2 });
  }
}

export const doctorCommand: CommandModule<object, DoctorArgs> = {
  command: "doctor",
  describe: "Measure every host's and host pair's bandwidth and latency; name the outliers (exit 1 when there is one)",
  builder: (yargs: Argv<object>) =>
    yargs
      .options(DOCTOR_OPTIONS)
      .options(DOCTOR_RUN_OPTIONS)
      .example("mpirun -np 8 node runner doctor", "under an MPI launcher")
      .example("$0 launch -n 4 doctor --backend tcp", "four local ranks") as Argv<DoctorArgs>,
  handler: async (a) => {
    process.exitCode = await runDoctor({
      threshold: a.threshold ?? 0.5, size: bytes(a.size ?? "4Mi"), expect: a.expect, config: a.config, backend: a.backend, iface: a.iface, iterations: a.iterations,
      warmup: a.warmup, timeout: a.timeout, out: a.out, json: a.json, logLevel: a["log-level"], logAllRanks: a["log-all-ranks"], quiet: a.quiet,
    });
  },
};
