// OSU micro-benchmarks 5.3 as the bench's second peer (issues #30 and #32): code nobody here wrote, run
// under the same mpirun setting as bench/ompi_coll.c. Built once from a tarball or a source tree into
// bench/build/osu (or taken as built from a tree that has the programs), then one mpirun per op and chain
// of sizes of a group.
import { spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { BUILD, mpirunArgs, runProcess } from "./peers.mjs";

const OSU_BUILD = path.join(BUILD, "osu");

/** Our op → OSU's program. */
export const OSU_PROGRAMS = {
  allreduce: "osu_allreduce",
  reduce_scatter: "osu_reduce_scatter",
  all_gather: "osu_allgather",
  gather: "osu_gather",
  all_to_all: "osu_alltoall",
  broadcast: "osu_bcast",
};

/**
 * OSU's message size (its -m and its "Size" column) for one of our points, read off each benchmark's
 * source in 5.3:
 *   osu_allreduce, osu_reduce_scatter  bytes of one rank's float send buffer (size / 4 floats, MPI_SUM;
 *                                      reduce_scatter splits them in W portions) = our S, the tensor or
 *                                      one rank's input
 *   osu_bcast                          bytes of the buffer = our S
 *   osu_allgather, osu_gather          bytes each rank sends (MPI_CHAR) = S / W, since our S is the whole
 *                                      output
 *   osu_alltoall                       bytes to each peer (MPI_CHAR) = S / W, since our S is one rank's input
 * Our points are whole float32 counts with the blocked ops' counts a multiple of W, so S / W is a whole
 * number of bytes. OSU runs -m MIN:MAX as MIN, 2·MIN, 4·MIN ... ≤ MAX.
 */
export function osuSize(pt) {
  return ["all_gather", "gather", "all_to_all"].includes(pt.op) ? pt.bytes / pt.W : pt.bytes;
}

/** How OSU ran and how its sizes map to ours, for docs/PERFORMANCE.md. */
export function osuMarkdown(source) {
  return [
    `OSU micro-benchmarks 5.3 (built from \`${source}\` with \`./configure CC=mpicc CXX=mpicxx\`) ran the same points`,
    "under the same mpirun: `osu_allreduce`, `osu_reduce_scatter`, `osu_allgather`, `osu_gather`, `osu_alltoall`,",
    "`osu_bcast` with `-f -m SIZE:SIZE -i N -x M` (the group's iterations and warmup; points of one invocation that",
    "lie a power of two apart share one `-m MIN:MAX` run). OSU's size is our S for osu_allreduce and",
    "osu_reduce_scatter (one rank's float send buffer) and osu_bcast, and S / W for osu_allgather and osu_gather",
    "(what each rank sends) and osu_alltoall (what each rank sends to each peer). OSU times its iterations in",
    "one sum per rank with a barrier after each op, not before, and its Max Latency is the slowest rank's mean;",
    "the vs-osu ratio sets it against the same statistic of ours.",
  ].join("\n");
}

/** Sizes as runs of one -m MIN:MAX each: a size joins a chain when it is MIN times a power of two. */
export function osuChains(sizes) {
  const chains = [];
  for (const s of [...new Set(sizes)].sort((a, b) => a - b)) {
    const c = chains.find((ch) => Number.isInteger(Math.log2(s / ch[0])));
    if (c) c.push(s);
    else chains.push([s]);
  }
  return chains.map((c) => ({ min: c[0], max: c[c.length - 1] }));
}

/** The rows of an OSU run with -f: size → {avg_us, min_us, max_us, iterations}. Max is the slowest rank's average. */
export function parseOsu(stdout) {
  const rows = new Map();
  for (const line of stdout.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f.length !== 5 || !/^\d+$/.test(f[0])) continue;
    const [avg, min, max, iterations] = f.slice(1).map(Number);
    if ([avg, min, max, iterations].every(Number.isFinite)) rows.set(Number(f[0]), { avg_us: avg, min_us: min, max_us: max, iterations });
  }
  return rows;
}

const executable = (file) => {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
};

/** The folder under `dir` that holds all six programs, if any: a built tree or an install. */
function builtIn(dir) {
  const candidates = [dir, path.join(dir, "mpi/collective"), path.join(dir, "libexec/osu-micro-benchmarks/mpi/collective")];
  return candidates.find((d) => Object.values(OSU_PROGRAMS).every((p) => executable(path.join(d, p)))) ?? null;
}

function sh(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8", timeout: 600_000 });
  if (r.error || r.status !== 0) {
    // The first complaint names the cause (gzip's "not in gzip format", configure's "error:", the first
    // compiler error); warnings before it are not the cause.
    const lines = (text) => (text ?? "").split("\n").map((l) => l.trim()).filter(Boolean);
    const why = r.error?.message ?? lines(r.stderr).find((l) => !/warning/i.test(l)) ?? lines(r.stdout).at(-1) ?? `exit ${r.status}`;
    throw new Error(`${cmd} ${args.join(" ")} failed: ${why}`);
  }
}

/**
 * The folder with OSU's collective programs for `source` (a tarball, an unpacked tree or a built one),
 * building into bench/build/osu when needed: `./configure CC=mpicc CXX=mpicxx`, then make of the six
 * programs only. The build is kept and reused while the source's path, size and time are the same.
 * Throws with one line when it cannot be had.
 */
export function prepareOsu(source, log) {
  if (!existsSync(source)) throw new Error(`${source} not found`);
  const isDir = statSync(source).isDirectory();
  if (isDir && builtIn(source)) return builtIn(source);
  if (isDir && !existsSync(path.join(source, "configure"))) throw new Error(`${source} has neither the osu_* programs nor a configure script`);
  const st = statSync(isDir ? path.join(source, "configure") : source);
  const stamp = JSON.stringify({ source: path.resolve(source), size: st.size, mtimeMs: st.mtimeMs });
  const stampFile = path.join(OSU_BUILD, "stamp.json");
  const cached = existsSync(stampFile) && readFileSync(stampFile, "utf8") === stamp ? builtIn(path.join(OSU_BUILD, "src")) : null;
  if (cached) return cached;

  log(`building OSU micro-benchmarks from ${source} into ${path.relative(process.cwd(), OSU_BUILD) || OSU_BUILD} (once; seconds to a minute)`);
  rmSync(OSU_BUILD, { recursive: true, force: true });
  mkdirSync(OSU_BUILD, { recursive: true });
  // Timestamps must survive the copy, or make would rerun automake, which the tarball does not need.
  const src = path.join(OSU_BUILD, "src");
  if (isDir) sh("cp", ["-a", path.resolve(source), src], OSU_BUILD);
  else {
    mkdirSync(src);
    sh("tar", ["xzf", path.resolve(source), "-C", src, "--strip-components=1"], OSU_BUILD);
    if (!existsSync(path.join(src, "configure"))) throw new Error(`${source} holds no folder with a configure script`);
  }
  sh("./configure", ["CC=mpicc", "CXX=mpicxx"], src);
  sh("make", ["-j2", "-C", "mpi/collective", ...Object.values(OSU_PROGRAMS)], src);
  const bin = builtIn(src);
  if (!bin) throw new Error(`make finished but ${src}/mpi/collective lacks the osu_* programs`);
  writeFileSync(stampFile, stamp);
  return bin;
}

/** OSU keeps max size × W within -M (512 MiB unless told); ask for what the largest point needs. */
function memLimitArgs(pt, size) {
  const need = ["all_gather", "gather", "all_to_all"].includes(pt.op) ? size * pt.W : size;
  return need > 512 * 1024 * 1024 ? ["-M", String(need)] : [];
}

/** The mpiruns that measure a group's points with OSU: one per op and chain of sizes. */
export function osuCommands(group, bin) {
  const cmds = [];
  for (const op of [...new Set(group.points.map((p) => p.op))]) {
    const pts = group.points.filter((p) => p.op === op);
    for (const { min, max } of osuChains(pts.map(osuSize))) {
      const args = ["-f", "-m", `${min}:${max}`, "-i", String(group.iterations), "-x", String(group.warmup), ...memLimitArgs(pts[0], max)];
      cmds.push({ op, argv: [...mpirunArgs(group), path.join(bin, OSU_PROGRAMS[op]), ...args] });
    }
  }
  return cmds;
}

const lastLine = (text) => text.trim().split("\n").filter(Boolean).slice(-1)[0] ?? "";

/**
 * One pass of OSU over a group: per point its Max Latency (the slowest rank's mean, µs) as `time.avg_us`
 * and the whole row under `osu`.
 */
export async function runOsu(group, timeoutSec, bin) {
  const seen = new Map();
  let ms = 0;
  for (const { op, argv } of osuCommands(group, bin)) {
    const p = await runProcess(argv[0], argv.slice(1), { timeoutMs: timeoutSec * 1000 });
    ms += p.ms;
    if (p.code !== 0) return { error: `${OSU_PROGRAMS[op]} exited ${p.timedOut ? "(timed out) " : ""}${p.code}: ${lastLine(p.stderr) || lastLine(p.stdout)}`, ms };
    for (const [size, row] of parseOsu(p.stdout)) seen.set(`${op}:${size}`, row);
  }
  const points = [];
  for (const pt of group.points) {
    const row = seen.get(`${pt.op}:${osuSize(pt)}`);
    if (!row) return { error: `${OSU_PROGRAMS[pt.op]} printed no row for size ${osuSize(pt)}`, ms };
    points.push({ algorithm: "osu", size: pt.bytes, osu_size: osuSize(pt), time: { avg_us: row.max_us }, osu: row });
  }
  return { ms, points };
}
