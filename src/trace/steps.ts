// Which profiled steps a replay holds (DESIGN.md, "Trace import"): by default one, the last that every rank
// recorded completely; `--step N` that one; `--step all` every profiled step, in order, as one iteration.
// Traces without step marks replay whole. Readers put each collective in its step (ET: the span of node ids
// from one ProfilerStep#N node to the next; Kineto: the step event's time window).
import type { RankTrace, TraceCollective } from "./model.js";
import { TraceError } from "./model.js";

export type StepChoice = number | "all";

/** "4, 5, 6" / "1-40" style list for messages, cut short where long. */
function list(steps: readonly number[]): string {
  return steps.length > 12 ? `${steps.slice(0, 6).join(", ")}, ..., ${steps.slice(-3).join(", ")}` : steps.join(", ");
}

/** A rank's collectives cut to those `keep` takes, with each async one's wait moved to the kept list's index. */
function cut(t: RankTrace, keep: (c: TraceCollective) => boolean): TraceCollective[] {
  const kept: TraceCollective[] = [];
  // keptBefore[i]: how many kept collectives come before old index i.
  const keptBefore: number[] = [];
  t.collectives.forEach((c) => {
    keptBefore.push(kept.length);
    if (keep(c)) kept.push(c);
  });
  keptBefore.push(kept.length);
  return kept.map((c) => (c.waitedBefore === undefined ? { ...c } : { ...c, waitedBefore: keptBefore[Math.min(c.waitedBefore, keptBefore.length - 1)] }));
}

/** The traces cut to the chosen steps, and the summary line saying which. */
export function selectSteps(traces: RankTrace[], choice: StepChoice | undefined): { traces: RankTrace[]; line: string } {
  const marked = traces.filter((t) => t.steps && t.steps.numbers.length > 0);
  if (marked.length === 0) {
    if (choice !== undefined) throw new TraceError(traces[0]!.file, `--step ${choice}: the trace records no step marks (ProfilerStep#N); without --step it replays whole`);
    return { traces, line: "steps: the trace marks none (no ProfilerStep#N): it replays whole" };
  }
  const unmarked = traces.find((t) => !t.steps || t.steps.numbers.length === 0);
  if (unmarked) throw new TraceError(unmarked.file, `records no step marks (ProfilerStep#N), while ${marked[0]!.file} does: import traces of one recording`);
  const outside = traces.reduce((n, t) => n + t.collectives.filter((c) => c.step === undefined).length, 0);
  const outsideNote = outside ? `; ${outside} collective${outside > 1 ? "s" : ""} outside any step (set-up) left out` : "";
  if (choice === "all") {
    const all = [...new Set(traces.flatMap((t) => t.steps!.numbers))].sort((a, b) => a - b);
    return {
      traces: traces.map((t) => ({ ...t, collectives: cut(t, (c) => c.step !== undefined), dropped: t.dropped.filter((d) => d.step !== undefined) })),
      line: `steps: all ${all.length} profiled (ProfilerStep#${list(all)}) in order, as one replay iteration (--step all)${outsideNote}`,
    };
  }
  let chosen: number;
  let why: string;
  if (choice !== undefined) {
    for (const t of traces) {
      if (!t.steps!.numbers.includes(choice)) throw new TraceError(t.file, `--step ${choice}: this trace's steps are ProfilerStep#${list(t.steps!.numbers)}`);
    }
    chosen = choice;
    why = `--step ${choice}`;
  } else {
    // The last step that every rank marked, did not cut short, and holds collectives on.
    const whole = (t: RankTrace, s: number) => t.steps!.numbers.includes(s) && !t.steps!.incomplete.includes(s) && t.collectives.some((c) => c.step === s);
    const common = [...new Set(traces.flatMap((t) => t.steps!.numbers))].sort((a, b) => a - b).filter((s) => traces.every((t) => whole(t, s)));
    if (common.length === 0) {
      const each = traces.slice(0, 4).map((t) => `rank ${t.rank}: ${list(t.steps!.numbers)}`).join("; ");
      throw new TraceError(traces[0]!.file, `no profiled step that every rank recorded completely with collectives in it (${each}): choose one with --step N, or --step all`);
    }
    chosen = common.at(-1)!;
    why = "the last that every rank recorded completely";
  }
  const others = [...new Set(traces.flatMap((t) => t.steps!.numbers))].filter((s) => s !== chosen).sort((a, b) => a - b);
  const kept = traces.map((t) => ({ ...t, collectives: cut(t, (c) => c.step === chosen), dropped: t.dropped.filter((d) => d.step === chosen) }));
  const empty = kept.find((t) => t.collectives.length === 0);
  if (empty) throw new TraceError(empty.file, `ProfilerStep#${chosen} holds no collectives on rank ${empty.rank} (steps with them: ${list([...new Set(traces.find((t) => t.file === empty.file)!.collectives.map((c) => c.step).filter((s): s is number => s !== undefined))])})`);
  return {
    traces: kept,
    line: `step: ProfilerStep#${chosen} (${why})${others.length ? `; left out: ${list(others)} (--step N picks one, --step all keeps them all)` : ""}${outsideNote}`,
  };
}
