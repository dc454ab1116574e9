// PyTorch flight-recorder dumps -> one neutral record per rank (DESIGN.md, "Hung jobs"). A dump is what
// ProcessGroupNCCL's FlightRecorder writes on a timeout (TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE
// + rank): a pickle (or, from _dump_fr_trace_json, JSON) of {version, pg_config, pg_status, entries}. The
// runner's own flight records (run dir's flight/rank<r>.txt) come out in the same form, so `trace hang` reads both.
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";
import { DEFAULT_MAX_BYTES, MAX_COLLECTIVES, MAX_FILES, MAX_GROUPS, MAX_WORLD, rankOf } from "./limits.js";
import { TraceError, quoted } from "./model.js";
import { looksLikePickle, readPickle, type PickleDict, type PickleValue } from "./pickle.js";
import { folderEntries, forEachTrace, TRACE_NAME } from "./source.js";

/** One op a rank recorded: a collective (matched by group and collective sequence) or a send/recv. */
export interface FrOp {
  /** Its place in the rank's record (record_id order). */
  order: number;
  /** The process group's name (pg_config's key), the same on every member. */
  group: string;
  /** "all_reduce", "_all_gather_base", "send", "recv"... (the profiling name less "nccl:"). */
  name: string;
  p2p: boolean;
  /** collective_seq_id for a collective, p2p_seq_id for a send/recv. */
  seq: number;
  /** send/recv: the world ranks at both ends. */
  src?: number;
  dst?: number;
  inSizes: number[][];
  outSizes: number[][];
  inDtypes: string[];
  outDtypes: string[];
  state: "scheduled" | "started" | "completed";
}

export interface FrGroup {
  desc: string;
  ranks: number[];
}

/** pg_status of one group on one rank: the last work it enqueued and the last it saw complete (-1: none). */
export interface FrStatus {
  enqueued: number;
  completed: number;
}

export interface FrDump {
  file: string;
  rank: number;
  version: string;
  groups: Map<string, FrGroup>;
  /** Per group name; only where pg_status's process-group ids could be tied to names. */
  status: Map<string, FrStatus>;
  ops: FrOp[];
  notes: string[];
  /** The runner's records: the highest rank a record names (its own or a peer), as they record no world size. */
  highestRank?: number;
}

const isDict = (v: unknown): v is PickleDict => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);

/** A dump's file names: `<prefix><rank>`, the prefix PyTorch's env vars or nvidia's `_dump_` give. */
const DUMP_NAME = /^(.*?)(\d{1,6})(\.(?:json|pkl|pickle))?$/;
const RUNNER_NAME = /^rank(\d{1,6})\.txt$/;

/** The dump files named: a folder stands for its `<prefix><rank>` files of its commonest prefix. */
export async function dumpFiles(paths: readonly string[]): Promise<string[]> {
  const files: string[] = [];
  for (const p of paths) {
    const names = (await folderEntries(p))?.filter((e) => !e.isDirectory()).map((e) => e.name);
    if (!names) {
      files.push(p);
      continue;
    }
    const runner = names.filter((n) => RUNNER_NAME.test(n));
    const byPrefix = new Map<string, string[]>();
    for (const n of names) {
      const m = DUMP_NAME.exec(n);
      if (m && !RUNNER_NAME.test(n)) byPrefix.set(m[1]!, [...(byPrefix.get(m[1]!) ?? []), n]);
    }
    const [best] = [...byPrefix.values()].sort((a, b) => b.length - a.length);
    const chosen = runner.length >= (best?.length ?? 0) ? runner : best!;
    if (!chosen?.length) throw new TraceError(p, "the folder holds no flight-recorder dumps (files named <prefix><rank>, as nccl_trace_rank_0 or _dump_0) nor the runner's flight records (rank<r>.txt)");
    files.push(...chosen.sort().map((n) => path.join(p, n)));
    if (files.length > MAX_FILES) throw new TraceError(p, `more than ${MAX_FILES} dump files`);
  }
  return files;
}

function str(v: PickleValue | undefined, file: string, what: string): string {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  throw new TraceError(file, `${what} is ${quoted(v)}, expected a string`);
}

function int(v: PickleValue | undefined, file: string, what: string): number {
  if (typeof v === "number" && Number.isSafeInteger(v)) return v;
  throw new TraceError(file, `${what} is ${quoted(typeof v === "bigint" ? String(v) : v)}, expected an integer`);
}

/** input_sizes: a list of shapes, each a list of sizes. */
function shapes(v: PickleValue | undefined, file: string, what: string): number[][] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.length > MAX_COLLECTIVES) throw new TraceError(file, `${what} is ${quoted(v)}, expected a list of shapes`);
  return v.map((s) => {
    if (!Array.isArray(s) || s.length > 64 || !s.every((n) => typeof n === "number" && Number.isSafeInteger(n) && n >= 0)) throw new TraceError(file, `${what} holds ${quoted(s)}, expected a shape (a list of sizes)`);
    return s as number[];
  });
}

function names(v: PickleValue | undefined, file: string, what: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((s) => typeof s === "string")) throw new TraceError(file, `${what} is ${quoted(v)}, expected a list of dtype names`);
  return v as string[];
}

/** pg_config's "ranks": a list, or its Python text "[0, 1, 2]". */
function groupRanks(v: PickleValue | undefined, file: string, what: string): number[] {
  const list = typeof v === "string" ? (/^\s*\[[\d,\s]*\]\s*$/.test(v) ? (JSON.parse(v) as number[]) : undefined) : v;
  if (!Array.isArray(list) || list.length > MAX_WORLD) throw new TraceError(file, `${what} is ${quoted(v)}, expected a list of ranks`);
  return list.map((r, i) => rankOf(r, file, what, `rank ${i}`));
}

function readGroups(v: PickleValue | undefined, file: string): Map<string, FrGroup> {
  const groups = new Map<string, FrGroup>();
  if (v === undefined) return groups;
  if (!isDict(v)) throw new TraceError(file, `pg_config is ${quoted(v)}, expected a dict of process groups`);
  for (const [name, g] of Object.entries(v)) {
    if (groups.size >= MAX_GROUPS) throw new TraceError(file, `more than ${MAX_GROUPS} process groups (the reader's cap)`);
    if (!isDict(g)) throw new TraceError(file, `pg_config[${quoted(name)}] is ${quoted(g)}, expected a dict`);
    groups.set(name, { desc: typeof g.desc === "string" ? g.desc : "", ranks: groupRanks(g.ranks, file, `pg_config[${quoted(name)}].ranks`) });
  }
  return groups;
}

/** "nccl:send 0->1" / "nccl:recv 1<-0": group-local ranks, made world ranks through the group's list. */
function p2pEnds(profiling: string, group: FrGroup | undefined, rank: number): { src: number; dst: number } | undefined {
  const m = /\b(send|recv)\s+(\d+)\s*(->|<-)\s*(\d+)/.exec(profiling);
  if (!m) return undefined;
  const a = Number(m[2]), b = Number(m[4]);
  const [src, dst] = m[3] === "->" ? [a, b] : [b, a];
  // Group-local indices count the group's ranks in order (fr_trace's Op sorts them too).
  const sorted = group ? [...group.ranks].sort((x, y) => x - y) : undefined;
  const world = (i: number) => (sorted ? sorted[i] : i);
  const out = { src: world(src), dst: world(dst) };
  return out.src === undefined || out.dst === undefined || (out.src !== rank && out.dst !== rank) ? undefined : out as { src: number; dst: number };
}

function stateOf(e: PickleDict): FrOp["state"] {
  if (e.state === "completed" || e.retired === true || (e.time_discovered_completed_ns !== undefined && e.time_discovered_completed_ns !== null)) return "completed";
  return e.state === "started" ? "started" : "scheduled";
}

/** One entry; entries before 2.2 (or from torchcomms) carry one `seq_id` and name their group by pg_id only. */
function readOp(e: PickleValue, i: number, file: string, rank: number, groups: Map<string, FrGroup>, pgNames: Map<string, string>): FrOp {
  const where = `entries[${i}]`;
  if (!isDict(e)) throw new TraceError(file, `${where} is ${quoted(e)}, expected a dict`);
  const pg = Array.isArray(e.process_group) ? e.process_group : undefined;
  const pgId = e.pg_id === undefined ? undefined : str(e.pg_id, file, `${where}.pg_id`);
  const group = pg ? str(pg[0], file, `${where}.process_group[0]`) : pgId !== undefined ? str(pgId, file, `${where}.pg_id`) : "0";
  if (pgId !== undefined && pg) pgNames.set(pgId, group);
  const profiling = typeof e.profiling_name === "string" ? e.profiling_name : "";
  const name = profiling.replace(/^[a-z]+:/, "").split(/\s/)[0] || "unknown";
  const p2p = e.is_p2p === true || name === "send" || name === "recv";
  const seq = int(p2p ? (e.p2p_seq_id ?? e.seq_id) : (e.collective_seq_id ?? e.seq_id), file, `${where}.${p2p ? "p2p_seq_id" : "collective_seq_id"}`);
  const ends = p2p ? p2pEnds(profiling, groups.get(group), rank) : undefined;
  if (p2p && !ends) throw new TraceError(file, `${where}: profiling_name ${quoted(profiling)} names no ends this rank is one of ("send 0->1", "recv 1<-0")`);
  return {
    order: i, group, name, p2p, seq, ...ends,
    inSizes: shapes(e.input_sizes, file, `${where}.input_sizes`), outSizes: shapes(e.output_sizes, file, `${where}.output_sizes`),
    inDtypes: names(e.input_dtypes, file, `${where}.input_dtypes`), outDtypes: names(e.output_dtypes, file, `${where}.output_dtypes`),
    state: stateOf(e),
  };
}

/**
 * pg_status is keyed by ProcessGroupNCCL's uid (an entry's pg_id), not the group's name. Entries tie the two;
 * a rank without entries for a group is tied by creation order (both count up as groups are made), and only
 * where the counts agree and every tie the entries make holds.
 */
function readStatus(v: PickleValue | undefined, file: string, groups: Map<string, FrGroup>, pgNames: Map<string, string>, notes: string[]): Map<string, FrStatus> {
  const status = new Map<string, FrStatus>();
  if (!isDict(v)) return status;
  const ids = Object.keys(v);
  const byOrder = (a: string, b: string) => (/^\d+$/.test(a) && /^\d+$/.test(b) ? Number(a) - Number(b) : a < b ? -1 : 1);
  const sortedIds = [...ids].sort(byOrder), sortedNames = [...groups.keys()].sort(byOrder);
  const zipped = sortedIds.length === sortedNames.length && [...pgNames].every(([id, n]) => sortedNames[sortedIds.indexOf(id)] === n);
  if (!zipped && pgNames.size < ids.length) notes.push("pg_status: some process-group ids could not be tied to names");
  for (const id of ids) {
    const name = pgNames.get(id) ?? (zipped ? sortedNames[sortedIds.indexOf(id)] : undefined);
    const s = v[id];
    if (name === undefined || !isDict(s)) continue;
    status.set(name, { enqueued: int(s.last_enqueued_collective ?? -1, file, `pg_status[${id}].last_enqueued_collective`), completed: int(s.last_completed_collective ?? -1, file, `pg_status[${id}].last_completed_collective`) });
  }
  return status;
}

/** A decoded PyTorch dump -> its rank's record. */
function fromPyTorch(doc: PickleValue, file: string, fileRank: number | undefined): FrDump {
  if (!isDict(doc) || !Array.isArray(doc.entries)) throw new TraceError(file, "not a flight-recorder dump: expected a dict with \"entries\" (and version, pg_config, pg_status)");
  const version = typeof doc.version === "string" ? doc.version : "unknown";
  const rank = doc.rank !== undefined ? rankOf(doc.rank, file, "the dump", "rank") : fileRank;
  if (rank === undefined) throw new TraceError(file, "no rank: the dump records none and the file name ends in no number");
  if (doc.entries.length > MAX_COLLECTIVES) throw new TraceError(file, `more than ${MAX_COLLECTIVES} entries (the reader's cap)`);
  const groups = readGroups(doc.pg_config, file);
  const pgNames = new Map<string, string>();
  const ops = doc.entries.map((e, i) => readOp(e, i, file, rank, groups, pgNames));
  const notes: string[] = [];
  return { file, rank, version, groups, status: readStatus(doc.pg_status, file, groups, pgNames, notes), ops, notes };
}

/** `#812 step 40 allreduce ar 4194304 B to 3 from 1: timed out after 5.0 s (started 5.1 s ago)` (log/flight-record.ts). */
const RUNNER_LINE = /^\s*#(\d+)(?: step -?\d+)? (\S+) (.+?) (\d+) B(?: with every rank| to ([\d,]+)(?: \+\d+ more)?)?(?: from ([\d,]+)(?: \+\d+ more)?)?: (running|done|failed|timed out|peer gone|aborted)\b/;

/**
 * The runner's flight record: every op is on the job's one communicator, numbered alike on every rank, so
 * each is a collective of the world group with that number.
 */
function fromRunner(text: string, file: string, rank: number): FrDump {
  const ops: FrOp[] = [];
  let highestRank = rank;
  for (const line of text.split("\n").slice(1)) {
    const m = RUNNER_LINE.exec(line);
    if (!m) continue;
    for (const peers of [m[5], m[6]]) for (const p of peers?.split(",") ?? []) highestRank = Math.max(highestRank, rankOf(p, file, `op #${m[1]}`, "a peer"));
    const bytes = Number(m[4]);
    ops.push({
      order: ops.length, group: "world", name: m[2]!, p2p: false, seq: Number(m[1]),
      inSizes: [[bytes]], outSizes: [[bytes]], inDtypes: ["Byte"], outDtypes: ["Byte"],
      state: m[7] === "done" ? "completed" : m[7] === "running" ? "started" : "scheduled",
    });
  }
  return { file, rank, version: "runner", groups: new Map(), status: new Map(), ops, notes: [], highestRank };
}

function decode(bytes: Buffer, file: string, fileRank: number | undefined): FrDump {
  if (looksLikePickle(bytes)) return fromPyTorch(readPickle(bytes, file), file, fileRank);
  const text = bytes.toString("utf8");
  if (text.startsWith("flight record (")) {
    if (fileRank === undefined) throw new TraceError(file, "a runner flight record whose name (rank<r>.txt) gives no rank");
    return fromRunner(text, file, fileRank);
  }
  let doc: PickleValue;
  try {
    doc = JSON.parse(text, (_k, v: unknown) => (isDict(v) ? Object.assign(Object.create(null) as PickleDict, v) : v)) as PickleValue;
  } catch {
    throw new TraceError(file, "not a flight-recorder dump: neither a pickle (protocol 2-5) nor JSON nor a runner flight record");
  }
  return fromPyTorch(doc, file, fileRank);
}

/**
 * Whether `trace import` was given dumps rather than traces: a folder of `<prefix><rank>` files with no trace
 * file in it, or a file that opens as a pickle or as a dump's JSON.
 */
export async function isDumpInput(paths: readonly string[]): Promise<boolean> {
  const first = paths[0];
  if (first === undefined) return false;
  const entries = (await folderEntries(first).catch(() => undefined))?.map((e) => e.name);
  if (entries) return !entries.some((n) => TRACE_NAME.test(n)) && entries.some((n) => DUMP_NAME.test(n) || RUNNER_NAME.test(n));
  let head = Buffer.alloc(0);
  try {
    const handle = await open(first, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      if ((await handle.stat()).isFile()) head = (await handle.read(Buffer.alloc(256), 0, 256, 0)).buffer;
    } finally {
      await handle.close();
    }
  } catch {
    return false;
  }
  return looksLikePickle(head) || /^\s*\{\s*"(version|pg_config|pg_status|entries|nccl_version|comm_lib_version)"/.test(head.toString("latin1"));
}

/** Every dump named (files or folders), read, one per rank. */
export async function readDumps(paths: readonly string[], maxBytes = DEFAULT_MAX_BYTES): Promise<FrDump[]> {
  const files = await dumpFiles(paths);
  const dumps: FrDump[] = [];
  await forEachTrace(files, Math.min(maxBytes, 1024 ** 3), async (t) => {
    const parts: Buffer[] = [];
    for await (const c of t.chunks) parts.push(c);
    const base = path.basename(t.name);
    const m = RUNNER_NAME.exec(base) ?? DUMP_NAME.exec(base);
    const fileRank = m ? Number(m[m.length === 2 ? 1 : 2]) : undefined;
    const dump = decode(Buffer.concat(parts), t.name, fileRank);
    const twin = dumps.find((d) => d.rank === dump.rank);
    if (twin) throw new TraceError(t.name, `rank ${dump.rank} again: ${twin.file} is rank ${dump.rank} too`);
    dumps.push(dump);
  });
  return dumps.sort((a, b) => a.rank - b.rank);
}
