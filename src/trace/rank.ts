import type { Dropped, RankTrace, TraceCollective, TraceGroup } from "./model.js";
import { TraceError } from "./model.js";

/** What the file name says, for traces that do not record their rank. */
export interface RankHint {
  fileRank?: number;
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
  /** The rank as the trace records it, and where. */
  rank?: { rank: number; from: string };
}

/** A reader's result with its rank (the trace's own, else the file name's) and world size settled. */
export function finishRank(read: ReadRank, hint: RankHint): RankTrace {
  if (read.collectives.length === 0) {
    const why = read.dropped.length ? ` (left out: ${[...new Set(read.dropped.map((d) => d.what))].join(", ")})` : "";
    throw new TraceError(read.file, `no collectives to replay${why}`);
  }
  const rank = read.rank ?? (hint.fileRank !== undefined ? { rank: hint.fileRank, from: "the file name" } : undefined);
  if (!rank) throw new TraceError(read.file, "the trace does not record its rank and the file name holds no number");
  const largest = Math.max(...read.collectives.flatMap((c) => c.group.ranks)) + 1;
  const worldSize = read.worldSize ?? largest;
  if (rank.rank >= worldSize) throw new TraceError(read.file, `rank ${rank.rank} (from ${rank.from}) is outside the trace's world of ${worldSize} ranks`);
  const { rank: _, ...rest } = read;
  return { ...rest, rank: rank.rank, rankFrom: rank.from, worldSize: Math.max(worldSize, largest) };
}
