// `npm run bench` flags (yargs) and the settings they resolve to (zod): a mode's presets, then each flag
// given on top. Bad input is one line on stderr and exit code 2.
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import yargs from "yargs";
import { z } from "zod";
import { parseSize } from "../../dist/config/size.js";
import { OPS } from "../bounds.mjs";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Where the OSU micro-benchmarks 5.3 tarball lies unless --osu says otherwise (bench/lib/osu.mjs). */
export const OSU_DEFAULT = "/work/shared/peers/osu-micro-benchmarks-5.3.tar.gz";

const KiB = 1024;
const MiB = 1024 * KiB;

/** 8 B (the latency point), then ×4 from 16 B to 256 MiB: 1 MiB, 16 MiB and 64 MiB land on the grid. */
const FULL_SIZES = [8, ...Array.from({ length: 13 }, (_, i) => 16 * 4 ** i)];

/**
 * What each mode runs. Sizes below `isolateFrom` share one invocation per world size and band (every op
 * and size of the band as stages of one job, a barrier between them); from `isolateFrom` up each (op, size)
 * runs alone, so its peak RSS is its own (only at the world sizes in `isolateWorlds`, where it is given).
 * A band's iteration count comes from its largest size: clamp(budget / size, minIters, maxIters), and at
 * least 3 from 128 MiB up.
 */
const MODES = {
  full: {
    worldSizes: [2, 4, 8],
    ops: OPS,
    sizes: FULL_SIZES,
    repeats: 3,
    extraRounds: 2,
    budget: 256 * MiB,
    minIters: 5,
    maxIters: 1000,
    bandEdges: [4 * KiB, 256 * KiB],
    isolateFrom: 4 * MiB,
    memcpyBytes: 256 * MiB,
    memcpyRepeats: 5,
    writeDocs: true,
  },
  quick: {
    worldSizes: [2, 4, 8],
    ops: OPS,
    sizes: [8, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB],
    repeats: 1,
    extraRounds: 0,
    budget: 64 * MiB,
    minIters: 5,
    maxIters: 100,
    bandEdges: [4 * MiB],
    isolateFrom: 64 * MiB,
    // Only where the memory target is checked: a launch at W = 8 costs some 2.5 s on 2 cores.
    isolateWorlds: [8],
    memcpyBytes: 256 * MiB,
    memcpyRepeats: 3,
    writeDocs: false,
  },
  // For the test: seconds, not minutes; the numbers mean nothing.
  smoke: {
    worldSizes: [2],
    ops: ["allreduce", "all_gather"],
    sizes: [8, 64 * KiB],
    repeats: 1,
    extraRounds: 0,
    budget: 4 * MiB,
    minIters: 5,
    maxIters: 20,
    bandEdges: [],
    isolateFrom: 64 * KiB,
    memcpyBytes: 64 * MiB,
    memcpyRepeats: 3,
    writeDocs: false,
  },
};

const size = z.union([z.number(), z.string()]).transform((v, ctx) => {
  try {
    return parseSize(typeof v === "number" ? v : v.trim());
  } catch (e) {
    ctx.addIssue({ code: "custom", message: e.message });
    return z.NEVER;
  }
});

const settingsSchema = z.strictObject({
  mode: z.enum(["full", "quick", "smoke"]),
  worldSizes: z.array(z.int().min(2).max(64)).min(1),
  ops: z.array(z.enum(OPS)).min(1),
  sizes: z.array(size.pipe(z.int().min(1).max(2 ** 31))).min(1),
  repeats: z.int().min(1).max(100),
  budget: size.pipe(z.int().min(1)),
  minIters: z.int().min(1),
  maxIters: z.int().min(1),
  bandEdges: z.array(z.int().min(1)),
  isolateFrom: size.pipe(z.int().min(1)),
  isolateWorlds: z.array(z.int()).optional(),
  memcpyBytes: size.pipe(z.int().min(4096)),
  memcpyRepeats: z.int().min(1).max(99),
  extraRounds: z.int().min(0).max(9),
  writeDocs: z.boolean(),
  out: z.string().min(1).optional(),
  docs: z.string().min(1).optional(),
  keepRuns: z.boolean(),
  timeoutSec: z.number().positive(),
  backend: z.enum(["shm", "mpi"]),
  launcher: z.enum(["launch", "mpirun"]),
  bindTo: z.enum(["default", "none"]),
  osu: z.string().min(1).nullable(),
  control: z.boolean(),
}).superRefine((s, ctx) => {
  if (s.backend === "mpi" && s.launcher !== "mpirun") ctx.addIssue({ code: "custom", path: ["launcher"], message: "the mpi backend runs under mpirun only" });
  if (s.minIters > s.maxIters) ctx.addIssue({ code: "custom", path: ["minIters"], message: `--min-iters ${s.minIters} is above --max-iters ${s.maxIters}` });
});

/** One line naming the flag: `--sizes: expected a size like 4096, "4Ki" ...`. */
function describeIssue(issue) {
  const flag = { worldSizes: "world-sizes", minIters: "min-iters", maxIters: "max-iters", isolateFrom: "isolate-from", memcpyBytes: "memcpy-bytes", memcpyRepeats: "memcpy-repeats", extraRounds: "extra-rounds", timeoutSec: "timeout", bindTo: "bind-to" }[issue.path[0]] ?? issue.path[0];
  const at = issue.path.length > 1 ? ` (value ${issue.path[1] + 1})` : "";
  return `--${flag}${at}: ${issue.message}`;
}

export class UsageError extends Error {}

/** Parses argv into the run's settings; throws UsageError with a one-line message on bad input. */
export async function parseOptions(argv) {
  const a = await yargs(argv)
    .scriptName("npm run bench --")
    .usage("$0 [options]\n\nOur backend against Open MPI (bench/ompi_coll.c) and OSU 5.3: busbw, latency, the memory bound and peak RSS.")
    .option("quick", { type: "boolean", describe: "A short run (W 2, 4, 8; 8 B to 64 MiB; one round), a few minutes" })
    .option("smoke", { type: "boolean", describe: "A few seconds: W 2, allreduce and all_gather at 8 B and 64 KiB (for tests)" })
    .option("world-sizes", { type: "array", describe: "World sizes (default 2 4 8)" })
    .option("ops", { type: "array", describe: `Collectives (default all: ${OPS.join(" ")})` })
    .option("sizes", { type: "array", describe: "Message sizes in bytes, e.g. 8 64Ki 1Mi (default 8 B and ×4 from 16 B to 256 MiB)" })
    .option("repeats", { type: "number", describe: "Rounds of runs (ours, Open MPI, OSU) per point; ratios are medians of the per-round ones" })
    .option("extra-rounds", { type: "number", describe: "More rounds for the invocations whose rows' per-round ratios differ by more than 1.5× after --repeats (full: 2)" })
    .option("budget", { type: "string", describe: "Bytes moved per measured point: iterations = budget / size, clamped" })
    .option("min-iters", { type: "number", describe: "Fewest timed iterations of a point" })
    .option("max-iters", { type: "number", describe: "Most timed iterations of a point" })
    .option("isolate-from", { type: "string", describe: "From this size up, every (op, size) runs in its own invocation" })
    .option("memcpy-bytes", { type: "string", describe: "Buffer size of the memcpy bandwidth probe (default 256Mi)" })
    .option("memcpy-repeats", { type: "number", describe: "Repeats of the memcpy probe (median)" })
    .option("out", { type: "string", describe: "Directory for <UTC time>.json (default bench/results; --quick/--smoke: a temporary directory)" })
    .option("docs", { type: "string", describe: "Markdown file whose bench section to regenerate (default docs/bench-shm-vs-ompi.md; --quick/--smoke: none)" })
    .option("no-docs", { type: "boolean", describe: "Do not touch any Markdown file" })
    .option("keep-runs", { type: "boolean", default: false, describe: "Keep every invocation's run directory (printed at the end)" })
    .option("timeout", { type: "number", default: 900, describe: "Seconds one invocation (launch or mpirun) may take" })
    .option("backend", { type: "string", default: "shm", describe: "Our side: shm (under `runner launch`) or mpi (under mpirun, its default binding)" })
    .option("launcher", { type: "string", describe: "What starts our ranks: launch (`runner launch`; shm's default) or mpirun (the mpi backend's; with shm, each row is also judged against shm under `runner launch`, run too)" })
    .option("bind-to", { type: "string", default: "default", describe: "mpirun's binding for every peer it starts: default (mpirun's own: a core per rank while cores go round) or none" })
    .option("osu", { type: "string", describe: `OSU micro-benchmarks 5.3 as a second peer: a tarball, an unpacked tree or a built one (default ${OSU_DEFAULT}; built once into bench/build/osu)` })
    .option("no-osu", { type: "boolean", describe: "Run without the OSU peer" })
    .option("control", { type: "boolean", describe: "Run Open MPI's own a second time in every round, against the first: how far two runs of the same code lie apart (default with --backend mpi)" })
    .option("no-control", { type: "boolean", describe: "Run without the control" })
    .conflicts("quick", "smoke")
    .conflicts("docs", "no-docs")
    .conflicts("osu", "no-osu")
    .conflicts("control", "no-control")
    .parserConfiguration({ "boolean-negation": false })
    .strict()
    .help()
    .version(false)
    .wrap(Math.min(120, process.stdout.columns ?? 100))
    .fail((msg, err) => {
      throw new UsageError(`${err?.message ?? msg} (see --help)`);
    })
    .parseAsync();
  if (a._.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(String(a._[0]))} (see --help)`);
  const mode = a.smoke ? "smoke" : a.quick ? "quick" : "full";
  const preset = MODES[mode];
  const given = (v, fallback) => (v === undefined ? fallback : v);
  const launcher = a.launcher ?? (a.backend === "mpi" ? "mpirun" : "launch");
  const raw = {
    ...preset,
    mode,
    worldSizes: given(a["world-sizes"], preset.worldSizes),
    ops: given(a.ops, preset.ops),
    sizes: given(a.sizes, preset.sizes),
    repeats: given(a.repeats, preset.repeats),
    extraRounds: given(a["extra-rounds"], preset.extraRounds),
    budget: given(a.budget, preset.budget),
    minIters: given(a["min-iters"], preset.minIters),
    maxIters: given(a["max-iters"], preset.maxIters),
    isolateFrom: given(a["isolate-from"], preset.isolateFrom),
    memcpyBytes: given(a["memcpy-bytes"], preset.memcpyBytes),
    memcpyRepeats: given(a["memcpy-repeats"], preset.memcpyRepeats),
    writeDocs: preset.writeDocs,
    out: a.out,
    // The docs' generated section is the shm comparison under `runner launch`; other runs write only where told.
    docs: a["no-docs"] ? undefined : (a.docs ?? (preset.writeDocs && a.backend === "shm" && launcher === "launch" ? path.join(REPO, "docs/bench-shm-vs-ompi.md") : undefined)),
    keepRuns: a["keep-runs"],
    timeoutSec: a.timeout,
    backend: a.backend,
    launcher,
    bindTo: a["bind-to"],
    osu: a["no-osu"] ? null : (a.osu ?? OSU_DEFAULT),
    // The mpi target's margin (10% and 1 µs) is about what two runs of MPI's own differ by on a small
    // machine: there the control says which misses the bench can see at all.
    control: a["no-control"] ? false : (a.control ?? a.backend === "mpi"),
  };
  const parsed = settingsSchema.safeParse(raw);
  if (!parsed.success) throw new UsageError(describeIssue(parsed.error.issues[0]));
  const s = parsed.data;
  s.worldSizes = [...new Set(s.worldSizes)].sort((x, y) => x - y);
  s.ops = OPS.filter((op) => s.ops.includes(op));
  s.sizes = [...new Set(s.sizes)].sort((x, y) => x - y);
  // Results go to bench/results only on a full run or when asked (docs likewise, resolved above).
  s.out = path.resolve(s.out ?? (mode === "full" ? path.join(REPO, "bench/results") : path.join(os.tmpdir(), "spmd-bench")));
  if (s.docs !== undefined) s.docs = path.resolve(s.docs);
  if (s.osu !== null) s.osu = path.resolve(s.osu);
  return s;
}
