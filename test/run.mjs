// `npm test`: every test/*.test.js under node:test, in two lanes and one report.
//  - Beside the rest run the jobs/ examples (jobs.test.js), the trace importer's files, then the large-size
//    matrix (test/large.test.js): minutes of CPU-bound runs that touch nothing the other files use (their own
//    temporary files and ports, native/build only read), and the two that need gigabytes, so they never hold
//    memory at the same time.
//  - The rest run one file at a time, as they always have: some share machine-wide things (native/build, the
//    built JS that `npm pack` refreshes, a SLURM cluster's fixed ports), and many spend their time waiting on
//    deadlines, launchers and shaped links, which is when the matrix gets the CPU.
// The two runs' counts are added up into one summary, with each lane's time and its slowest tests (CI has 30
// minutes, and the longer lane is what counts); the exit code is 1 when any test failed or was cancelled.
// Arguments name the files to run instead of all (then one lane): `npm test -- test/cli.test.js`.
import { readdirSync } from "node:fs";
import path from "node:path";
import { PassThrough } from "node:stream";
import { run } from "node:test";
import { spec } from "node:test/reporters";
import { fileURLToPath } from "node:url";

const TEST = path.dirname(fileURLToPath(import.meta.url));
// The aarch64 cross build stays with the rest, first: run beside them it moved the jobs' 4-rank launches onto
// the minutes of doctor's shaped multi-host links, and a starved link there read a third of its rate.
const BESIDE = ["jobs.test.js", "trace.test.js", "trace-hostile.test.js", "large.test.js"].map((f) => path.join(TEST, f));
const COUNTS = ["tests", "suites", "pass", "fail", "cancelled", "skipped", "todo"];

const named = process.argv.slice(2).map((f) => path.resolve(f));
const all = named.length ? named : readdirSync(TEST).filter((f) => f.endsWith(".test.js")).sort().map((f) => path.join(TEST, f));
const lanes = [all.filter((f) => !BESIDE.includes(f)), BESIDE.filter((f) => all.includes(f))].filter((l) => l.length);

const totals = Object.fromEntries([...COUNTS, "duration_ms"].map((k) => [k, 0]));
const merged = new PassThrough({ objectMode: true });
let open = lanes.length;

// A run's closing counts ("pass 12") and plan carry no file: they are summed here and sent once at the end.
function closing(event) {
  if (event.type === "test:plan") return event.data.nesting === 0 && !event.data.file;
  if (event.type !== "test:diagnostic" || event.data.nesting !== 0 || event.data.file) return false;
  const [key, value] = event.data.message.split(" ");
  if (!(key in totals)) return false;
  totals[key] = key === "duration_ms" ? Math.max(totals[key], Number(value)) : totals[key] + Number(value);
  return true;
}

const note = (message) => merged.write({ type: "test:diagnostic", data: { nesting: 0, message } });
const laneNotes = [];

/** "170 s aarch64.test.js; 95 s a build without MPI, then MPI installed…": the five largest of `seconds`. */
function slowest(seconds) {
  return [...seconds].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([name, s]) => `${s.toFixed(0)} s ${name.length > 50 ? `${name.slice(0, 50)}…` : name}`).join("; ");
}

/**
 * "lane 1: 1234 s; slowest files: …; slowest tests: …", from its top-level tests' durations: the files are
 * what moves between lanes when one runs long.
 */
function laneNote(index, seconds) {
  const files = new Map();
  for (const [, s, file] of seconds) files.set(file, (files.get(file) ?? 0) + s);
  const total = seconds.reduce((sum, [, s]) => sum + s, 0);
  return `lane ${index + 1}: ${total.toFixed(0)} s; slowest files: ${slowest([...files].map(([f, s]) => [path.basename(f), s]))}; slowest tests: ${slowest(seconds)}`;
}

lanes.forEach((files, index) => {
  const seconds = [];
  const lane = run({ files, concurrency: 1 });
  lane.on("data", (event) => {
    if ((event.type === "test:pass" || event.type === "test:fail") && event.data.nesting === 0 && event.data.file) {
      seconds.push([event.data.name, (event.data.details.duration_ms ?? 0) / 1000, event.data.file]);
    }
    closing(event) || merged.write(event);
  });
  lane.on("end", () => {
    laneNotes[index] = laneNote(index, seconds);
    if (--open > 0) return;
    laneNotes.forEach(note);
    for (const [key, value] of Object.entries(totals)) note(`${key} ${value}`);
    merged.end();
  });
});

merged.compose(new spec()).pipe(process.stdout);
process.on("exit", () => {
  if (totals.fail > 0 || totals.cancelled > 0) process.exitCode = 1;
});
