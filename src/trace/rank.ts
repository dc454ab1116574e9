import { MAX_COLLECTIVES, MAX_WORLD, maxOf } from "./limits.js";
import type { Dropped, RankTrace, StepInfo, TraceCollective, TraceGroup } from "./model.js";
import { TraceError } from "./model.js";

/** What the file name says, for traces that do not record their rank. */
export interface RankHint {
  fileRank?: number;
}

/** Where the world comes from for traces that record none: --world, else the number of traces given. */
export interface WorldHint {
  world?: number;
  files: number;
}

export interface ReadRank {
  file: string;
  format: RankTrace["format"];
  schema: string;
  collectives: TraceCollective[];
  dropped: Dropped[];
  notes: string[];
  groups: TraceGroup[];
  worldSize?: number;
  /** The rank as the trace records it, and where; else the file name's. */
  rank?: { rank: number; from: string };
  fileRank?: number;
  /**
   * A trace without a process-group table (ET 1.0.1, Chakra): the group its collectives name as the world,
   * whose ranks are filled in once every trace is read; the lengths its split lists imply, to check against.
   */
  defaultWorld?: { group: TraceGroup; splitLengths: Set<number>; needsWorld?: string; settled?: () => void };
  steps?: StepInfo;
  /** Why there is nothing to replay, where a reader knows better than "no collectives". */
  empty?: string;
}

/** The world of traces that record none: --world, else the split lists' length, else the traces given. */
function defaultWorld(read: ReadRank[], hint: WorldHint): { size: number; from: string } {
  if (hint.world !== undefined) return { size: hint.world, from: "--world" };
  const lengths = new Set(read.flatMap((r) => [...(r.defaultWorld?.splitLengths ?? [])]));
  if (lengths.size === 1) return { size: [...lengths][0]!, from: "its split lists' length" };
  return { size: hint.files, from: `the ${hint.files} trace${hint.files > 1 ? "s" : ""} given` };
}

/** The readers' results with their ranks (the trace's own, else the file name's) and world sizes settled. */
export function finishRanks(read: ReadRank[], hint: WorldHint): RankTrace[] {
  if (read.length === 0) throw new TraceError("trace import", "no traces read");
  const needing = read.filter((r) => r.defaultWorld);
  if (needing.length) {
    const needsWorld = needing.find((r) => r.defaultWorld!.needsWorld);
    if (needsWorld && hint.world === undefined) throw new TraceError(needsWorld.file, needsWorld.defaultWorld!.needsWorld!);
    const world = defaultWorld(needing, hint);
    if (world.size > MAX_WORLD) throw new TraceError(needing[0]!.file, `a world of ${world.size} ranks (from ${world.from}) is more than the importer's cap of ${MAX_WORLD}`);
    for (const r of needing) {
      const d = r.defaultWorld!;
      for (const len of d.splitLengths) {
        if (len !== world.size) {
          throw new TraceError(r.file, `its split lists name ${len} ranks, but the world is ${world.size} (from ${world.from}): the trace records no process-group table, so its groups are taken as the world${hint.world === undefined ? "; give every rank's trace or --world N" : ""}`);
        }
      }
      d.group.ranks = Array.from({ length: world.size }, (_, i) => i);
      d.settled?.();
      r.worldSize = world.size;
      r.notes.push(`the trace records no process-group table: its collectives run on the world of ${world.size} ranks (from ${world.from})`);
    }
  }
  return read.map(finishRank);
}

/** What was left out and why, the most common reasons first: "2020 × nccl:all_reduce (recorded without shapes: ...)". */
function leftOut(dropped: Dropped[]): string {
  const counts = new Map<string, { what: Set<string>; n: number; why: string }>();
  for (const d of dropped) {
    const e = counts.get(d.why) ?? { what: new Set<string>(), n: 0, why: d.why };
    e.what.add(d.what);
    e.n++;
    counts.set(d.why, e);
  }
  return [...counts.values()].sort((a, b) => b.n - a.n).slice(0, 4).map((e) => `${e.n} × ${[...e.what].slice(0, 4).join(", ")} (${e.why})`).join("; ");
}

function finishRank(read: ReadRank): RankTrace {
  if (read.collectives.length === 0) {
    throw new TraceError(read.file, `no collectives to replay${read.empty ? ` (${read.empty})` : read.dropped.length ? `: ${leftOut(read.dropped)}` : ""}`);
  }
  if (read.collectives.length > MAX_COLLECTIVES) throw new TraceError(read.file, `${read.collectives.length} collectives, more than the importer's cap of ${MAX_COLLECTIVES}`);
  const rank = read.rank ?? (read.fileRank !== undefined ? { rank: read.fileRank, from: "the file name" } : undefined);
  if (!rank) throw new TraceError(read.file, "the trace does not record its rank and the file name holds no number");
  if (!Number.isInteger(rank.rank) || rank.rank < 0 || rank.rank >= MAX_WORLD) throw new TraceError(read.file, `rank ${String(rank.rank)} (from ${rank.from}) is not an integer from 0 to ${MAX_WORLD - 1}`);
  let largest = -1;
  for (const c of read.collectives) largest = Math.max(largest, maxOf(c.group.ranks));
  largest += 1;
  const worldSize = read.worldSize ?? largest;
  if (rank.rank >= worldSize) throw new TraceError(read.file, `rank ${rank.rank} (from ${rank.from}) is outside the trace's world of ${worldSize} ranks`);
  if (largest > worldSize) throw new TraceError(read.file, `its process groups name rank ${largest - 1}, outside the trace's world of ${worldSize} ranks`);
  return {
    file: read.file, format: read.format, schema: read.schema, rank: rank.rank, rankFrom: rank.from, worldSize,
    groups: read.groups, collectives: read.collectives, dropped: read.dropped, notes: read.notes, steps: read.steps,
  };
}
