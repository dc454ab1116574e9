#!/usr/bin/env node
// `npm run bench`: the shm backend against Open MPI on this machine (issue #3); with `--backend mpi`, the
// mpi backend under mpirun against the same (issue #32).
//
// For every world size, collective and message size it runs our runner (`runner launch --backend shm`, or
// `mpirun -np W node runner --backend mpi` with mpirun's default binding), Open MPI's own collective
// (bench/ompi_coll.c under mpirun) and, where it builds, OSU micro-benchmarks 5.3 (bench/lib/osu.mjs, the
// same mpirun) on the same points, rotating which goes first, in repeated rounds; prints per row the
// busbw, the median ratios, the memory bound (bench/bounds.mjs, from a memcpy bandwidth measured in the
// same run) and peak RSS; says per target whether it holds; writes <out>/<UTC time>.json with every raw
// number and, on a full run, regenerates docs/bench-shm-vs-ompi.md's section. Missed targets are
// reported, not an error: the exit code is 0 unless an invocation failed (1) or the flags were bad (2).
//
//   npm run bench                     # full: W 2 4 8, 8 B .. 256 MiB, 3 rounds; bench/results + docs
//   npm run bench -- --quick          # a few minutes; results to a temporary directory, no docs
//   npm run bench -- --quick --backend mpi   # the mpi backend: every row within 1.1x MPI's time + 1 us?
//   npm run bench -- --backend mpi --bind-to none   # the same with every mpirun unbound
//   npm run bench -- --osu DIR        # OSU from another tarball or tree; --no-osu runs without it
//   node bench/run.mjs --help         # every option
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { copiers } from "./bounds.mjs";
import { parseOptions, REPO, UsageError } from "./lib/options.mjs";
import { buildTools, cpuTicks, machineInfo, memcpyBandwidth, mpiMissing, ompiCommand, OURS, oursCommand, runOmpi, runOurs, stealShare } from "./lib/peers.mjs";
import { osuCommands, prepareOsu, runOsu } from "./lib/osu.mjs";
import { peerOrder, planGroups } from "./lib/plan.mjs";
import { evaluateTargets, formatTable, formatVerdicts, markdownSection, median, summarize, tableNotes, updateDocs, wavering } from "./lib/report.mjs";

const log = (line) => process.stderr.write(`bench: ${line}\n`);

/** The command as the user typed it: `npm run bench -- --quick` or `node bench/run.mjs --quick`. */
function commandLine(argv) {
  const quoted = argv.map((a) => (/^[\w./=:+-]+$/.test(a) ? a : JSON.stringify(a))).join(" ");
  const npmScript = process.env.npm_lifecycle_event;
  if (npmScript && /bench\/run\.mjs/.test(process.env.npm_lifecycle_script ?? "")) return `npm run ${npmScript}${quoted ? ` -- ${quoted}` : ""}`;
  return `node ${path.relative(process.cwd(), process.argv[1]) || "bench/run.mjs"}${quoted ? ` ${quoted}` : ""}`;
}

function gitCommit() {
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: REPO, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: REPO, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    return dirty ? `${head}+changes` : head;
  } catch {
    return null;
  }
}

async function runVersion() {
  const { VERSION } = await import("../dist/version.js");
  return VERSION;
}

async function main() {
  const argv = process.argv.slice(2);
  const s = await parseOptions(argv);
  const missing = mpiMissing();
  if (missing) throw Object.assign(new Error(`the Open MPI baseline cannot run: ${missing}`), { exitCode: 1 });
  buildTools();
  let osuBin = null;
  let osuMissing = s.osu === null ? "not run (--no-osu)" : null;
  if (s.osu !== null) {
    try {
      osuBin = prepareOsu(s.osu, log);
    } catch (e) {
      osuMissing = `unavailable: ${e.message}`;
      log(`OSU 5.3 unavailable, going on without its column: ${e.message}`);
    }
  }
  // The control is Open MPI's own again: what a second run of the same code measures against the first.
  // shm under mpirun is judged against itself under `runner launch` (issue #32), which then runs too.
  const ours = { backend: s.backend, launcher: s.launcher };
  const launchToo = s.backend === "shm" && s.launcher === "mpirun";
  const peers = ["ours", "ompi", ...(s.control ? ["control"] : []), ...(launchToo ? ["launch"] : []), ...(osuBin ? ["osu"] : [])];

  const startedAt = new Date();
  const t0 = performance.now();
  const machine = machineInfo();
  const cores = machine.cores;
  const groups = planGroups(s);
  log(`${s.mode} run: W ${s.worldSizes.join(", ")}; ${s.ops.length} ops; ${s.sizes.length} sizes; ${s.repeats} round(s); ${groups.length} invocations per peer per round; peers: ${peers.join(", ")}`);

  // memcpy bandwidth for 1 and every min(W, cores) copiers, probed at the start and again at the end: the
  // memory bound takes the best repeat of either, since other load only ever slows a probe down.
  const ks = [...new Set([1, ...s.worldSizes.map((W) => copiers(W, cores))])].sort((a, b) => a - b);
  const memcpyRuns = Object.fromEntries(ks.map((k) => [k, []]));
  const probeMemcpy = async () => {
    for (const k of ks) memcpyRuns[k].push(await memcpyBandwidth(s.memcpyBytes, k, s.memcpyRepeats));
  };
  const bestMemcpy = () => Object.fromEntries(ks.map((k) => [k, Math.max(...memcpyRuns[k].flatMap((r) => r.repeats_bytes_per_s))]));
  await probeMemcpy();
  const cacheBytes = machine.last_level_cache_bytes ?? ASSUMED_CACHE;
  log(`memcpy ${ks.map((k) => `BW_agg(${k}) = ${(bestMemcpy()[k] / 1e9).toFixed(2)} GB/s`).join(", ")} (best repeat so far)`);

  const tmp = mkdtempSync(path.join(os.tmpdir(), "spmd-bench-"));
  const runPeer = (peer, g, rep) => {
    if (peer === "ours") return runOurs(g, tmp, `r${rep}`, s.timeoutSec, ours);
    if (peer === "launch") return runOurs(g, tmp, `r${rep}-launch`, s.timeoutSec, OURS);
    if (peer === "osu") return runOsu(g, s.timeoutSec, osuBin);
    return runOmpi(g, s.timeoutSec);
  };
  const invocations = [];
  let failures = 0;
  let n = 0;
  let total = groups.length * s.repeats * peers.length;
  // One round of `which`: every peer once per group, in an order that changes across groups and rounds
  // (peerOrder) so that neither drift nor what ran just before favours one peer.
  const round = async (rep, which) => {
    for (const [gi, g] of which.entries()) {
      for (const peer of peerOrder(peers, rep + gi)) {
        const before = cpuTicks();
        const r = await runPeer(peer, g, rep);
        const steal = stealShare(before, cpuTicks());
        n++;
        const what = g.isolated ? `${g.points[0].op} ${g.points[0].nominal} B` : `${g.points.length} points`;
        log(`[${n}/${total}] ${peer.padEnd(4)} W=${g.W} ${what} (${g.warmup}+${g.iterations} steps): ${r.error ?? `${(r.ms / 1000).toFixed(1)} s`}`);
        if (r.error) failures++;
        invocations.push({ group: g.id, repeat: rep, peer, ...r, steal });
      }
    }
  };
  try {
    for (let rep = 0; rep < s.repeats; rep++) await round(rep, groups);
    // Invocations whose rounds disagree (a row's per-round ratios more than WAVERING apart: one round met a
    // slow spell of the machine) get more rounds, so that their medians rest on more than one good round.
    const rowsSoFar = summarize(groups, invocations, { cores, bw: bestMemcpy(), cacheBytes });
    const again = groups.filter((g) => rowsSoFar.some((r) => r.group === g.id && wavering(r)));
    total += again.length * s.extraRounds * peers.length;
    if (again.length && s.extraRounds) log(`${again.length} of ${groups.length} invocations wavered: ${s.extraRounds} more round(s) of them`);
    for (let rep = s.repeats; rep < s.repeats + s.extraRounds; rep++) await round(rep, again);

    // What an idle rank costs: the W = max rank count with an 8-byte allreduce.
    const Wmax = Math.max(...s.worldSizes);
    const idleGroup = { id: `idle-w${Wmax}`, W: Wmax, bindTo: s.bindTo, isolated: true, warmup: 2, iterations: 5, points: [{ op: "allreduce", W: Wmax, nominal: 8, count: 2, bytes: 8 }] };
    const idleOurs = await runOurs(idleGroup, tmp, "idle", s.timeoutSec, ours);
    const idleOmpi = await runOmpi(idleGroup, s.timeoutSec);
    if (idleOurs.error || idleOmpi.error) failures++;
    const idle = {
      W: Wmax,
      command: { ours: oursCommand(idleGroup, "JOB.json", "DIR", ours).slice(1).join(" "), ompi: ompiCommand(idleGroup).join(" ") },
      ours: { max: idleOurs.max_rss_kib ? Math.max(...idleOurs.max_rss_kib) : null, median: idleOurs.max_rss_kib ? median(idleOurs.max_rss_kib) : null, per_rank_kib: idleOurs.max_rss_kib ?? null },
      ompi: { max: idleOmpi.max_rss_kib ? Math.max(...idleOmpi.max_rss_kib) : null, median: idleOmpi.max_rss_kib ? median(idleOmpi.max_rss_kib) : null, per_rank_kib: idleOmpi.max_rss_kib ?? null },
    };

    await probeMemcpy();
    const bwAgg = bestMemcpy();
    const rows = summarize(groups, invocations, { cores, bw: bwAgg, cacheBytes });
    const targets = evaluateTargets(rows, idle, s.backend);
    const finishedAt = new Date();
    const stamp = finishedAt.toISOString().replace(/[:.]/g, "-");
    const resultsFile = path.join(s.out, `${stamp}.json`);
    const doc = {
      kind: `spmd-runner bench: ${s.backend}${launchToo ? " under mpirun" : ""} vs Open MPI`,
      runner_version: await runVersion(),
      commit: gitCommit(),
      command: commandLine(argv),
      argv,
      started: startedAt.toISOString(),
      finished: finishedAt.toISOString(),
      wall_s: (performance.now() - t0) / 1000,
      settings: { ...s, docs: s.docs ? path.relative(REPO, s.docs) : null, out: s.out },
      machine: { ...machine, load_average_at_end: os.loadavg().map((v) => Number(v.toFixed(2))) },
      osu: { source: s.osu, programs: osuBin, missing: osuMissing },
      memcpy: {
        bytes: s.memcpyBytes,
        repeats: s.memcpyRepeats,
        bw_agg_gbs: Object.fromEntries(ks.map((k) => [k, bwAgg[k] / 1e9])),
        runs: memcpyRuns,
        cache_bytes: cacheBytes,
        cache_from: machine.last_level_cache_bytes === null ? "assumed (sysfs gave no cache size)" : "sysfs",
      },
      idle_rss: idle,
      targets,
      rows,
      groups: groups.map((g) => ({ ...g, ompi_command: ompiCommand(g).join(" "), ...(osuBin && { osu_commands: osuCommands(g, osuBin).map((c) => c.argv.join(" ")) }) })),
      invocations: invocations.map(({ run_dir, ...v }) => (s.keepRuns ? { ...v, run_dir } : v)),
      results_file: path.relative(REPO, resultsFile).startsWith("..") ? resultsFile : path.relative(REPO, resultsFile),
    };
    const { writeFileAtomic } = await import("../dist/report/write-atomic.js");
    writeFileAtomic(resultsFile, JSON.stringify(doc, null, 2) + "\n");

    process.stdout.write(formatTable(rows));
    process.stdout.write(tableNotes(doc).map((l) => `# ${l}\n`).join(""));
    process.stdout.write(`# idle rank at W=${idle.W}: ours ${fmtMiB(idle.ours.max)} MiB, Open MPI ${fmtMiB(idle.ompi.max)} MiB (peak RSS, max over ranks)\n`);
    process.stdout.write("\n" + formatVerdicts(targets));
    process.stdout.write(`\nresults: ${resultsFile}\n`);
    if (s.docs) {
      updateDocs(s.docs, markdownSection(doc));
      process.stdout.write(`docs: ${s.docs} (section ${"bench:shm-vs-ompi"})\n`);
    }
    process.stdout.write(`wall time: ${doc.wall_s.toFixed(1)} s\n`);
    if (s.keepRuns) process.stdout.write(`run directories kept under ${tmp}\n`);
    return failures ? 1 : 0;
  } finally {
    if (!s.keepRuns) rmSync(tmp, { recursive: true, force: true });
  }
}

/** Where sysfs does not give the last-level cache: as large as any the bench has met, so rows lose a bound rather than get a wrong one. */
const ASSUMED_CACHE = 64 * 1024 * 1024;

const fmtMiB = (kib) => (kib === null ? "—" : (kib / 1024).toFixed(0));

main().then(
  (code) => process.exit(code),
  (err) => {
    if (err instanceof UsageError) {
      process.stderr.write(`bench: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`bench: ${err.exitCode ? err.message : err.stack ?? err}\n`);
    process.exit(err.exitCode ?? 1);
  },
);
