// `runner trace hang`: the real dumps in ../shared/fr-dumps name exactly the ranks their harness broke;
// synthetic dumps written here from the dump format (pickle and JSON, versions 2.2 to 2.10) cover each kind of
// stop, the mismatches fr_trace reports, a p2p ring, the runner's own flight records, and a pickle that asks to
// run code. Touches nothing shared: temp folders only.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { readDumps } from "../dist/trace/flight-recorder.js";
import { diagnose, hangText } from "../dist/trace/hang.js";
import { planGroups } from "../dist/trace/partition.js";
import { readPickle } from "../dist/trace/pickle.js";
import { pickle, Tuple } from "./helpers/pickle.js";
import { REPO, RUNNER, runNode } from "./helpers/ranks.js";

// CI keeps a copy of shared/ beside the clone; SPMD_SHARED_DIR points elsewhere (a worktree's run).
const DUMPS = path.join(process.env.SPMD_SHARED_DIR ?? path.join(REPO, "..", "shared"), "fr-dumps");
const tmp = mkdtempSync(path.join(os.tmpdir(), "spmd-hang-"));
after(() => rmSync(tmp, { recursive: true, force: true }));
let folders = 0;

const NS = 1758580155793872443n;

/** One entry as ProcessGroupNCCL's FlightRecorder writes it (version 2.9's fields). */
function entry(i, group, desc, name, { seq = 0, p2pSeq = 0, sizes = [[1024]], dtype = "Float", state = "scheduled", pgId = 0 } = {}) {
  const p2p = /^(send|recv) /.test(name);
  return {
    record_id: i, pg_id: pgId, process_group: new Tuple([group, desc]), thread_name: "python3", thread_id: "1",
    collective_seq_id: seq, p2p_seq_id: p2pSeq, op_id: i, profiling_name: `nccl:${name}`, time_created_ns: NS + BigInt(i),
    input_sizes: sizes, input_dtypes: [dtype], output_sizes: sizes, output_dtypes: [dtype], state,
    time_discovered_started_ns: null, time_discovered_completed_ns: null, retired: false, timeout_ms: 600000, is_p2p: p2p,
  };
}

/** A dump of `world` ranks in one group "0": entries, and pg_status keyed by pg_id 0. */
function dump(world, entries, status, extra = {}) {
  const ranks = `[${Array.from({ length: world }, (_, r) => r).join(", ")}]`;
  return {
    version: "2.9", pg_config: { 0: { name: "0", desc: "default_pg", ranks } }, nccl_version: "2.27.3",
    pg_status: { 0: { last_enqueued_collective: status[0], last_started_collective: -1, last_completed_collective: status[1] } },
    entries, ...extra,
  };
}

/** The dumps written as `_dump_<rank>` files (pickle, or JSON), in a fresh folder. */
function folder(dumps, { json = false, prefix = "_dump_" } = {}) {
  const dir = path.join(tmp, `case${folders++}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  dumps.forEach((d, r) => {
    if (d) writeFileSync(path.join(dir, `${prefix}${r}`), json ? JSON.stringify(d, (_k, v) => (typeof v === "bigint" ? Number(v) : v instanceof Tuple ? v.items : v)) : pickle(d));
  });
  return dir;
}

const hang = async (dir) => diagnose(await readDumps([dir]));

test("the real dumps (../shared/fr-dumps) name exactly the ranks the harness broke", async () => {
  assert.ok(existsSync(DUMPS), `${DUMPS} is missing (CI keeps shared/ beside the clone)`);
  for (const [name, ranks] of [["gpu_error_2nd", [9, 14]], ["lock_gil_2nd", [10, 15]]]) {
    const d = await hang(path.join(DUMPS, name));
    assert.deepEqual(d.stopped, ranks, name);
    assert.equal(hangText(d)[0], `stopped ranks: ${ranks.join(", ")}`);
    assert.deepEqual(d.missingDumps, []);
  }
  const d = await hang(path.join(DUMPS, "gpu_error_2nd"));
  assert.match(d.why[0], /^rank 9: .* 9 did not; its 20 pending ops were reached by every peer/);
  // The first table: the tensor-parallel group where rank 9 never reached #87761 that 8, 10 and 11 hold.
  assert.deepEqual([d.stalled[0].group, d.stalled[0].seq, d.stalled[0].arrived, d.stalled[0].absent], ["37", 87761, [8, 10, 11], [9]]);
  const lock = await hang(path.join(DUMPS, "lock_gil_2nd"));
  assert.match(lock.why[0], /^rank 10: EXPERT_MODEL_PARALLEL_GROUP \(pg 73\) all_to_all #20947: 8, 9, 11 arrived, 10 did not; it has no work pending/);
});

test("the pickle reader keeps ns timestamps exact (BigInt past 2^53) and negative LONG1s signed", () => {
  const v = readPickle(pickle({ t: NS, n: -(2n ** 40n), small: -5, f: 1.5, s: "é", l: [1, null, true] }), "x");
  assert.equal(v.t, NS);
  assert.equal(v.n, -(2 ** 40));
  assert.deepEqual([v.small, v.f, v.s, v.l], [-5, 1.5, "é", [1, null, true]]);
});

test("hostile pickles end in one line naming the file and byte: too deep, a huge LONG4, cut short, an unknown opcode", () => {
  const bad = [
    [Buffer.concat([Buffer.from([0x80, 2]), Buffer.alloc(100, 0x28)]), /pickle byte 66: nesting deeper than 64/],
    [Buffer.from([0x80, 2, 0x8b, 0xff, 0xff, 0xff, 0x0f]), /pickle byte 2: an integer of 268435455 bytes/],
    [Buffer.from([0x80, 2, 0x58, 0x10, 0, 0, 0, 0x41]), /pickle byte 2: a length of 16 runs past the end of the file/],
    [Buffer.from([0x80, 2, 0xfe]), /pickle byte 2: unknown opcode 0xfe/],
  ];
  for (const [bytes, message] of bad) assert.throws(() => readPickle(bytes, "f"), (e) => e.exitCode === 2 && message.test(e.message) && !e.message.includes("\n"));
});

test("a rank that never reached a collective its group waits in is named; a missing dump is named, never blamed", async () => {
  const ar = (r, seq) => entry(r * 10 + seq, "0", "default_pg", "all_reduce", { seq });
  const d = await hang(folder([
    dump(4, [ar(0, 5)], [5, 4]), dump(4, [ar(1, 5)], [5, 4]), dump(4, [ar(2, 5)], [5, 4]), dump(4, [], [4, 4]),
  ]));
  assert.deepEqual(d.stopped, [3]);
  assert.match(d.why[0], /^rank 3: default_pg \(pg 0\) all_reduce #5: 0, 1, 2 arrived, 3 did not; it has no work pending/);
  assert.deepEqual(d.stalled[0].absent, [3]);
  // Rank 3's dump gone: the others wait on it, but nothing shows it stopped rather than lost its file.
  const gone = await hang(folder([dump(4, [ar(0, 5)], [5, 4]), dump(4, [ar(1, 5)], [5, 4]), dump(4, [ar(2, 5)], [5, 4])]));
  assert.deepEqual([gone.stopped, gone.missingDumps], [[], [3]]);
  assert.match(hangText(gone).join("\n"), /^stopped ranks: none the records can show\n[^]*missing dumps: rank 3 \(of a world of 4\)/);
});

test("a rank whose device stopped (its peers completed what it still holds) is named; its peers are not", async () => {
  const ar = (r, seq) => entry(r * 10 + seq, "0", "default_pg", "all_reduce", { seq });
  const d = await hang(folder([
    dump(3, [ar(0, 7)], [7, 6]), dump(3, [ar(1, 5), ar(1, 6)], [6, 4]), dump(3, [ar(2, 7)], [7, 6]),
  ]));
  assert.deepEqual(d.stopped, [1]);
  assert.match(d.why[0], /rank 1: .* #7: 0, 2 arrived, 1 did not; its 2 pending ops were reached by every peer/);
});

test("a rank held up behind its own older op (its stream busy) is not named, though a peer waits on it", async () => {
  // Groups A=[2,3] (pg id 1), B=[1,2] (2), C=[0,1] (3). Rank 3 stopped before A#1; rank 2 queued B#1 behind A#1;
  // rank 1 blocks on B#1 (a host sync) and never issues C#1, which rank 0 waits in.
  const cfg = (...names) => Object.fromEntries(names.map(([n, ranks]) => [n, { name: n, desc: `G${n}`, ranks: JSON.stringify(ranks) }]));
  const st = (pairs) => Object.fromEntries(pairs.map(([id, e, c]) => [id, { last_enqueued_collective: e, last_started_collective: -1, last_completed_collective: c }]));
  const A = ["10", [2, 3]], B = ["11", [1, 2]], C = ["12", [0, 1]];
  const op = (i, [n], pgId) => entry(i, n, `G${n}`, "all_reduce", { seq: 1, pgId });
  const d = await hang(folder([
    { version: "2.9", pg_config: cfg(C), pg_status: st([[3, 1, 0]]), entries: [op(0, C, 3)] },
    { version: "2.9", pg_config: cfg(B, C), pg_status: st([[2, 1, 0], [3, 0, 0]]), entries: [op(0, B, 2)] },
    { version: "2.9", pg_config: cfg(A, B), pg_status: st([[1, 1, 0], [2, 1, 0]]), entries: [op(0, A, 1), op(1, B, 2)] },
    { version: "2.9", pg_config: cfg(A), pg_status: st([[1, 0, 0]]), entries: [] },
  ]));
  assert.deepEqual(d.stopped, [3]);
  assert.deepEqual(d.stalled.find((s) => s.group === "12").absent, [1]);
});

test("a rank whose pending op the records cannot place (a recv from a rank with nothing pending) is not named", async () => {
  // Rank 2 stopped; rank 1 waits in a recv from it (pipeline group "9" = [1, 2]) and so never reached world #5.
  const st = (pairs) => Object.fromEntries(pairs.map(([id, e, c]) => [id, { last_enqueued_collective: e, last_started_collective: -1, last_completed_collective: c }]));
  const world = { name: "0", desc: "default_pg", ranks: "[0, 1, 2]" }, pp = { name: "9", desc: "PIPELINE_MODEL_PARALLEL_GROUP", ranks: "[1, 2]" };
  const d = await hang(folder([
    { version: "2.9", pg_config: { 0: world }, pg_status: st([[0, 5, 4]]), entries: [entry(0, "0", "default_pg", "all_reduce", { seq: 5 })] },
    { version: "2.9", pg_config: { 0: world, 9: pp }, pg_status: st([[0, 4, 4], [1, 7, 6]]), entries: [entry(0, "9", "PIPELINE_MODEL_PARALLEL_GROUP", "recv 0<-1", { p2pSeq: 7, pgId: 1 })] },
    { version: "2.9", pg_config: { 0: world, 9: pp }, pg_status: st([[0, 4, 4], [1, 6, 6]]), entries: [] },
  ]));
  assert.deepEqual(d.stopped, [2]);
});

test("every member present and none done: the dumps cannot tell, and no rank is named", async () => {
  const ar = (r) => entry(r, "0", "default_pg", "all_reduce", { seq: 3 });
  const d = await hang(folder([dump(2, [ar(0)], [3, 2]), dump(2, [ar(1)], [3, 2])]));
  assert.deepEqual(d.stopped, []);
  assert.match(hangText(d)[1], /the dumps cannot tell which rank stopped/);
});

test("fr_trace's mismatches: type, size, dtype and state of one collective across its members", async () => {
  const base = { seq: 4 };
  const d = await hang(folder([
    dump(4, [entry(0, "0", "default_pg", "all_reduce", base)], [4, 3]),
    dump(4, [entry(1, "0", "default_pg", "broadcast", base)], [4, 3]),
    dump(4, [entry(2, "0", "default_pg", "all_reduce", { ...base, sizes: [[2048]] })], [4, 3]),
    dump(4, [entry(3, "0", "default_pg", "all_reduce", { ...base, dtype: "BFloat16", state: "started" })], [4, 3]),
  ]));
  const kinds = d.mismatches.map((m) => `${m.kind}: ${m.detail}`);
  assert.deepEqual(kinds, ["type: rank 0: all_reduce, rank 1: broadcast", "dtype: rank 0: Float, rank 3: BFloat16", "state: rank 0: scheduled, rank 3: started"]);
  const sizes = await hang(folder([
    dump(2, [entry(0, "0", "default_pg", "all_reduce", base)], [4, 3]),
    dump(2, [entry(1, "0", "default_pg", "all_reduce", { ...base, sizes: [[2048]] })], [4, 3]),
  ]));
  assert.deepEqual(sizes.mismatches.map((m) => m.kind), ["size"]);
  // A send and its recv are one op, not a type mismatch; what is sent must be what is received.
  const pair = await hang(folder([
    dump(2, [entry(0, "0", "default_pg", "send 0->1", { p2pSeq: 9 })], [9, 8]),
    dump(2, [entry(1, "0", "default_pg", "recv 1<-0", { p2pSeq: 3, sizes: [[512]] })], [3, 2]),
  ]));
  assert.deepEqual(pair.mismatches.map((m) => `${m.kind}: ${m.detail}`), ["size: rank 0: [[1024]], rank 1: [[512]]"]);
});

test("a p2p ring: sends and recvs pair in order per pair (p2p sequences differ by stage); the rank short of its recvs is named", async () => {
  // Ring 0->1->2->3->0, two rounds; rank 2 stopped after posting its first recv and send.
  const ring = (r, rounds, seq0) => Array.from({ length: rounds }, (_, k) => [
    entry(r * 100 + 2 * k, "0", "default_pg", `send ${r}->${(r + 1) % 4}`, { p2pSeq: seq0 + 2 * k }),
    entry(r * 100 + 2 * k + 1, "0", "default_pg", `recv ${r}<-${(r + 3) % 4}`, { p2pSeq: seq0 + 2 * k + 1 }),
  ]).flat();
  const d = await hang(folder([
    dump(4, ring(0, 2, 10), [13, 9]), dump(4, ring(1, 2, 500), [503, 499]), dump(4, ring(2, 1, 30), [31, 29]), dump(4, ring(3, 2, 7), [10, 6]),
  ]));
  assert.deepEqual(d.stopped, [2]);
  assert.match(d.why[0], /^rank 2: default_pg \(pg 0\) (send 1->2|recv 2<-3) p2p #\d+: (1|3) arrived, 2 did not/);
});

test("versions: a 2.2-style dump (no is_p2p, dtypes, pg_status) and a 2.10 one with fields unknown here read alike; JSON too", async () => {
  const ar = (r, seq) => entry(r * 10 + seq, "0", "default_pg", "all_reduce", { seq });
  const old = (e) => Object.fromEntries(Object.entries(e).filter(([k]) => !["is_p2p", "input_dtypes", "output_dtypes", "thread_name", "thread_id", "timeout_ms"].includes(k)));
  const v22 = (r, entries) => ({ version: "2.2", pg_config: { 0: { name: "0", desc: "default_pg", ranks: [0, 1, 2] } }, entries: entries.map(old) });
  // Without pg_status, rank 2's newest work (#4, older than #5) shows it never reached #5.
  const a = await hang(folder([v22(0, [ar(0, 5)]), v22(1, [ar(1, 5)]), v22(2, [ar(2, 4)])]));
  assert.deepEqual(a.stopped, [2]);
  const v210 = (r, entries, st) => ({ ...dump(3, entries, st), version: "2.10", comm_lib_version: "2.28", entries: entries.map((e) => ({ ...e, duration_ms: null, is_coalesced: false })) });
  const b = await hang(folder([v210(0, [ar(0, 5)], [5, 4]), v210(1, [ar(1, 5)], [5, 4]), v210(2, [], [4, 4])], { prefix: "nccl_trace_rank_" }));
  assert.deepEqual(b.stopped, [2]);
  const c = await hang(folder([dump(3, [ar(0, 5)], [5, 4]), dump(3, [ar(1, 5)], [5, 4]), dump(3, [], [4, 4])], { json: true, prefix: "comm_lib_trace_rank_" }));
  assert.deepEqual(c.stopped, [2]);
});

test("the runner's own flight records (flight/rank<r>.txt) are read by the same trace hang", async () => {
  const dir = path.join(tmp, "flight");
  mkdirSync(dir);
  const head = (n) => `flight record (last ${n} ops, oldest first):`;
  writeFileSync(path.join(dir, "rank0.txt"), `${head(2)}\n  #4 step 1 allreduce ar 4096 B to 1 from 1: done after 1.0 ms (started 5.0 s ago)\n  #5 step 2 allreduce ar 4096 B to 1 from 1: timed out after 5.0 s (started 5.0 s ago)\n`);
  writeFileSync(path.join(dir, "rank1.txt"), `${head(1)}\n  #4 step 1 allreduce ar 4096 B to 0 from 0: done after 1.0 ms (started 5.0 s ago)\n`);
  writeFileSync(path.join(dir, "rank2.txt"), `${head(1)}\n  #5 step 2 allreduce ar 4096 B to 0 from 0: timed out after 5.0 s (started 5.0 s ago)\n`);
  const d = await hang(dir);
  assert.deepEqual(d.stopped, [1]);
  assert.match(d.why[0], /^rank 1: the job's communicator \(pg world\) allreduce #5: 0, 2 arrived, 1 did not/);
  // kill -9 of rank 4 (the highest): no record of its own, but its peers' records name it, so it is missing, not blamed.
  const killed = path.join(tmp, "flight-killed");
  mkdirSync(killed);
  for (const r of [0, 1, 2, 3]) writeFileSync(path.join(killed, `rank${r}.txt`), `${head(1)}\n  #9 step 3 allreduce ar 4096 B to ${(r + 1) % 5} from ${(r + 4) % 5}: peer gone after 2.0 ms (started 1.0 s ago)\n`);
  const k = await hang(killed);
  assert.deepEqual([k.stopped, k.missingDumps, k.world], [[], [4], 5]);
});

test("CLI: first line, --json, and a pickle that asks to run code exits 2 in one line and runs nothing", async () => {
  const dir = folder([dump(2, [entry(0, "0", "default_pg", "all_reduce", { seq: 2 })], [2, 1]), dump(2, [], [1, 1])]);
  const text = await runNode([RUNNER, "trace", "hang", dir]);
  assert.equal(text.code, 0, text.stderr);
  assert.equal(text.stdout.split("\n")[0], "stopped ranks: 1");
  const json = await runNode([RUNNER, "trace", "hang", dir, "--json"]);
  assert.deepEqual(JSON.parse(json.stdout).stopped, [1]);
  const marker = path.join(tmp, "ran");
  const evil = path.join(tmp, "evil");
  mkdirSync(evil);
  // os.system("touch <marker>") as a pickle: GLOBAL, then REDUCE.
  writeFileSync(path.join(evil, "_dump_0"), Buffer.concat([Buffer.from([0x80, 0x02]), Buffer.from(`cos\nsystem\n(X${String.fromCharCode(6 + marker.length)}\0\0\0touch ${marker}tR.`, "latin1")]));
  const bad = await runNode([RUNNER, "trace", "hang", evil]);
  assert.equal(bad.code, 2);
  assert.equal(bad.stderr.trim().split("\n").length, 1, bad.stderr);
  assert.match(bad.stderr, /_dump_0: pickle byte 2: opcode GLOBAL would import or call code; .* nothing was run/);
  assert.equal(existsSync(marker), false);
  const empty = await runNode([RUNNER, "trace", "hang", path.join(tmp, "nowhere")]);
  assert.equal(empty.code, 2);
  assert.match(empty.stderr, /nowhere: cannot read: no such file or folder/);
});

test("two process groups of one rank list (tensor and tensor-and-context parallel) make a family that lists each rank once", () => {
  const tp = { name: "35", ranks: [0, 1] }, cp = { name: "67", ranks: [0, 1] };
  const trace = (rank) => ({ file: `r${rank}`, rank, groups: [tp, cp, { name: "36", ranks: [2, 3] }], collectives: [] });
  const plan = planGroups([0, 1, 2, 3].map(trace), 4);
  assert.equal(plan.familyOf(tp), plan.familyOf(cp));
  assert.deepEqual(plan.familyRanks(tp), [0, 1, 2, 3]);
});

test("trace import of a 16-rank dump folder replays what every member holds, with --check at 16 ranks: 0 wrong", async () => {
  // Tensor-parallel groups of 4 ("35".."38") and tensor-and-context groups of the same ranks ("67".."70"); rank 5
  // never reached its group's broadcast #12: pg 36 is named, and pg 35's whole window (#10-12) replays.
  const tp = (r) => Math.floor(r / 4);
  const cfg = (r) => {
    const ranks = JSON.stringify([0, 1, 2, 3].map((i) => tp(r) * 4 + i));
    return { 0: { name: "0", desc: "default_pg", ranks: JSON.stringify(Array.from({ length: 16 }, (_, i) => i)) }, [35 + tp(r)]: { name: String(35 + tp(r)), desc: "TENSOR_MODEL_PARALLEL_GROUP", ranks }, [67 + tp(r)]: { name: String(67 + tp(r)), desc: "TENSOR_AND_CONTEXT_PARALLEL_GROUP", ranks } };
  };
  const dumps = Array.from({ length: 16 }, (_, r) => {
    const g = String(35 + tp(r)), c = String(67 + tp(r));
    const entries = [
      entry(1, "0", "default_pg", "all_reduce", { seq: 3, sizes: [[32]] }),
      entry(2, g, "TENSOR_MODEL_PARALLEL_GROUP", "all_reduce", { seq: 10, sizes: [[64]] }),
      { ...entry(3, g, "TENSOR_MODEL_PARALLEL_GROUP", "_all_gather_base", { seq: 11, sizes: [[16]], dtype: "BFloat16" }), output_sizes: [[64]] },
      entry(4, c, "TENSOR_AND_CONTEXT_PARALLEL_GROUP", "all_reduce", { seq: 7, sizes: [[8]], dtype: "Long" }),
      ...(r === 5 ? [] : [entry(5, g, "TENSOR_MODEL_PARALLEL_GROUP", "broadcast", { seq: 12, sizes: [[1, 48]], dtype: "Long" })]),
    ];
    return { version: "2.9", pg_config: cfg(r), pg_status: {}, entries };
  });
  const dir = folder(dumps);
  const job = path.join(tmp, "replay.json");
  const imp = await runNode([RUNNER, "trace", "import", dir, "-o", job]);
  assert.equal(imp.code, 0, imp.stderr);
  assert.match(imp.stdout, /note: pg 36: 1 collective not held by every member \(4: #10-12; 5: #10, 11; 6: #10-12; 7: #10-12\): not replayed/);
  assert.deepEqual(JSON.parse(readFileSync(job, "utf8")).stages.map((s) => s.op), ["allreduce", "allreduce", "all_gather", "broadcast", "allreduce"]);
  const json = path.join(tmp, "replay-results.json");
  const run = await runNode([RUNNER, "launch", "-n", "16", job, "--check", "--iterations", "1", "--warmup", "0", "--out", tmp, "--json", json], {}, 300_000);
  assert.equal(run.code, 0, run.stderr.slice(-2000));
  const rows = JSON.parse(readFileSync(json, "utf8")).results;
  assert.equal(rows.length, 5);
  for (const row of rows) assert.equal(row.wrong, 0, `${row.stage}: ${row.wrong} wrong`);
});
