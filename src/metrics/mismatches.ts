// The wrong elements each rank's check located, brought to every rank: fixed slots per op and rank in one
// sum (each rank fills its own), so it costs one exchange, and only when some element is wrong.
import type { NativeCommunicator, NativeOpResult } from "../comm/native.js";
import type { Plan } from "../plan.js";
import type { Mismatch } from "../results.js";

const MAX_PER_RANK = 10;
/** Per mismatch: index, tensor, sourceIndex, from, expected, found. */
const FIELDS = 6;
/** Per op and rank: the count, then the slots. */
const SLOT = 1 + MAX_PER_RANK * FIELDS;

export async function gatherMismatches(comm: NativeCommunicator, plan: Plan, results: NativeOpResult[], timeoutSec: number): Promise<Mismatch[][]> {
  const W = comm.size;
  const mine = new Float64Array(results.length * W * SLOT);
  results.forEach((r, i) => {
    const at = (i * W + comm.rank) * SLOT;
    const found = r.mismatches.slice(0, MAX_PER_RANK);
    mine[at] = found.length;
    found.forEach((m, k) => mine.set([m.index, m.tensor, m.sourceIndex, m.from, m.expected, m.found], at + 1 + k * FIELDS));
  });
  const all = await comm.allreduceF64(mine, "sum", timeoutSec, "(report: mismatches)");
  return results.map((_, i) =>
    Array.from({ length: W }, (__, rank) => {
      const at = (i * W + rank) * SLOT;
      return Array.from({ length: all[at]! }, (___, k): Mismatch => {
        const [index, tensor, sourceIndex, from, expected, found] = all.subarray(at + 1 + k * FIELDS, at + 1 + (k + 1) * FIELDS);
        return { rank, tensor: plan.program.tensors[tensor!]!.name, index: index!, from: from! < 0 ? null : from!, source_index: sourceIndex!, expected: expected!, found: found! };
      });
    }).flat(),
  );
}

/** "stage ar, rank 1: element 7 of x (rank 0's element 7) expected 0.5, found -0.5", one line per mismatch. */
export function describeMismatches(stage: string, list: Mismatch[]): string[] {
  return list.map((m) => {
    const source = m.from === null ? `the reduction of every rank's element ${m.source_index}` : `rank ${m.from}'s element ${m.source_index}`;
    return `stage ${stage}, rank ${m.rank}: output element ${m.index} (from ${m.tensor}, ${source}) expected ${m.expected}, found ${m.found}`;
  });
}
