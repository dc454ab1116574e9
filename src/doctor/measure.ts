// One round of doctor's measurements on the job's communicator: the paired ranks exchange a small message
// (latency) and a large one (bandwidth) both ways at once, with send_recv's `peer`; the other ranks sit the
// round out. Every rank learns every pair's numbers, so all decide the next round alike.
import type { NativeCommunicator, NativeProgram } from "../comm/native.js";
import type { Topology } from "../comm/topology.js";
import { median, type LinkMeasure, type Pair } from "./judge.js";
import type { MeasureRound } from "./schedule.js";

export interface MeasureSettings {
  /** The large message, bytes (a multiple of 4). */
  bytes: number;
  iterations: number;
  warmup: number;
  timeoutSec: number;
}

/** The small message that measures latency, and how many times it goes each way. */
const SMALL_BYTES = 8;
const LATENCY_ITERATIONS = 20;

/** The two ranks that stand for a pair of hosts: the lowest of each, or a host's two lowest for [h, h]. */
function ranksOf(hosts: Topology["hosts"], [a, b]: Pair): [number, number] {
  return a === b ? [hosts[a]!.ranks[0]!, hosts[a]!.ranks[1]!] : [hosts[a]!.ranks[0]!, hosts[b]!.ranks[0]!];
}

/** One exchange of `bytes` with `peer`, `iterations` times; this rank's median time. */
async function exchange(comm: NativeCommunicator, peer: number, bytes: number, iterations: number, s: MeasureSettings): Promise<number> {
  const fill = { kind: "rank" as const, seed: 0, a: 0, b: 0 };
  const program: NativeProgram = {
    tensors: [{ name: "doctor", dtype: "float32", count: bytes / 4, fill }],
    ops: [{
      stage: `doctor ${bytes} B`, kind: "send_recv", inputs: [0], shift: 1, peer, algorithm: "auto", lane: 0, waitFor: [], groups: null, timeoutSec: s.timeoutSec,
    }],
    warmup: s.warmup,
    iterations,
    check: false,
    timeoutSec: s.timeoutSec,
  };
  const [result] = await comm.run(program);
  return median(Array.from(result!.timeUs));
}

/** Runs rounds of `pairs` of hosts on `comm`. */
export function measurer(comm: NativeCommunicator, hosts: Topology["hosts"], s: MeasureSettings): MeasureRound {
  return async (pairs) => {
    const ranks = pairs.map((p) => ranksOf(hosts, p));
    const mine = ranks.find((r) => r.includes(comm.rank));
    // An idle rank exchanges with itself: a copy, which no other rank waits for.
    const peer = mine ? (mine[0] === comm.rank ? mine[1] : mine[0]) : comm.rank;
    const times = new Float64Array(2 * comm.size);
    // Latency first, while no queue on the way still holds the large messages.
    times[2 * comm.rank + 1] = await exchange(comm, peer, SMALL_BYTES, LATENCY_ITERATIONS, s);
    times[2 * comm.rank] = await exchange(comm, peer, s.bytes, s.iterations, s);
    const all = await comm.allreduceF64(times, "sum", s.timeoutSec, "(doctor: times)");
    // A pair is as fast as its slower side.
    return ranks.map(([a, b]): LinkMeasure => {
      const us = Math.max(all[2 * a]!, all[2 * b]!);
      return { gbps: s.bytes / (us * 1e3), us: Math.max(all[2 * a + 1]!, all[2 * b + 1]!) };
    });
  };
}
