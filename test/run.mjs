// `npm test`: every test/*.test.js under node:test, in two lanes and one report, then the files that measure
// links, alone.
//  - Beside the rest run the jobs/ examples (jobs.test.js), the generated references (docs.test.js), the trace importer's files, the collectives'
//    element checks, the 1-bit, tcp and mpi backend's ones, the command line's and `runner compare`'s (their own
//    ports, build folder and results), `runner exp`'s campaigns, then the large-size matrix
//    (test/large.test.js): minutes of CPU-bound runs that touch nothing the other files use (their own
//    temporary files, ports and campaign folders, native/build only read), and the two that need gigabytes,
//    so they never hold memory at the same time.
//  - The rest run one file at a time, as they always have: some share machine-wide things (native/build, the
//    built JS that `npm pack` refreshes, a SLURM cluster's fixed ports), and many spend their time waiting on
//    deadlines, launchers and namespace hosts, which is when the other lane gets the CPU.
//  - Last, once both lanes are done, the files whose verdicts are link rates (doctor's outliers on shaped
//    links, the 1-bit crossover on a 1 Gbit/s one): beside a lane they met starved ranks that read a link at a
//    quarter of its rate.
// The runs' counts are added up into one summary, with each lane's time, its slowest files and tests (CI has
// 30 minutes: the longer lane plus the last one is what counts); the exit code is 1 when any test failed or was
// cancelled. Arguments name the files to run instead of all, each in its place: `npm test -- test/cli.test.js`.
import { readdirSync } from "node:fs";
import path from "node:path";
import { PassThrough } from "node:stream";
import { run } from "node:test";
import { spec } from "node:test/reporters";
import { fileURLToPath } from "node:url";

const TEST = path.dirname(fileURLToPath(import.meta.url));
// The aarch64 cross build stays with the rest, first: it configures native/build, which native.test.js and
// package.test.js build in.
const BESIDE = [
  "jobs.test.js", "docs.test.js", "trace.test.js", "trace-hostile.test.js", "trace-hang.test.js", "collectives.test.js", "onebit.test.js",
  "tcp.test.js", "single-copy.test.js", "mpi.test.js", "cli.test.js", "compare.test.js", "exp.test.js", "security-files.test.js",
  "large.test.js",
].map((f) => path.join(TEST, f));
const LAST = ["doctor.test.js", "shaped-link.test.js"].map((f) => path.join(TEST, f));
const COUNTS = ["tests", "suites", "pass", "fail", "cancelled", "skipped", "todo"];

const named = process.argv.slice(2).map((f) => path.resolve(f));
const all = named.length ? named : readdirSync(TEST).filter((f) => f.endsWith(".test.js")).sort().map((f) => path.join(TEST, f));
const lanes = [all.filter((f) => !BESIDE.includes(f) && !LAST.includes(f)), BESIDE.filter((f) => all.includes(f))].filter((l) => l.length);
const last = LAST.filter((f) => all.includes(f));

const totals = Object.fromEntries([...COUNTS, "duration_ms"].map((k) => [k, 0]));
const merged = new PassThrough({ objectMode: true });

// A run's closing counts ("pass 12") and plan carry no file: they are summed here and sent once at the end.
function closing(event) {
  if (event.type === "test:plan") return event.data.nesting === 0 && !event.data.file;
  if (event.type !== "test:diagnostic" || event.data.nesting !== 0 || event.data.file) return false;
  const [key, value] = event.data.message.split(" ");
  if (!(key in totals)) return false;
  if (key !== "duration_ms") totals[key] += Number(value);  // the whole run's is taken at its end
  return true;
}

const note = (message) => merged.write({ type: "test:diagnostic", data: { nesting: 0, message } });

/**
 * "106 s the C++ tests pass on aarch64 under qemu…; …": the ten largest of `seconds`, [name, s] pairs (ten: CI's
 * record shows only its tail, and the files worth moving or cutting were past the fifth).
 */
function slowest(seconds) {
  return [...seconds].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([name, s]) => `${s.toFixed(0)} s ${name.length > 50 ? `${name.slice(0, 50)}…` : name}`).join("; ");
}

/**
 * "lane 1: 960 s; slowest files: …; slowest tests: …". A file's time runs from its start to the next one's
 * (a lane runs one at a time), which counts its process and hooks; the files are what moves between lanes
 * when one runs long.
 */
function laneNote(index, files, tests) {
  const total = files.reduce((sum, [, s]) => sum + s, 0);
  return `lane ${index + 1}: ${total.toFixed(0)} s; slowest files: ${slowest(files)}; slowest tests: ${slowest(tests)}`;
}

/** Runs `files` one at a time into the report; resolves with the lane's note once they are done. */
function runLane(files, index) {
  const tests = [], started = [];
  const lane = run({ files, concurrency: 1 });
  lane.on("data", (event) => {
    if ((event.type === "test:pass" || event.type === "test:fail") && event.data.nesting === 0 && event.data.file) {
      tests.push([event.data.name, (event.data.details.duration_ms ?? 0) / 1000]);
    }
    // A file's own dequeue is named by its path.
    if (event.type === "test:dequeue" && files.includes(event.data.name)) started.push([path.basename(event.data.name), performance.now()]);
    closing(event) || merged.write(event);
  });
  return new Promise((resolve) => lane.on("end", () => {
    const ends = [...started.slice(1).map(([, t]) => t), performance.now()];
    resolve(laneNote(index, started.map(([name, t], i) => [name, (ends[i] - t) / 1000]), tests));
  }));
}

merged.compose(new spec()).pipe(process.stdout);
const notes = await Promise.all(lanes.map(runLane));
if (last.length) notes.push(await runLane(last, lanes.length));
notes.forEach(note);
totals.duration_ms = performance.now();
for (const [key, value] of Object.entries(totals)) note(`${key} ${value}`);
merged.end();

process.on("exit", () => {
  if (totals.fail > 0 || totals.cancelled > 0) process.exitCode = 1;
});
