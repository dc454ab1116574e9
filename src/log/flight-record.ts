// A rank's flight record (its last ops, from native code) as log lines: what it was doing when a deadline
// passed or a peer died, so the logs of all ranks side by side show where the job stood.
import type { FlightEntry, NativeCommunicator } from "../comm/native.js";

function peerList(word: string, ranks: number[], count: number): string {
  if (count === 0) return "";
  const more = count > ranks.length ? ` +${count - ranks.length} more` : "";
  return `${word} ${ranks.join(",")}${more}`;
}

function duration(us: number): string {
  return us >= 1e6 ? `${(us / 1e6).toFixed(1)} s` : us >= 1e3 ? `${(us / 1e3).toFixed(1)} ms` : `${us.toFixed(0)} us`;
}

/** `#812 step 40 allreduce ar 4194304 B to 3 from 1: timed out after 5.0 s (started 5.1 s ago)` */
export function formatFlightEntry(e: FlightEntry): string {
  const step = e.step >= 0 ? ` step ${e.step}` : "";
  const peers = e.allPeers
    ? " with every rank"
    : [peerList("to", e.to, e.toCount), peerList("from", e.from, e.fromCount)].map((p) => (p ? ` ${p}` : "")).join("");
  const how = e.state === "running" ? `running for ${duration(e.us)}` : `${e.state} after ${duration(e.us)}`;
  return `#${e.seq}${step} ${e.op} ${e.stage} ${e.bytes} B${peers}: ${how} (started ${duration(e.startedMsAgo * 1e3)} ago)`;
}

/** Ops not done when the job stopped (running, timed out, failed), at most `max`; else the last op. */
export function inFlight(entries: readonly FlightEntry[], max = 3): FlightEntry[] {
  const open = entries.filter((e) => e.state !== "done");
  return (open.length ? open : entries).slice(-max);
}

/**
 * What to log after a failed op, one message of many lines (so no other log line lands inside it);
 * undefined when the communicator cannot tell (closed, or an op still runs).
 */
export function flightRecordText(comm: NativeCommunicator): string | undefined {
  const entries = flightEntries(comm);
  return entries.length ? recordText(entries) : undefined;
}

/** The lines of a flight record, under a heading. */
export function recordText(entries: readonly FlightEntry[]): string {
  return [`flight record (last ${entries.length} ops, oldest first):`, ...entries.map((e) => `  ${formatFlightEntry(e)}`)].join("\n");
}

/** The communicator's flight record; none when it cannot tell (closed, or an op still runs). */
export function flightEntries(comm: NativeCommunicator): FlightEntry[] {
  try {
    return comm.flightRecord();
  } catch {
    return [];
  }
}
