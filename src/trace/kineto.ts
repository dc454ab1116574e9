// Kineto / Chrome traces from torch.profiler, from every PyTorch 2.x. Where the collectives' sizes are, by
// version (the reader takes the first that holds any):
//  - PyTorch 2.2 on: the NCCL kernels (`cat: "kernel"`) carry their collective's arguments, copied from the
//    record_param_comms CPU op that launched them;
//  - the record_param_comms CPU ops themselves (`Collective name`, `dtype`, `In msg nelems`...): the only
//    record at world size 1, where NCCL launches no kernel;
//  - before 2.2: the CPU-side `nccl:<op>` annotations (`Input Dims`, `Input type`), as HTA reads them; no
//    group, root or splits there: the collectives run on the world.
// CPU-side records are matched to the NCCL kernels they launched (the kernel's launch, found by its
// correlation id, lies inside the op) for the trace's own duration. `distributedInfo` names the rank and the
// process groups. Collectives replay in the order they started (`ts`), and a ProfilerStep#N event's time
// window is its step.
import { count, GroupTable, MAX_WORLD, rankOf, sizeOf } from "./limits.js";
import type { Dropped, StepInfo, TraceCollective, TraceGroup } from "./model.js";
import { outputOf, quoted, TraceError } from "./model.js";
import { jobDtype, notReplayed, ranksFromStride, traceOp } from "./names.js";
import type { RankHint, ReadRank } from "./rank.js";
import type { JsonTrace } from "./read.js";

interface KinetoEvent {
  cat?: unknown;
  name: string;
  ts: number;
  dur?: number;
  tid?: unknown;
  args: Record<string, unknown>;
}

/** Why NCCL kernels or nccl:<op> annotations say nothing of their sizes. */
const WITHOUT_SHAPES = "recorded without shapes: profile with record_shapes=True";
const RECORDING = "record with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])";

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** "[0, 1, 2]" -> numbers; undefined where the profiler cut the list ("[0, 1, ..., 63]"). */
export function parseRankList(value: unknown, file = "", where = ""): number[] | undefined {
  let items: unknown[];
  if (Array.isArray(value)) items = value;
  else if (typeof value !== "string" || value.includes("...") || value.includes("…")) return undefined;
  else {
    if (value.length > 16 * MAX_WORLD) throw new TraceError(file, `${where}: a rank list longer than the cap of ${MAX_WORLD} ranks`);
    const inner = value.trim().replace(/^\[|\]$/g, "").trim();
    items = inner ? inner.split(",").map((x) => x.trim()) : [];
  }
  if (items.length > MAX_WORLD) throw new TraceError(file, `${where}: a rank list of ${items.length}, more than the cap of ${MAX_WORLD} ranks`);
  return items.map((r) => rankOf(r, file, where, "a listed rank"));
}

function splitsOf(value: unknown, file: string, where: string, what: string): number[] {
  if (value === undefined || value === null || value === "") return [];
  let items: unknown[];
  if (Array.isArray(value)) items = value;
  else if (typeof value === "string") {
    if (value.length > 32 * MAX_WORLD) throw new TraceError(file, `${where}: ${what} longer than the cap of ${MAX_WORLD} ranks`);
    const inner = value.trim().replace(/^\[|\]$/g, "").trim();
    items = inner ? inner.split(",").map((x) => x.trim()) : [];
  } else throw new TraceError(file, `${where}: ${what} is ${quoted(value)}, expected a list of counts`);
  if (items.length > MAX_WORLD) throw new TraceError(file, `${where}: ${what} has ${items.length} entries, more than the cap of ${MAX_WORLD} ranks`);
  return items.map((n) => count(n, file, where, `an entry of ${what}`));
}

const present = (args: Record<string, unknown>, key: string) => args[key] !== undefined && args[key] !== null && args[key] !== "";

/** The group of a collective: its own rank list, else rebuilt from start and stride, else the pg_config's. */
function groupOf(args: Record<string, unknown>, configs: Map<string, number[]>, worldSize: number | undefined, file: string, where: string, table: GroupTable): TraceGroup {
  const name = String(args["Process Group Name"] ?? "0").slice(0, 200);
  const key = JSON.stringify([name, args["Group size"], args["Process Group Ranks"] ?? null, args["Global rank start"], args["Global rank stride"]]);
  return table.get(key, () => makeGroup(args, name, configs, worldSize, file, where));
}

function makeGroup(args: Record<string, unknown>, name: string, configs: Map<string, number[]>, worldSize: number | undefined, file: string, where: string): TraceGroup {
  const size = present(args, "Group size") ? sizeOf(args["Group size"], file, where, '"Group size"') : worldSize ?? 1;
  const listed = parseRankList(args["Process Group Ranks"], file, where);
  if (listed && listed.length > 0) {
    if (new Set(listed).size !== listed.length) throw new TraceError(file, `${where}: "Process Group Ranks" lists a rank twice`);
    return { name, ranks: listed };
  }
  if (present(args, "Global rank start") && present(args, "Global rank stride")) {
    const start = rankOf(args["Global rank start"], file, where, '"Global rank start"'), stride = sizeOf(args["Global rank stride"], file, where, '"Global rank stride"');
    if (start + stride * (size - 1) >= MAX_WORLD) throw new TraceError(file, `${where}: process group ${quoted(name)} reaches past rank ${MAX_WORLD - 1}`);
    return { name, ranks: ranksFromStride(start, stride, size) };
  }
  return { name, ranks: configs.get(name) ?? ranksFromStride(0, 1, size) };
}

/** distributedInfo's groups whose ranks it lists in full (an empty list: the whole world); cut lists are left to the collectives. */
function pgConfigs(info: Record<string, unknown> | undefined, worldSize: number | undefined, file: string): Map<string, number[]> {
  const configs = new Map<string, number[]>();
  const list = info?.pg_config;
  if (list === undefined) return configs;
  if (!Array.isArray(list)) throw new TraceError(file, "distributedInfo.pg_config is not a list");
  for (const pg of list) {
    if (!isObject(pg)) throw new TraceError(file, "distributedInfo.pg_config holds a group that is not an object");
    const name = String(pg.pg_name).slice(0, 200);
    const where = `distributedInfo.pg_config ${quoted(name)}`;
    const ranks = parseRankList(pg.ranks ?? [], file, where);
    const size = pg.pg_size === undefined ? undefined : sizeOf(pg.pg_size, file, where, "pg_size");
    if (ranks && ranks.length > 0) configs.set(name, ranks);
    else if (ranks && size !== undefined && size === worldSize) configs.set(name, ranksFromStride(0, 1, size));
  }
  return configs;
}

const ROOTED = new Set(["broadcast", "reduce", "gather", "scatter"]);

/**
 * A collective from arguments as record_param_comms records them (on the op, or copied to its kernel). The group
 * is read only for a record that is replayed: a wait has none (PyTorch writes -1 for its ranks), and what is not
 * replayed is counted as dropped, not checked.
 */
function fromArgs(ev: KinetoEvent, findGroup: () => TraceGroup, file: string, where: string, dropped: Dropped[]): TraceCollective | undefined {
  const args = ev.args;
  const name = String(args["Collective name"]).slice(0, 200);
  const op = traceOp(name);
  if (!op) {
    dropped.push({ what: name.slice(0, 80), why: notReplayed(name) });
    return undefined;
  }
  const dtypeName = String(args.dtype ?? "").slice(0, 80);
  const dtype = jobDtype(dtypeName);
  if (!dtype) {
    dropped.push({ what: name, why: `dtype ${quoted(dtypeName)} has no job dtype` });
    return undefined;
  }
  const group = findGroup();
  const peerKey = op === "send" ? "Dst Rank" : op === "recv" ? "Src Rank" : undefined;
  let peer: number | undefined;
  if (peerKey) {
    if (!present(args, peerKey)) throw new TraceError(file, `${where}: a ${name} names no peer (${quoted(peerKey)})`);
    const local = rankOf(args[peerKey], file, where, quoted(peerKey));
    peer = group.ranks[local] ?? local;
  }
  return {
    op, name, dtype, traceDtype: dtypeName,
    inCount: present(args, "In msg nelems") ? count(args["In msg nelems"], file, where, '"In msg nelems"') : 0,
    outCount: present(args, "Out msg nelems") ? count(args["Out msg nelems"], file, where, '"Out msg nelems"') : 0,
    inSplits: splitsOf(args["In split size"], file, where, '"In split size"'),
    outSplits: splitsOf(args["Out split size"], file, where, '"Out split size"'),
    group,
    // Kineto records no root: rooted ops replay from the group's first rank (PARAM's reader does the same).
    root: ROOTED.has(op) ? group.ranks[0] : undefined,
    peer,
    inPlace: false,
    seq: typeof args.Seq === "number" && Number.isSafeInteger(args.Seq) ? args.Seq : undefined,
    async: false,
  };
}

/** A pre-2.2 `nccl:<op>` annotation: the op from its name, the sizes from its inputs' dims and types. */
function fromAnnotation(ev: KinetoEvent, world: TraceGroup, file: string, where: string, dropped: Dropped[]): TraceCollective | undefined {
  const name = ev.name.slice("nccl:".length, 200);
  const op = traceOp(name);
  if (!op) {
    dropped.push({ what: ev.name.slice(0, 80), why: notReplayed(name) });
    return undefined;
  }
  if (op === "send" || op === "recv") {
    dropped.push({ what: ev.name, why: "a pre-2.2 annotation records no peer" });
    return undefined;
  }
  const dims = ev.args["Input Dims"], types = ev.args["Input type"];
  if (!Array.isArray(dims) || !Array.isArray(types)) {
    dropped.push({ what: ev.name, why: WITHOUT_SHAPES });
    return undefined;
  }
  // Each tensor input: its elements (the product of its dims) and dtype.
  const pieces: number[] = [];
  let dtypeName: string | undefined;
  for (let i = 0; i < Math.min(dims.length, types.length, MAX_WORLD); i++) {
    const t = types[i], d = dims[i];
    if (typeof t !== "string" || !jobDtype(t) || !Array.isArray(d) || d.length === 0) continue;
    if ((dtypeName ??= t) !== t) continue;
    let n = 1;
    for (const x of d.slice(0, 64)) n *= count(x, file, where, '"Input Dims"');
    pieces.push(count(n, file, where, "a tensor's elements"));
  }
  if (!dtypeName || pieces.length === 0) {
    dropped.push({ what: ev.name, why: `no tensor input with a job dtype (${quoted(types.join(", "))})` });
    return undefined;
  }
  let n = 0;
  for (const p of pieces) n += p;
  const inCount = count(n, file, where, "its elements");
  // What the annotation records is the input: all_gather's is one rank's part, reduce_scatter's the whole.
  const outCount = outputOf(op, inCount, world.ranks.length);
  return {
    op: op === "all_to_allv" ? "all_to_all" : op, name, dtype: jobDtype(dtypeName)!, traceDtype: dtypeName,
    inCount, outCount: count(outCount, file, where, "its out elements"),
    pieces: op === "reduce_scatter" && pieces.length > 1 ? pieces : undefined,
    group: world, root: ROOTED.has(op) ? 0 : undefined, inPlace: false, async: false,
  };
}

/** An event as the reader uses it: name, ts and args checked. */
function event(e: Record<string, unknown>, file: string): KinetoEvent {
  const name = e.name as string;
  const ts = e.ts;
  if (typeof ts !== "number" || !Number.isFinite(ts)) throw new TraceError(file, `event ${quoted(name)}: ts is ${quoted(ts)}, expected a number`);
  const where = `event ${quoted(name)} at ts ${ts}`;
  if (e.dur !== undefined && (typeof e.dur !== "number" || !Number.isFinite(e.dur) || e.dur < 0)) throw new TraceError(file, `${where}: dur is ${quoted(e.dur)}, expected a number >= 0`);
  if (e.args !== undefined && !isObject(e.args)) throw new TraceError(file, `${where}: args is not an object`);
  return { cat: e.cat, name, ts, dur: e.dur as number | undefined, tid: e.tid, args: (e.args ?? {}) as Record<string, unknown> };
}

const STEP = /^ProfilerStep#(\d+)$/;

/** The step marks' windows, in time order; where a time falls: the step whose window holds it. */
function stepWindows(marks: KinetoEvent[], file: string): { info?: StepInfo; at: (ts: number) => number | undefined } {
  const windows = marks.map((m) => {
    const step = Number(STEP.exec(m.name)![1]);
    if (!Number.isSafeInteger(step)) throw new TraceError(file, `event ${quoted(m.name)}: a step number out of range`);
    return { step, from: m.ts, to: m.dur === undefined ? Infinity : m.ts + m.dur, whole: m.dur !== undefined && m.dur > 0 };
  }).sort((a, b) => a.from - b.from);
  if (windows.length === 0) return { at: () => undefined };
  return {
    info: { numbers: windows.map((w) => w.step), incomplete: windows.filter((w) => !w.whole).map((w) => w.step), before: 0 },
    at(ts) {
      // The last window starting at or before ts (binary search), if ts is inside it.
      let lo = 0, hi = windows.length - 1, found = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (windows[mid]!.from <= ts) {
          found = mid;
          lo = mid + 1;
        } else hi = mid - 1;
      }
      const w = windows[found];
      return w && ts < w.to ? w.step : undefined;
    },
  };
}

export function readKineto(doc: JsonTrace, hint: RankHint): ReadRank {
  const file = doc.file;
  const info = isObject(doc.top.distributedInfo) ? doc.top.distributedInfo : undefined;
  const worldSize = info?.world_size === undefined ? undefined : sizeOf(info.world_size, file, "distributedInfo", "world_size");
  const rank = info?.rank === undefined ? undefined : { rank: rankOf(info.rank, file, "distributedInfo", "rank"), from: "the trace's distributedInfo" };
  const configs = pgConfigs(info, worldSize, file);
  const events = doc.events.map((e) => event(e, file)).sort((a, b) => a.ts - b.ts);
  const kernels = events.filter((e) => e.cat === "kernel");
  const described = kernels.filter((e) => present(e.args, "Collective name"));
  const ops = events.filter((e) => e.cat !== "kernel" && e.name === "record_param_comms");
  const describedOps = ops.filter((e) => present(e.args, "Collective name"));
  const annotations = events.filter((e) => e.cat !== "kernel" && e.name.startsWith("nccl:"));
  const windows = stepWindows(events.filter((e) => e.cat !== "kernel" && STEP.test(e.name)), file);
  const dropped: Dropped[] = [], collectives: TraceCollective[] = [], notes: string[] = [];
  // Without distributedInfo's world size, the world of the traces given (or --world): filled in once all are read.
  const world: TraceGroup = { name: "0", ranks: worldSize === undefined ? [] : ranksFromStride(0, 1, worldSize) };
  const table = new GroupTable(file);
  const launchOf = (k: KinetoEvent) => {
    const corr = k.args.correlation;
    return typeof corr === "number" ? doc.launches.get(corr) : undefined;
  };
  let source: "kernels" | "ops" | "annotations";
  if (described.length > 0) {
    source = "kernels";
    for (const k of kernels) {
      if (present(k.args, "Collective name")) continue;
      dropped.push({ what: "NCCL kernel without collective arguments", why: "nothing says what it moved (NCCL's grouped `coalesced` kernels record none)", step: windows.at(launchOf(k) ?? k.ts) });
    }
    for (const ev of described) {
      const where = `kernel ${quoted(ev.name.slice(0, 40))} at ts ${ev.ts}`;
      const c = fromArgs(ev, () => groupOf(ev.args, configs, worldSize, file, where, table), file, where, dropped);
      if (!c) {
        const last = dropped.at(-1);
        if (last) last.step = windows.at(launchOf(ev) ?? ev.ts);
        continue;
      }
      c.durUs = ev.dur;
      c.tsUs = ev.ts;
      c.step = windows.at(launchOf(ev) ?? ev.ts);
      collectives.push(c);
    }
  } else if (describedOps.length > 0 || annotations.length > 0) {
    source = describedOps.length > 0 ? "ops" : "annotations";
    const cpu = source === "ops" ? describedOps : annotations;
    // Each NCCL kernel goes to the CPU op whose time holds its launch (the latest such op to start).
    const matched = new Map<KinetoEvent, KinetoEvent>();
    let j = 0;
    const launched = kernels.map((k) => ({ k, at: launchOf(k) })).filter((x): x is { k: KinetoEvent; at: number } => x.at !== undefined).sort((a, b) => a.at - b.at);
    for (const { k, at } of launched) {
      while (j + 1 < cpu.length && cpu[j + 1]!.ts <= at) j++;
      for (let i = j; i >= 0 && i > j - 8; i--) {
        const op = cpu[i]!;
        if (op.ts <= at && at <= op.ts + (op.dur ?? 0) && !matched.has(op)) {
          matched.set(op, k);
          break;
        }
      }
    }
    for (const ev of cpu) {
      const where = `${quoted(ev.name.slice(0, 40))} at ts ${ev.ts}`;
      const c = source === "ops" ? fromArgs(ev, () => groupOf(ev.args, configs, worldSize, file, where, table), file, where, dropped) : fromAnnotation(ev, world, file, where, dropped);
      if (!c) {
        const last = dropped.at(-1);
        if (last) last.step = windows.at(ev.ts);
        continue;
      }
      const k = matched.get(ev);
      c.durUs = k?.dur;
      c.tsUs = k?.ts;
      c.step = windows.at(ev.ts);
      collectives.push(c);
    }
    const unmatched = cpu.length - matched.size;
    if (kernels.length > 0 && unmatched > 0) notes.push(`${unmatched} of ${cpu.length} collectives have no NCCL kernel of their own in the trace: no trace time for them`);
    if (source === "annotations") {
      notes.push("a trace from before PyTorch 2.2: sizes from the nccl:<op> annotations' inputs; they record no process group (the world), root (the first rank) or splits (even)");
    }
  } else {
    const what = kernels.length
      ? `its ${kernels.length} NCCL kernel events carry no collective arguments ("Collective name", "In msg nelems"...) and it holds no ${ops.length ? `record_param_comms CPU op with them (${ops.length} without)` : "record_param_comms CPU op"} nor nccl:<op> annotation: ${WITHOUT_SHAPES} (${RECORDING})`
      : doc.kernels > 0
        ? `its ${doc.kernels} kernels include no NCCL one, and it holds no record_param_comms CPU op${ops.length ? " with arguments" : ""} nor nccl:<op> annotation: ${RECORDING} (at world size 1 NCCL launches no kernels; the CPU ops carry the arguments from PyTorch 2.2)`
        : `no NCCL kernel, record_param_comms op or nccl:<op> annotation: this trace records no collectives (${RECORDING})`;
    throw new TraceError(file, what);
  }
  const steps = windows.info ? { ...windows.info, before: collectives.filter((c) => c.step === undefined).length } : undefined;
  return {
    file, format: "kineto", schema: String(doc.top.schemaVersion ?? "unversioned").slice(0, 40), collectives, dropped,
    notes: [
      ...notes,
      ...(source !== "annotations" && collectives.some((c) => c.root !== undefined) ? ["Kineto records no roots: rooted collectives replay from their group's first rank"] : []),
    ],
    groups: [...configs].map(([name, ranks]) => ({ name, ranks })),
    worldSize, rank, fileRank: hint.fileRank, steps,
    ...(collectives.some((c) => c.group === world) && worldSize === undefined ? {
      defaultWorld: {
        group: world, splitLengths: new Set<number>(),
        // An annotation's output follows from the world (all-gather's is W inputs), known once every trace is read.
        settled: () => {
          if (source === "annotations") for (const c of collectives) c.outCount = outputOf(c.op, c.inCount, world.ranks.length);
        },
      },
    } : {}),
  };
}
