// Kineto / Chrome traces from torch.profiler: the NCCL kernels (`cat: "kernel"`) carry their collective's
// arguments, copied from the record_param_comms op that launched them; `distributedInfo` names the rank
// and the process groups. Events are replayed in the order they started (`ts`).
import type { Dropped, RankTrace, TraceCollective, TraceGroup } from "./model.js";
import { TraceError } from "./model.js";
import { jobDtype, NOT_REPLAYED, ranksFromStride, traceOp } from "./names.js";
import { finishRank, type RankHint } from "./rank.js";

interface KinetoEvent {
  cat?: string;
  name?: string;
  ts?: number;
  dur?: number;
  args?: Record<string, unknown>;
}

interface PgConfig {
  pg_name: string;
  pg_size?: number;
  ranks?: number[] | string;
}

const RECORDING = "record with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) on PyTorch 2.2 or later: the kernels' arguments are copied from the record_param_comms CPU op";

const NCCL_KERNEL = /nccl/i;

/** "[0, 1, 2]" -> numbers; undefined where the profiler cut the list ("[0, 1, ..., 63]"). */
export function parseRankList(value: unknown): number[] | undefined {
  if (Array.isArray(value)) return value.map(Number);
  if (typeof value !== "string" || value.includes("...") || value.includes("…")) return undefined;
  const inner = value.trim().replace(/^\[|\]$/g, "").trim();
  return inner ? inner.split(",").map((x) => Number(x.trim())) : [];
}

function num(args: Record<string, unknown>, key: string): number | undefined {
  const v = args[key];
  return v === undefined || v === null || v === "" ? undefined : Number(v);
}

function splits(v: unknown): number[] {
  return parseRankList(v) ?? [];
}

/** The group of a kernel: its own rank list, else rebuilt from start and stride, else the pg_config's. */
function groupOf(args: Record<string, unknown>, configs: Map<string, number[]>, worldSize: number | undefined): TraceGroup {
  const name = String(args["Process Group Name"] ?? "0");
  const size = num(args, "Group size") ?? worldSize ?? 1;
  const listed = parseRankList(args["Process Group Ranks"]);
  const start = num(args, "Global rank start"), stride = num(args, "Global rank stride");
  const ranks = listed && listed.length > 0 ? listed
    : start !== undefined && stride !== undefined ? ranksFromStride(start, stride, size)
    : configs.get(name) ?? ranksFromStride(0, 1, size);
  return { name, ranks };
}

/** distributedInfo's groups whose ranks it lists in full (an empty list: the whole world); cut lists are left to the kernels. */
function pgConfigs(info: Record<string, unknown> | undefined, worldSize: number | undefined): Map<string, number[]> {
  const configs = new Map<string, number[]>();
  for (const pg of (info?.pg_config as PgConfig[] | undefined) ?? []) {
    const ranks = parseRankList(pg.ranks ?? []);
    if (ranks && ranks.length > 0) configs.set(pg.pg_name, ranks);
    else if (ranks && pg.pg_size !== undefined && pg.pg_size === worldSize) configs.set(pg.pg_name, ranksFromStride(0, 1, pg.pg_size));
  }
  return configs;
}

function collective(ev: KinetoEvent, args: Record<string, unknown>, group: TraceGroup, file: string, dropped: Dropped[]): TraceCollective | undefined {
  const name = String(args["Collective name"]);
  const op = traceOp(name);
  if (!op) {
    dropped.push({ what: name, why: NOT_REPLAYED[name] ?? `unknown collective "${name}"` });
    return undefined;
  }
  const dtypeName = String(args.dtype ?? "");
  const dtype = jobDtype(dtypeName);
  if (!dtype) {
    dropped.push({ what: name, why: `dtype "${dtypeName}" has no job dtype` });
    return undefined;
  }
  const src = num(args, "Src Rank"), dst = num(args, "Dst Rank");
  const peer = op === "send" ? dst : op === "recv" ? src : undefined;
  if ((op === "send" || op === "recv") && peer === undefined) throw new TraceError(file, `a ${name} kernel at ts ${ev.ts} names no peer ("Src Rank"/"Dst Rank")`);
  return {
    op, name, dtype, traceDtype: dtypeName,
    inCount: num(args, "In msg nelems") ?? 0,
    outCount: num(args, "Out msg nelems") ?? 0,
    inSplits: splits(args["In split size"]),
    outSplits: splits(args["Out split size"]),
    group,
    // Kineto records no root: rooted ops replay from the group's first rank (PARAM's reader does the same).
    root: op === "broadcast" || op === "reduce" || op === "gather" || op === "scatter" ? group.ranks[0] : undefined,
    peer: peer === undefined ? undefined : group.ranks[peer] ?? peer,
    inPlace: false,
    seq: num(args, "Seq"),
    async: false,
    durUs: ev.dur,
    tsUs: ev.ts,
  };
}

export function readKineto(doc: Record<string, unknown>, file: string, hint: RankHint): RankTrace {
  const events = (doc.traceEvents as KinetoEvent[]).filter((e) => e && typeof e === "object");
  const info = doc.distributedInfo as Record<string, unknown> | undefined;
  const worldSize = info?.world_size === undefined ? undefined : Number(info.world_size);
  const configs = pgConfigs(info, worldSize);
  const kernels = events.filter((e) => e.cat === "kernel" && NCCL_KERNEL.test(e.name ?? "")).sort((a, b) => (a.ts ?? 0) - (b.ts ?? 0));
  if (kernels.length === 0) throw new TraceError(file, "no NCCL kernel events (cat \"kernel\") in this Kineto trace: profile with ProfilerActivity.CUDA");
  const described = kernels.filter((e) => e.args?.["Collective name"] !== undefined);
  if (described.length === 0) throw new TraceError(file, `its ${kernels.length} NCCL kernel events carry no collective arguments ("Collective name", "In msg nelems"...): ${RECORDING}`);
  const dropped: Dropped[] = [], collectives: TraceCollective[] = [];
  const bare = kernels.length - described.length;
  if (bare > 0) dropped.push(...Array.from({ length: bare }, () => ({ what: "NCCL kernel without collective arguments", why: "nothing says what it moved (NCCL's grouped `coalesced` kernels record none)" })));
  for (const ev of described) {
    const c = collective(ev, ev.args!, groupOf(ev.args!, configs, worldSize), file, dropped);
    if (c) collectives.push(c);
  }
  const rank = info?.rank === undefined ? undefined : { rank: Number(info.rank), from: "the trace's distributedInfo" };
  return finishRank({
    file, format: "kineto", schema: String(doc.schemaVersion ?? "unversioned"), collectives, dropped,
    notes: collectives.some((c) => c.root !== undefined) ? ["Kineto records no roots: rooted collectives replay from their group's first rank"] : [],
    groups: [...configs].map(([name, ranks]) => ({ name, ranks })),
    worldSize, rank,
  }, hint);
}
