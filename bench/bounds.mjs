// The memcpy-implied ceiling of each collective's bus bandwidth, for the shm backend's algorithm "shared"
// (chunks staged through the shared segment, reductions read straight out of it). One module for the
// numbers and the formula text docs/PERFORMANCE.md prints, so the two cannot drift apart.
//
//   t_min = W × copies(op, W) × S / BW_agg(min(W, cores))
//   ceiling_busbw = busFactor(op, W) × S / t_min
//
// copies(op, W) is one rank's unavoidable memory traffic in units of S (1 copy = read + write of every byte
// of S): its input read and its output written once; W ranks do it at once and share BW_agg, the aggregate
// bandwidth of min(W, cores) concurrent copier processes. gather is the exception: the root's own traffic
// bounds it, t_min = (1 + 1/W)/2 × S / BW_agg(1).
import { busbw } from "../dist/metrics/bandwidth.js";
import { stageKind } from "../dist/stages/index.js";

/** The algorithm the bounds describe; rows that ran another one get no ceiling. */
export const BOUNDED_ALGORITHM = "shared";

/** S for each op, in the sense results.json's "size" (and so busbw) uses it. */
export const SIZE_MEANING = {
  allreduce: "the tensor's bytes",
  reduce_scatter: "input bytes per rank",
  all_gather: "total output bytes",
  gather: "the root's total bytes",
  all_to_all: "bytes per rank",
  broadcast: "the tensor's bytes",
};

/**
 * One rank's unavoidable memory traffic under "shared", in units of S: reading its input and writing its
 * output once each (1 copy = read + write of every byte of S). The staging through the slots is not
 * counted: chunks rotate through W × slots × slotBytes of slots (1 MiB per rank and lane), which stays in
 * the last-level cache, so a peer's chunk is read from cache. null where the root alone bounds the time.
 */
export const COPIES = {
  allreduce: { copies: () => 1, text: "1 (read S, write S)" },
  reduce_scatter: { copies: (W) => (1 + 1 / W) / 2, text: "(1 + 1/W)/2 (read S, write S/W)" },
  all_gather: { copies: (W) => (1 + 1 / W) / 2, text: "(1 + 1/W)/2 (read S/W, write S)" },
  gather: { copies: null, text: "— (the root reads S/W and writes S: t_min = (1 + 1/W)/2 × S / BW_agg(1))" },
  all_to_all: { copies: () => 1, text: "1 (read S, write S)" },
  broadcast: { copies: () => 1 / 2, text: "1/2 (the root reads S, the others write it)" },
};

export const OPS = Object.keys(COPIES);

/** nccl-tests' bus-bandwidth factor, from the runner's own stage kinds (what results.json's busbw used). */
export function busFactor(op, W) {
  return stageKind({ op }).busFactor(W, { op });
}

/** busbw in GB/s (1e9 bytes per second), from the runner's own formula. */
export function busBandwidth(op, W, bytes, timeUs) {
  return busbw(bytes, timeUs, busFactor(op, W));
}

/** How many copier processes share the memory bandwidth at world size W. */
export const copiers = (W, cores) => Math.min(W, cores);

/**
 * The ceiling's t_min in µs and busbw in GB/s for one row, or null for an algorithm the bounds do not
 * describe. `bw(k)` is the measured aggregate memcpy bandwidth of k processes in bytes per second.
 */
export function ceiling({ op, W, bytes, algorithm, cores, bw }) {
  if (algorithm !== BOUNDED_ALGORITHM || !(op in COPIES) || bytes <= 0) return null;
  const c = COPIES[op].copies;
  const tMinS = c === null ? ((1 + 1 / W) / 2) * bytes / bw(1) : (W * c(W) * bytes) / bw(copiers(W, cores));
  return { t_min_us: tMinS * 1e6, busbw: busBandwidth(op, W, bytes, tMinS * 1e6) };
}

/** The bound as Markdown: the formula, S and copies per op, as ceiling() computes them. */
export function formulaMarkdown(buffers = "256 MiB") {
  const rows = OPS.map((op) => `| ${op} | ${SIZE_MEANING[op]} | ${COPIES[op].text} |`);
  return [
    "For rows that ran algorithm `shared`:",
    "",
    "    t_min         = W × copies(op, W) × S / BW_agg(min(W, cores))",
    "    ceiling_busbw = busFactor(op, W) × S / t_min",
    "",
    `where BW_agg(k) is the aggregate memcpy bandwidth of k processes copying ${buffers} buffers at once (bytes`,
    "copied per second, median of the repeats, measured in the same run), busFactor is the runner's own",
    "(allreduce 2(W−1)/W; reduce_scatter, all_gather, gather, all_to_all (W−1)/W; broadcast 1), and copies is",
    "one rank's unavoidable memory traffic in units of S (1 copy = read + write of every byte of S): reading",
    "its input and writing its output once. Staging through the segment is not counted: chunks rotate through",
    "a few cache-sized slots per rank (4 × 256 KiB per lane; 8 MiB in all at W = 8, inside the 32 MiB last-level",
    "cache), so a peer's chunk is read from cache, not memory. (A first version of this bound counted every",
    "staging copy at memcpy speed; measured rates beat it by up to 2×, so it bounded nothing.)",
    "",
    "| op | S | copies(op, W) |",
    "|---|---|---|",
    ...rows,
    "",
    "Small messages stay in cache between iterations, so rows below 16 MiB may exceed their ceiling; the 70%",
    "target is judged on the large rows. Rows that ran another algorithm have no ceiling (—).",
  ].join("\n");
}
