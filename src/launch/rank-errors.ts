// The ranks' error lines under `runner launch`, gathered: an error that several ranks give is printed once
// with the ranks that gave it (16 ranks refusing the same thing: one line, not 16).
import { describeRanks } from "../comm/topology.js";

/** A rank's error as cli/index.ts prints it: "runner (rank 3): cause", then its details, indented. */
const ERROR_LINE = /^runner \(rank (\d+)\): (.*)$/;

export class RankErrors {
  private readonly blocks = new Map<number, string[]>();

  /** Keeps `line` when it is rank `rank`'s error (true); other lines are the caller's to print. */
  take(rank: number, line: string): boolean {
    const m = ERROR_LINE.exec(line);
    if (!m || Number(m[1]) !== rank) return false;
    const block = this.blocks.get(rank) ?? [];
    this.blocks.set(rank, [...block, m[2]!]);
    return true;
  }

  /**
   * Each distinct error once, lowest rank first, naming its ranks; then its lowest rank's details, each
   * marked as that rank's unless every rank of the group gave the same (the folder of the flight records).
   */
  lines(): string[] {
    const groups = new Map<string, { ranks: number[]; details: string[][] }>();
    for (const [rank, [cause, ...details]] of [...this.blocks].sort(([a], [b]) => a - b)) {
      const group = groups.get(cause!) ?? { ranks: [], details: [] };
      group.ranks.push(rank);
      group.details.push(details);
      groups.set(cause!, group);
    }
    return [...groups].flatMap(([cause, { ranks, details }]) => [
      `runner (${describeRanks(ranks)}): ${cause}`,
      ...details[0]!.map((d) => (details.every((other) => other.includes(d)) ? d : `${d} (${describeRanks([ranks[0]!])})`)),
    ]);
  }
}
