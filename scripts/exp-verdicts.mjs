#!/usr/bin/env node
// The targets of `exp compare` (docs/PERFORMANCE.md, "Comparing campaigns"), over campaign folders that ran the
// same experiment: consecutive pairs must give no regression; the same pairs with the second side's results
// scaled 2x slower (results.json rewritten in a copy) must regress on every row; and in consecutive pairs of
// 5-repetition campaigns, each op made 1.3x slower alone must be found: one-op slows one row (an op at one size),
// whole-op an op at every size, as a change to its code would. Counts are given per world size, with the
// pairs (or trials) whose sides' launches shared no machine, where no verdict can tell (metrics/verdict.ts,
// judgeAlike). bench/verdicts/collect.sh makes such sets.
//   node scripts/exp-verdicts.mjs identical DIR1 DIR2 ...      # and: slow2x DIR1 DIR2 ...; one-op|whole-op DIR1 DIR2 ... (5 reps)
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { compareSides } from "../dist/exp/compare.js";
import { DEFAULT_THRESHOLD } from "../dist/metrics/verdict.js";
import { scriptArgs } from "./args.mjs";

const { positionals: [mode, ...dirs] } = scriptArgs(import.meta.url, {}, { allowPositionals: true });
const tmp = mkdtempSync(path.join(os.tmpdir(), "spmd-exp-verdicts-"));

/** A copy of a campaign whose rows matching `slower(row, world)` take `factor` times as long. */
function scaled(dir, factor, slower) {
  const to = path.join(tmp, `${path.basename(dir)}-${readdirSync(tmp).length}`);
  cpSync(dir, to, { recursive: true });
  for (const id of readdirSync(path.join(to, "points"))) {
    for (const rep of readdirSync(path.join(to, "points", id)).filter((r) => r.startsWith("rep-"))) {
      const file = path.join(to, "points", id, rep, "results.json");
      const doc = JSON.parse(readFileSync(file, "utf8"));
      for (const r of doc.results.filter((r) => slower(r, doc.world_size))) {
        for (const k of Object.keys(r.time)) r.time[k] *= factor;
        r.busbw /= factor;
        r.algbw /= factor;
      }
      writeFileSync(file, JSON.stringify(doc));
    }
  }
  return to;
}

const byWorld = (changes, pick) => {
  const out = {};
  for (const c of changes) (out[`W=${c.row.world_size}`] ??= []).push(c);
  return Object.fromEntries(Object.entries(out).map(([w, cs]) => [w, pick(cs)]));
};
const regressions = (cs) => cs.filter((c) => c.verdict === "regression").length;
// Rows whose sides' launches shared no machine (metrics/verdict.ts, judgeAlike): neither passed nor caught.
const differed = (cs) => cs.filter((c) => c.verdict === "machine differed").length;
/** What one-op and whole-op slow down in campaign `dir`: each row of its points alone, or each op everywhere. */
function targets(dir, mode) {
  const points = readdirSync(path.join(dir, "points")).map((id) => path.join(dir, "points", id));
  const rows = points.flatMap((point) => {
    const w = JSON.parse(readFileSync(path.join(point, "point.json"), "utf8")).params.world_size;
    return JSON.parse(readFileSync(path.join(point, "rep-1", "results.json"), "utf8")).results.map((r) => ({ ...r, w }));
  });
  if (mode === "one-op") return rows.map((t) => ({ name: `${t.op} ${t.size}`, worlds: [t.w], hit: (r, world) => world === t.w && r.op === t.op && r.size === t.size }));
  const worlds = [...new Set(rows.map((r) => r.w))];
  return [...new Set(rows.map((r) => r.op))].map((op) => ({ name: `${op} (every size)`, worlds, hit: (r) => r.op === op }));
}
const pairs = dirs.slice(1).map((b, i) => [dirs[i], b]);

try {
  if (mode === "identical" || mode === "slow2x") {
    const tally = {};
    for (const [a, b] of pairs) {
      const side = mode === "identical" ? b : scaled(b, 2, () => true);
      const { changes } = await compareSides([{ dir: a }, { dir: side }], DEFAULT_THRESHOLD);
      const counts = byWorld(changes, (cs) => [regressions(cs), cs.length, differed(cs)]);
      for (const [w, [n, of, apart]] of Object.entries(counts)) {
        const ok = mode === "identical" ? n === 0 : n === of;
        const t = (tally[w] ??= [0, 0, 0]);
        [t[0], t[1], t[2]] = [t[0] + (ok ? 1 : 0), t[1] + 1, t[2] + (apart ? 1 : 0)];
      }
      console.log(`${path.basename(a)} vs ${path.basename(b)}: ${Object.entries(counts).map(([w, [n, of, apart]]) => `${w} ${n}/${of} regressions${apart ? `, ${apart} machine differed` : ""}`).join(", ")}`);
    }
    const goal = mode === "identical" ? "with no regression" : "with every row a regression";
    for (const [w, [ok, of, apart]] of Object.entries(tally)) console.log(`# ${w}: ${ok} of ${of} pairs ${goal}; ${apart} with rows whose sides shared no machine (threshold ${DEFAULT_THRESHOLD})`);
  } else if (mode === "one-op" || mode === "whole-op") {
    // one-op: each row (an op at one size and world size) 1.3x slower alone; whole-op: each op 1.3x slower at every
    // size and world size, as a change to its code would make it, found at a world size where any of its rows is.
    const tally = {};
    for (const [a, b] of pairs) {
      for (const { name, worlds, hit } of targets(b, mode)) {
        const { changes } = await compareSides([{ dir: a }, { dir: scaled(b, 1.3, hit) }], DEFAULT_THRESHOLD);
        for (const w of worlds) {
          const atW = changes.filter((c) => c.row.world_size === w);
          const [mine, others] = [atW.filter((c) => hit(c.row, w)), atW.filter((c) => !hit(c.row, w))];
          const right = regressions(mine), other = regressions(others);
          // Only other rows of the target's world size count against it: each world size has its own tally.
          const apart = !right && differed(mine) > 0;
          const t = (tally[`W=${w}`] ??= [0, 0, 0, 0]);
          [t[0], t[1], t[2], t[3]] = [t[0] + (right ? 1 : 0), t[1] + 1, t[2] + (other ? 1 : 0), t[3] + (apart ? 1 : 0)];
          console.log(`${path.basename(a)} vs ${path.basename(b)} W=${w} ${name} 1.3x slower: ${right ? "found" : apart ? "MISSED (machine differed)" : "MISSED"} (${right} of ${mine.length} rows and metrics); ${other} other regressions at W=${w}`);
        }
      }
    }
    const what = mode === "one-op" ? "ops (one size)" : "ops (every size)";
    for (const [w, [ok, of, other, apart]] of Object.entries(tally)) console.log(`# ${w}: ${ok} of ${of} ${what} found 1.3x slower (${ok} of ${of - apart} where the sides shared a machine); ${other} with other rows of W regressing (threshold ${DEFAULT_THRESHOLD})`);
  } else {
    console.error("scripts/exp-verdicts.mjs: give identical|slow2x|one-op|whole-op and the campaign folders (see --help)");
    process.exitCode = 2;
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
