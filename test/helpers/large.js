// The large-size matrix's jobs: every stage at the sizes people train with (16Mi and 64Mi float32
// elements), cut into launches whose memory fits the machine, and the bounds its rows must meet.
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { prepareJob, vCounts } from "./matrix.js";

export const Mi = 2 ** 20;

const ints = (seed) => ({ kind: "integers", seed, low: -9, high: 9 });

/**
 * The stages, each with the tensors it reads (count as a function of n and W) and the bytes of output and
 * state it adds per rank (in units of n elements), for the memory plan. all_gather, gather and igather take
 * n/W elements per rank so that the whole array is n elements, as nccl-tests counts them.
 */
export const STAGES = {
  allreduce: { stage: { op: "allreduce", input: "x" }, out: 1 },
  reduce_scatter: { stage: { op: "reduce_scatter", input: "x" }, out: 0.5 },
  coalesced: { stage: { op: "reduce_scatter", inputs: ["x", "odd"], coalesced: true, reduce: "mean" }, out: 1.5 },
  all_gather: { stage: { op: "all_gather", input: "part" }, out: 1 },
  gather: { stage: { op: "gather", input: "part", root: "last" }, out: 1 },
  igather: { stage: { op: "igather", input: "part", root: 0 }, out: 1 },
  broadcast: { stage: { op: "broadcast", input: "x", root: "last" }, out: 1 },
  reduce: { stage: { op: "reduce", input: "x", root: 0, reduce: "max" }, out: 1 },
  scatter: { stage: { op: "scatter", input: "x", root: "last" }, out: 0.5 },
  all_to_all: { stage: { op: "all_to_all", input: "x" }, out: 1 },
  // Uneven, rank-dependent blocks (helpers/matrix.js vCounts), made for each n and W.
  all_to_allv: { stage: { op: "all_to_allv", input: "x", counts: "uneven" }, out: 1 },
  send_recv: { stage: { op: "send_recv", input: "x" }, out: 1 },
  onebit: { stage: { op: "compressed_allreduce", input: "q" }, out: 4, bound: 1 },
  int8_flat: { stage: { op: "quantized_allreduce", input: "q", bits: 8, nodes: 1 }, out: 3, bound: 0.02 },
  int4_hier_full: { stage: { op: "quantized_allreduce", input: "q", bits: 4, output: "full", localSize: 2 }, out: 4, bound: 0.3 },
  int8_hier_full: { stage: { op: "quantized_allreduce", input: "q", bits: 8, output: "full", gatherBits: 4, localSize: 2, reduce: "mean" }, out: 4, bound: 0.3 },
};
export const ALL = Object.keys(STAGES);
export const EXACT = ALL.filter((id) => STAGES[id].bound === undefined);

const TENSORS = {
  x: (n) => n,
  part: (n, W) => Math.ceil(n / W),
  odd: (n) => Math.floor(n / 3) + 1,
  // The estimating stages' input: n cut to a multiple of 2W, so they estimate at every W (int4 codes pack
  // in pairs) instead of falling back to the exact collective.
  q: (n, W) => n - (n % (2 * W)),
};

// Fixed per tensor, so every launch (and backend) of a case fills the same values.
const SEEDS = { x: 1, part: 2, odd: 3, q: 4 };

/** The stage as the job has it at W ranks and n elements: roots and counts resolved, hierarchies that do not tile W made flat. */
function stageAt(id, W, n, stages) {
  const s = { id, ...stages[id].stage };
  if (s.counts === "uneven") s.counts = vCounts(n, W);
  if (s.root === "last") s.root = W - 1;
  if (s.localSize && W % s.localSize !== 0) s.localSize = 1;
  return s;
}

/** The stages cut into launches of at most `budget` bytes over all W ranks (inputs, outputs and state). */
export function launches(ids, W, n, stages = STAGES, budget = 8 * 2 ** 30) {
  const bytes = (id) => 4 * n * (stages[id].out + 1) * W;
  const groups = [];
  for (const id of ids) {
    const g = groups.at(-1);
    if (g && g.bytes + bytes(id) <= budget) g.ids.push(id), (g.bytes += bytes(id));
    else groups.push({ ids: [id], bytes: bytes(id) });
  }
  return groups.map((g) => g.ids);
}

/**
 * One launch's job: the stages and only the tensors they read, checked, one timed iteration. `extra` adds
 * tensors (those of stages beyond STAGES) and job fields (a sweep).
 */
export function largeJob(ids, W, n, { stages = STAGES, tensors: more = {}, ...extra } = {}) {
  const planned = ids.map((id) => stageAt(id, W, n, stages));
  const names = new Set(planned.flatMap((s) => s.inputs ?? [s.input]).filter((t) => t in TENSORS));
  const tensors = Object.fromEntries([...names].map((t) => [t, { dtype: "float32", count: TENSORS[t](n, W), fill: ints(SEEDS[t]) }]));
  return { name: `large-${W}`, iterations: 1, warmup: 0, check: true, tensors: { ...tensors, ...more }, stages: planned, ...extra };
}

/**
 * Runs the stages `ids` at W ranks and n elements with `launch(W, args)` (extra CLI args in `args`), in as
 * many launches as memory needs; returns every row. Asserts each launch exits 0 and each row's result:
 * 0 wrong of every element for exact stages, a relative error under the stage's bound for estimating ones.
 */
export async function runLarge(ids, W, n, { launch, args = [], extra = {} } = {}) {
  const stages = extra.stages ?? STAGES;
  const rows = [];
  let cpu = 0;
  for (const group of launches(ids, W, n, stages)) {
    const job = largeJob(group, W, n, extra);
    const { dir, json, run } = prepareJob(W, job, { launch, extraArgs: args });
    try {
      const ranks = await run();
      for (const [r, p] of (Array.isArray(ranks) ? ranks : [ranks]).entries()) assert.equal(p.code, 0, `W=${W} n=${n} ${group} (process ${r}) exited ${p.code}: ${p.stderr.slice(-2000)}`);
      const doc = JSON.parse(readFileSync(json, "utf8"));
      rows.push(...doc.results);
      cpu += doc.ranks.reduce((s, u) => s + u.cpu_user_s + u.cpu_system_s, 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  // What the case cost, for keeping the file within CI's time: CPU seconds over all ranks (the wall time on
  // 2 cores is at least half that), printed as a test diagnostic.
  console.log(`# W=${W} n=${n} ${ids.length} stages: ${cpu.toFixed(1)} CPU s over ranks`);
  for (const row of rows) {
    const what = `W=${W} n=${n} ${row.stage} (${row.algorithm})`;
    const bound = stages[row.stage].bound;
    if (bound === undefined) {
      assert.equal(row.wrong, 0, `${what}: ${row.wrong} wrong`);
    } else {
      assert.ok(!row.fallback, `${what}: fell back: ${row.fallback}`);
      assert.ok(row.rel_error > 0 && row.rel_error < bound, `${what}: rel_error ${row.rel_error}, bound ${bound}`);
    }
  }
  return rows;
}
