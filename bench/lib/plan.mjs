// What the bench measures and in which invocations: points (W, op, size) grouped so process start-up
// (about 1 s per launch, 2.5 s at W = 8 on 2 cores) is paid a few times per world size, not per point.
// Both peers run a group with the same ops, element counts, warmup and iterations, in the same order.
const FLOAT32 = 4;
const ROOTED = new Set(["gather", "broadcast"]);
const BLOCKED = new Set(["reduce_scatter", "all_to_all"]);
const PER_RANK_INPUT = new Set(["all_gather", "gather"]);

/**
 * The float32 input tensor that gives `nominal` bytes in results.json's sense of size for `op`: the
 * tensor for allreduce and broadcast; input bytes per rank for reduce_scatter and all_to_all (a multiple
 * of W elements, so the blocks are equal, as MPI's *_block calls need); W × input for all_gather and
 * gather (the whole output). Tiny sizes round up to the smallest tensor that works (one element per rank).
 */
export function pointFor(op, W, nominal) {
  const elements = Math.floor(nominal / FLOAT32);
  let count, bytes;
  if (PER_RANK_INPUT.has(op)) {
    count = Math.max(1, Math.floor(elements / W));
    bytes = W * count * FLOAT32;
  } else if (BLOCKED.has(op)) {
    count = Math.max(W, Math.floor(elements / W) * W);
    bytes = count * FLOAT32;
  } else {
    count = Math.max(1, elements);
    bytes = count * FLOAT32;
  }
  return { op, W, nominal, count, bytes };
}

/**
 * Timed iterations for a point of `bytes`, so every point costs about the same. Warmup moves about 64 MiB
 * (2 to 200 iterations; OSU's micro-benchmarks skip 200 small-message iterations too): the first
 * iterations, while processes settle and idle cores wake, would otherwise decide a small point's average.
 */
export function iterationsFor(bytes, s) {
  const floor = bytes >= 128 * 1024 * 1024 ? Math.min(3, s.minIters) : s.minIters;
  const iterations = Math.max(floor, Math.min(s.maxIters, Math.round(s.budget / bytes)));
  const warmup = Math.max(2, Math.min(200, Math.round((64 * 1024 * 1024) / bytes)));
  return { iterations, warmup };
}

/** Every group to run, in order: per world size the bands, then the isolated (op, size) points. */
export function planGroups(s) {
  const groups = [];
  for (const W of s.worldSizes) {
    const bands = new Map();
    const isolated = [];
    const isolating = s.isolateWorlds === undefined || s.isolateWorlds.includes(W);
    for (const nominal of s.sizes) {
      if (isolating && nominal >= s.isolateFrom) {
        isolated.push(nominal);
        continue;
      }
      const band = s.bandEdges.filter((edge) => nominal >= edge).length;
      bands.set(band, [...(bands.get(band) ?? []), nominal]);
    }
    for (const [band, sizes] of bands) {
      const points = sizes.flatMap((nominal) => s.ops.map((op) => pointFor(op, W, nominal)));
      groups.push({ id: `w${W}-band${band}`, W, bindTo: s.bindTo, isolated: false, points, ...iterationsFor(Math.max(...sizes), s) });
    }
    for (const nominal of isolated) {
      for (const op of s.ops) {
        groups.push({ id: `w${W}-${op}-${nominal}`, W, bindTo: s.bindTo, isolated: true, points: [pointFor(op, W, nominal)], ...iterationsFor(nominal, s) });
      }
    }
  }
  return groups;
}

/**
 * The order of the peers in the k-th run of a group (k = round + group index): who goes first rotates, and
 * every other time the rest follow backwards, so a peer does not always run straight after the same one
 * (what ran just before can move a time: the machine's caches, its frequency, a process still leaving).
 */
export function peerOrder(peers, k) {
  const n = peers.length;
  return peers.map((_, i) => peers[(k + (k % 2 ? n - i : i)) % n]);
}

/** The runner's job for a group: one float32 tensor per point, a barrier stage between ops. */
export function jobFor(group, timeoutSec) {
  const tensors = {};
  const stages = [];
  group.points.forEach((p, i) => {
    tensors[`t${i}`] = { dtype: "float32", count: p.count };
    // The executor puts a barrier at the start of every step; one before each later op gives every op
    // the same start (the Open MPI baseline runs MPI_Barrier before each op).
    if (i > 0) stages.push({ id: `sync${i}`, op: "barrier" });
    stages.push({
      id: `p${i}`,
      op: p.op,
      input: `t${i}`,
      ...(ROOTED.has(p.op) && { root: 0 }),
      ...((p.op === "allreduce" || p.op === "reduce_scatter") && { reduce: "sum" }),
    });
  });
  return {
    name: `bench-${group.id}`,
    iterations: group.iterations,
    warmup: group.warmup,
    check: false,
    timeoutSec,
    tensors,
    stages,
  };
}

/** The Open MPI baseline's arguments for a group (bench/ompi_coll.c). */
export const ompiArgsFor = (group) => [String(group.warmup), String(group.iterations), ...group.points.map((p) => `${p.op}:${p.count}`)];
