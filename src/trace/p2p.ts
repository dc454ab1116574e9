// Sends and receives across the ranks' traces (DESIGN.md, "Trace import", point-to-point): each send paired with
// its receive by (source, destination, order on that pair, tag where present), then run in rounds: every pair
// whose both ends are free to run (what each waits for done) goes at once. Collectives are matched in lockstep
// (merge.ts); sends and receives are not, because a ring's rank 0 sends to 1 while 1 sends to 2: no rank's next
// record is its peer's.
import type { RankTrace, TraceCollective } from "./model.js";
import { TraceError } from "./model.js";

export const isP2p = (c: TraceCollective): boolean => c.op === "send" || c.op === "recv";

/** One send and its receive: where each is in its rank's list, for the ranks whose traces were read. */
export interface Transfer {
  key: string;
  from: number;
  to: number;
  /** [trace index, index in its list] of the send and of the receive; undefined where that rank's trace is absent. */
  send?: [number, number];
  recv?: [number, number];
}

/** 0 -> "1st", 2 -> "3rd", 10 -> "11th". */
function nth(k: number): string {
  const n = k + 1;
  return `${n}${n % 100 >= 11 && n % 100 <= 13 ? "th" : ["th", "st", "nd", "rd"][n % 10] ?? "th"}`;
}

/** Every send paired with its receive; a send without its receive (or the reverse) is refused, naming both ranks. */
export function pairTransfers(traces: readonly RankTrace[], keys: readonly string[][]): Map<string, Transfer> {
  const byRank = new Map(traces.map((t, i) => [t.rank, i] as const));
  const transfers = new Map<string, Transfer>();
  traces.forEach((t, i) => t.collectives.forEach((c, n) => {
    if (!isP2p(c)) return;
    const [from, to] = c.op === "send" ? [t.rank, c.peer!] : [c.peer!, t.rank];
    const key = keys[i]![n]!;
    const x = transfers.get(key) ?? { key, from, to };
    x[c.op === "send" ? "send" : "recv"] = [i, n];
    transfers.set(key, x);
  }));
  const at = (p: [number, number]) => traces[p[0]]!.collectives[p[1]]!;
  for (const x of transfers.values()) {
    const k = Number(/#(\d+)$/.exec(x.key)![1]);
    const tag = at((x.send ?? x.recv)!).tag;
    const which = `the ${nth(k)} on that pair${tag === undefined ? "" : `, tag ${tag}`}`;
    if (x.send && !x.recv && byRank.has(x.to)) {
      throw new TraceError(traces[x.send[0]]!.file, `rank ${x.from}'s send to rank ${x.to} (${at(x.send).node ?? at(x.send).name}, ${which}) has no matching receive in rank ${x.to}'s trace (${traces[byRank.get(x.to)!]!.file})`);
    }
    if (x.recv && !x.send && byRank.has(x.from)) {
      throw new TraceError(traces[x.recv[0]]!.file, `rank ${x.to}'s receive from rank ${x.from} (${at(x.recv).node ?? at(x.recv).name}, ${which}) has no matching send in rank ${x.from}'s trace (${traces[byRank.get(x.from)!]!.file})`);
    }
    if (x.send && x.recv) {
      const s = at(x.send), r = at(x.recv);
      const [sn, rn] = [Math.max(s.inCount, s.outCount), Math.max(r.inCount, r.outCount)];
      if (sn !== rn || s.dtype !== r.dtype) {
        throw new TraceError(traces[x.recv[0]]!.file, `rank ${x.from} sends rank ${x.to} ${sn} ${s.traceDtype} (${s.node ?? s.name}) where rank ${x.to} receives ${rn} ${r.traceDtype} (${r.node ?? r.name}), ${which}`);
      }
    }
  }
  return transfers;
}

/**
 * Whether rank i's send or receive at index n may run now: nothing but sends and receives is left undone before
 * it, and what it waits for is done (its dependencies; without them, all before its run of sends and receives).
 */
function free(trace: RankTrace, n: number, next: number, done: Uint8Array): boolean {
  for (let m = next; m < n; m++) if (!done[m] && !isP2p(trace.collectives[m]!)) return false;
  return (trace.collectives[n]!.after ?? []).every((d) => done[d] === 1);
}

/** The transfers that can all run now, in the order their ends come in the ranks' lists. */
export function readyTransfers(traces: readonly RankTrace[], transfers: Map<string, Transfer>, keys: readonly string[][], next: readonly number[], done: readonly Uint8Array[]): Transfer[] {
  const ready: Transfer[] = [], seen = new Set<string>();
  const isFree = (p?: [number, number]) => p === undefined || (!done[p[0]]![p[1]] && free(traces[p[0]]!, p[1], next[p[0]]!, done[p[0]]!));
  traces.forEach((t, i) => {
    for (let n = next[i]!; n < t.collectives.length && isP2p(t.collectives[n]!); n++) {
      const key = keys[i]![n]!;
      if (done[i]![n] || seen.has(key)) continue;
      seen.add(key);
      const x = transfers.get(key)!;
      if (isFree(x.send) && isFree(x.recv)) ready.push(x);
    }
  });
  return ready;
}

/**
 * A round's transfers as send_recv stages: those of one shift and size together, each rank sending and receiving
 * at most once in a stage (the stage sends every rank's tensor to rank + shift).
 */
export function roundStages(round: readonly Transfer[], traces: readonly RankTrace[], W: number): { shift: number; transfers: Transfer[] }[] {
  const stages: { shift: number; sig: string; transfers: Transfer[]; senders: Set<number>; receivers: Set<number> }[] = [];
  for (const x of round) {
    const [i, n] = (x.send ?? x.recv)!;
    const c = traces[i]!.collectives[n]!;
    const shift = (((x.to - x.from) % W) + W) % W;
    const sig = `${shift} ${c.dtype} ${c.traceDtype} ${Math.max(c.inCount, c.outCount)}`;
    let stage = stages.find((s) => s.sig === sig && !s.senders.has(x.from) && !s.receivers.has(x.to));
    if (!stage) stages.push((stage = { shift, sig, transfers: [], senders: new Set(), receivers: new Set() }));
    stage.transfers.push(x);
    stage.senders.add(x.from);
    stage.receivers.add(x.to);
  }
  return stages.map(({ shift, transfers }) => ({ shift, transfers }));
}
