// The memory bound of each collective on one host: the least memory traffic any implementation must
// cause (the shm backend's staged or single-copy paths, the mpi backend, Open MPI, OSU alike), at the
// memory bandwidth a copy reaches on this machine (bench/memcpy_bw.c: memcpy or non-temporal stores, the
// faster). One module for the numbers and the formula text docs/PERFORMANCE.md prints, so the two cannot
// drift apart.
//
//   traffic(op, W, S)  bytes that must be read or written in the ranks' private buffers (table below)
//   t_min = traffic / (2 × BW_mem(min(W, cores)))
//   bound_busbw = busFactor(op, W) × S / t_min
//
// Every input lives in its rank's private buffer and every result must land in each rank's private
// buffer, so each input byte is read from memory at least once and each output byte written at least
// once; nothing else is unavoidable (a staging slot or a reduction's partial sums can stay in cache, and
// single-copy CMA needs no slot). The traffic is the same as the op's whole footprint:
//   allreduce       2·W·S      all W inputs read (the reduction's reads), W outputs of S written
//   reduce_scatter  (W + 1)·S  W inputs of S read, W outputs of S/W written
//   all_gather      (W + 1)·S  W inputs of S/W read, W outputs of S written
//   gather          2·S        W inputs of S/W read, the root's S written
//   all_to_all      2·W·S      W inputs of S read, W outputs of S written
//   broadcast       W·S        the root's S read (in place), W − 1 outputs of S written
// BW_mem(k) is a copy's rate (memcpy_bw.c) in bytes copied per second (1 byte copied = 1 read + 1 written,
// so 2 bytes of traffic) with k processes copying at once, the best repeat measured for any k' ≤ k (other load only
// slows a probe; no more than min(W, cores) ranks run at a time). Below 2 × the last-level cache the previous iteration's data can still be in cache,
// so the bound does not hold there and rows get none.
import { busbw } from "../dist/metrics/bandwidth.js";
import { stageKind } from "../dist/stages/index.js";

/** S for each op, in the sense results.json's "size" (and so busbw) uses it. */
export const SIZE_MEANING = {
  allreduce: "the tensor's bytes",
  reduce_scatter: "input bytes per rank",
  all_gather: "total output bytes",
  gather: "the root's total bytes",
  all_to_all: "bytes per rank",
  broadcast: "the tensor's bytes",
};

/** Unavoidable memory traffic in bytes, summed over the W ranks, for size S (see the table above). */
export const TRAFFIC = {
  allreduce: { bytes: (W, S) => 2 * W * S, text: "2·W·S (W inputs of S read, W outputs of S written)" },
  reduce_scatter: { bytes: (W, S) => (W + 1) * S, text: "(W + 1)·S (W inputs of S read, W outputs of S/W written)" },
  all_gather: { bytes: (W, S) => (W + 1) * S, text: "(W + 1)·S (W inputs of S/W read, W outputs of S written)" },
  gather: { bytes: (W, S) => 2 * S, text: "2·S (W inputs of S/W read, the root's output of S written)" },
  all_to_all: { bytes: (W, S) => 2 * W * S, text: "2·W·S (W inputs of S read, W outputs of S written)" },
  broadcast: { bytes: (W, S) => W * S, text: "W·S (the root's S read in place, W − 1 outputs of S written)" },
};

export const OPS = Object.keys(TRAFFIC);

/** The bound holds only where the op's data cannot be served from cache by the previous iteration. */
export const CACHE_FACTOR = 2;

/** nccl-tests' bus-bandwidth factor, from the runner's own stage kinds (what results.json's busbw used). */
export function busFactor(op, W) {
  return stageKind({ op }).busFactor(W, { op });
}

/** busbw in GB/s (1e9 bytes per second), from the runner's own formula. */
export function busBandwidth(op, W, bytes, timeUs) {
  return busbw(bytes, timeUs, busFactor(op, W));
}

/** How many processes can copy at once at world size W. */
export const copiers = (W, cores) => Math.min(W, cores);

/**
 * The memory bound for one row: t_min in µs and busbw in GB/s, or null where the data fits in
 * CACHE_FACTOR × cacheBytes. `bw` maps a measured k to a copy's aggregate bandwidth of k processes (bytes
 * copied per second); the best one with k ≤ min(W, cores) is used.
 */
export function memoryBound({ op, W, bytes, cores, bw, cacheBytes }) {
  const traffic = TRAFFIC[op].bytes(W, bytes);
  if (!(bytes > 0) || traffic < CACHE_FACTOR * cacheBytes) return null;
  const usable = Object.entries(bw).filter(([k]) => Number(k) <= copiers(W, cores)).map(([, v]) => v);
  if (!usable.length) return null;
  const tMinS = traffic / (2 * Math.max(...usable));
  return { traffic_bytes: traffic, t_min_us: tMinS * 1e6, busbw: busBandwidth(op, W, bytes, tMinS * 1e6) };
}

/** The bound as Markdown: the formula, S and traffic per op, as memoryBound() computes them. */
export function formulaMarkdown(buffers = "256 MiB", cache = "the last-level cache") {
  const rows = OPS.map((op) => `| ${op} | ${SIZE_MEANING[op]} | ${TRAFFIC[op].text} |`);
  return [
    "Every input lives in its rank's private buffer and every result must land in each rank's private buffer,",
    "so whatever the algorithm (staged through the segment, single-copy, Open MPI's), each input byte is read",
    "from memory at least once and each output byte written at least once. Nothing else is unavoidable: a",
    "staging slot or a reduction's partial sums can stay in cache. That traffic, at the best rate a copy",
    "reaches here (memcpy or non-temporal stores, whichever is faster), bounds the time:",
    "",
    "    t_min       = traffic(op, W, S) / (2 × BW_mem(min(W, cores)))",
    "    bound_busbw = busFactor(op, W) × S / t_min",
    "",
    `where BW_mem(k) is the aggregate copy bandwidth of k processes copying ${buffers} buffers at once (bytes`,
    "copied per second; one byte copied is two bytes of traffic), the best repeat of the probes at the start and",
    "the end of the run (other load only slows a probe) for any k' ≤ k, since no more than min(W, cores) ranks",
    "run at once; busFactor is the runner's own (allreduce 2(W−1)/W; reduce_scatter, all_gather, gather,",
    "all_to_all (W−1)/W; broadcast 1). traffic is summed over the W ranks (divide by W for one rank's share):",
    "",
    "| op | S | traffic(op, W, S) |",
    "|---|---|---|",
    ...rows,
    "",
    `The bound holds only once the traffic is at least ${CACHE_FACTOR} × ${cache}: below that the previous iteration's`,
    "data can still be in cache, and those rows get no bound (—). No row can exceed 100% of it unless the",
    "formula is wrong; a row above 100% is reported as such in the verdict, never clamped. What keeps a row",
    "below it is not counted: copies through cache (the staged path copies each byte in and out of the",
    "segment), reads for ownership on ordinary stores, the reduction's arithmetic, and W ranks sharing fewer",
    "cores.",
  ].join("\n");
}
