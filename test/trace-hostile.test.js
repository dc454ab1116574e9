// `runner trace import` on hostile and broken traces (issue #41's list): each one exit 2 in one line naming the
// file (and the node or event), in bounded time, under a 256 MiB heap, with no control byte from the file in
// the message. The files are made here, small; the gzip bomb is gzip members of blanks repeated.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { gzipSync } from "node:zlib";
import { RUNNER, runNode } from "./helpers/ranks.js";

const LIMITED = ["--max-old-space-size=256", "--stack-size=984"];

/** `node --max-old-space-size=256 runner trace import ARGS`: code, stderr, and how long it took. */
async function importUnderLimit(args) {
  const started = Date.now();
  const p = await runNode([...LIMITED, RUNNER, "trace", "import", ...args], {}, 120_000);
  return { ...p, seconds: (Date.now() - started) / 1000 };
}

/** Exit 2, one line, naming `file`, matching `pattern`, nothing unprintable. */
function oneLine(p, file, pattern) {
  assert.equal(p.code, 2, `exit ${p.code} (${p.signal ?? ""}): ${p.stderr.slice(0, 2000)}`);
  const lines = p.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, p.stderr.slice(0, 2000));
  assert.ok(lines[0].startsWith(`runner: ${file}`), lines[0]);
  assert.match(lines[0], pattern);
  // eslint-disable-next-line no-control-regex
  assert.doesNotMatch(lines[0], /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/, "a control byte in the message");
}

function withDir(fn) {
  return async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "spmd-hostile-"));
    try {
      await fn(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

/** An ET 1.1 record_param_comms node: `count` floats on group "0" of `W` ranks, attrs as PyTorch writes them. */
function rpc(id, { name = "allreduce", count = 1024, W = 8, rank = 0, attrs = {}, seq = id } = {}) {
  const a = { collective_name: name, dtype: "Float", in_msg_nelems: count, out_msg_nelems: count, in_split_size: "[]", out_split_size: "[]", pg_size: W, pg_name: "0", ...attrs };
  return {
    id, name: "record_param_comms", ctrl_deps: 1,
    inputs: { values: [[[id, id, 0, 1, 4, "cuda:0"]], seq, ["0", "default_pg"], rank, name, [], [], 0, 1, W], shapes: [], types: ["GenericList[Tensor(float)]", "Int", "Tuple[String,String]", "Int", "String", "GenericList[Int]", "GenericList[Int]", "Int", "Int", "Int"] },
    outputs: { values: [[[id, id, 0, 1, 4, "cuda:0"]]], shapes: [], types: ["GenericList[Tensor(float)]"] },
    attrs: Object.entries(a).map(([k, v]) => ({ name: k, type: typeof v === "number" ? "uint64" : "string", value: v })),
  };
}

function pgInit(W, extra = {}) {
  return {
    id: 2, name: "## process_group:init ##", ctrl_deps: 1,
    inputs: { values: [JSON.stringify([{ pg_name: "0", pg_desc: "default_pg", ranks: [], group_size: W, ...extra }])], shapes: [[]], types: ["String"] },
    outputs: { values: [], shapes: [], types: [] }, attrs: [],
  };
}

const et = (nodes) => JSON.stringify({ schema: "1.1.0-chakra.0.0.4", pid: 1, time: "2024-01-01 00:00:00", start_ts: 0, nodes, finish_ts: 1 });

/** A Kineto trace of rank `rank` with one NCCL kernel whose args are `args`. */
function kineto({ rank = 0, world = 2, args = {} } = {}) {
  return JSON.stringify({
    schemaVersion: 1, distributedInfo: { backend: "nccl", rank, world_size: world },
    traceEvents: [{ ph: "X", cat: "kernel", name: "ncclDevKernel_AllReduce_Sum_f32_RING_LL", pid: 0, tid: 7, ts: 10, dur: 5, args: { "Collective name": "allreduce", dtype: "Float", "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": world, "Process Group Name": "0", "Process Group Ranks": "[0, 1]", ...args } }],
  });
}

test("20,000 collectives on 8 ranks (a few hundred KB gzipped) import in bounded time and memory", withDir(async (dir) => {
  const file = path.join(dir, "rank0.et.json.gz");
  const nodes = [pgInit(8), ...Array.from({ length: 20_000 }, (_, i) => rpc(10 + i, { count: 1024 + (i % 7) }))];
  writeFileSync(file, gzipSync(et(nodes)));
  const p = await importUnderLimit([file, "-o", path.join(dir, "job.json")]);
  assert.equal(p.code, 0, p.stderr.slice(0, 2000));
  assert.match(p.stdout, /wrote .*: 20000 stages at 8 ranks/);
  assert.ok(p.seconds < 60, `${p.seconds} s`);
}));

test("more collectives than the cap (50,000): refused while streaming, under the memory limit", withDir(async (dir) => {
  const file = path.join(dir, "rank0.et.json.gz");
  writeFileSync(file, gzipSync(et([pgInit(8), ...Array.from({ length: 120_000 }, (_, i) => rpc(10 + i))])));
  oneLine(await importUnderLimit([file]), file, /more than 100000 collective nodes \(the importer's cap is 50000 collectives\)$/);
}));

test("100,000-deep nested lists: refused at the nesting cap, no stack overflow", withDir(async (dir) => {
  const file = path.join(dir, "rank0.json");
  const node = rpc(10);
  node.inputs.values[0] = JSON.parse("[".repeat(40) + "1" + "]".repeat(40));
  writeFileSync(file, et([pgInit(2), node]).replace('"nodes":[', `"nodes":[${"[".repeat(100_000)}${"]".repeat(100_000)},`));
  oneLine(await importUnderLimit([file]), file, /nested deeper than 64 levels \(at byte \d+\)$/);
}));

test("a gzip bomb: refused once it decompresses past the cap, streamed, never held", withDir(async (dir) => {
  const file = path.join(dir, "rank0.json.gz");
  // 64 MiB of blanks is one 64 KiB gzip member; 40 members in a row are 2.5 GiB decompressed.
  const member = gzipSync(Buffer.alloc(64 << 20, 0x20), { level: 9 });
  writeFileSync(file, Buffer.concat([gzipSync('{"schema": "1.1.0", "nodes": ['), ...Array.from({ length: 40 }, () => member)]));
  const p = await importUnderLimit([file, "--max-bytes", "1Gi"]);
  oneLine(p, file, /it decompresses to more than 1073741824 bytes, the cap on a trace's size \(--max-bytes raises it\)$/);
  // The default cap is 4 GiB; the flag takes a size.
  const bad = await importUnderLimit([file, "--max-bytes", "lots"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^runner: --max-bytes: expected a size like/);
}));

test("group_size 1e9, --world 1e9, a Kineto Group size of 1e9: refused at the world cap", withDir(async (dir) => {
  const file = path.join(dir, "rank0.json");
  writeFileSync(file, et([pgInit(1e9), rpc(10)]));
  oneLine(await importUnderLimit([file]), file, /node 2 \(## process_group:init ##\), group "0": group_size is "1000000000", expected an integer from 1 to 65536 \(the importer's cap on world and group sizes\)$/);
  const world = await importUnderLimit([file, "--world", "1000000000"]);
  assert.equal(world.code, 2);
  assert.match(world.stderr, /^runner: --world must be an integer from 1 to 65536, got 1000000000\n$/);
  const k = path.join(dir, "rank1.json");
  writeFileSync(k, kineto({ rank: 1, args: { "Group size": 1e9, "Process Group Ranks": "[0, 1, ...]" } }));
  oneLine(await importUnderLimit([k]), k, /kernel "ncclDevKernel_AllReduce_Sum_f32_RING_LL" at ts 10: "Group size" is "1000000000", expected an integer from 1 to 65536/);
  const n = path.join(dir, "rank0.pt.trace.json");
  writeFileSync(n, et([pgInit(8), rpc(10, { W: 8, attrs: { pg_name: "9", pg_size: 1e9 } })]).replace('"schema"', '"x":1,"schema"'));
  oneLine(await importUnderLimit([n]), n, /node 10 \(record_param_comms\): process group "9"'s size is "1000000000"/);
}));

test('distributedInfo.rank "abc", -1 or 1.5, and ET ranks out of range: refused at once', withDir(async (dir) => {
  for (const rank of ["abc", -1, 1.5, 1e12]) {
    const file = path.join(dir, `trace-${String(rank)}.json`);
    writeFileSync(file, kineto({ rank }));
    const p = await importUnderLimit([file]);
    oneLine(p, file, /distributedInfo: rank is .*, expected an integer from 0 to 65535$/);
    assert.ok(p.seconds < 20, `${p.seconds} s`);
  }
  const file = path.join(dir, "rank0.json");
  writeFileSync(file, et([pgInit(8), rpc(10, { rank: -3 })]));
  oneLine(await importUnderLimit([file]), file, /node 10 \(record_param_comms\): its rank is "-3", expected an integer from 0 to 65535$/);
  writeFileSync(file, et([pgInit(8), rpc(10, { rank: 9 })]));
  oneLine(await importUnderLimit([file]), file, /node 10 \(record_param_comms\): rank 9 is outside its process group "0" of 8 ranks$/);
}));

test("a FIFO, a link to /dev/zero, a folder: only regular files are read", withDir(async (dir) => {
  const traces = path.join(dir, "traces");
  execFileSync("mkdir", [traces]);
  writeFileSync(path.join(traces, "rank0.json"), kineto({ rank: 0 }));
  const fifo = path.join(traces, "rank1.json");
  execFileSync("mkfifo", [fifo]);
  oneLine(await importUnderLimit([traces]), fifo, /not a regular file \(a FIFO\): only regular files are read as traces$/);
  rmSync(fifo);
  const zero = path.join(traces, "rank1.json");
  symlinkSync("/dev/zero", zero);
  oneLine(await importUnderLimit([traces]), zero, /not a regular file \(a character device\)/);
  oneLine(await importUnderLimit([zero]), zero, /not a regular file \(a character device\)/);
  rmSync(zero);
  const sub = path.join(traces, "rank1.json");
  execFileSync("mkdir", [sub]);
  oneLine(await importUnderLimit([traces]), sub, /not a regular file \(a folder\)/);
}));

test("malformed fields: one line naming the file and the node or event, never a TypeError", withDir(async (dir) => {
  const file = path.join(dir, "rank0.json");
  const cases = [
    [et([pgInit(2), { ...rpc(10), attrs: 7 }]), /node 10 \(record_param_comms\): "attrs" is not a list$/],
    [et([pgInit(2), { ...rpc(10), attrs: [null] }]), /node 10 \(record_param_comms\): an attr without a name$/],
    [et([pgInit(2), { ...rpc(10), inputs: { values: 3, types: [] } }]), /node 10 \(record_param_comms\): its inputs are not a list of values/],
    [et([pgInit(2), { ...rpc(10), id: "x" }]), /a "record_param_comms" node's id is "x", expected an integer >= 0$/],
    [et([{ ...pgInit(2), inputs: { values: ["[{]"], types: ["String"] } }, rpc(10)]), /node 2 \(## process_group:init ##\): its group list is not JSON/],
    [et([{ ...pgInit(2), inputs: { values: ['[{"pg_name": "0", "ranks": 5, "group_size": 2}]'], types: ["String"] } }, rpc(10)]), /group "0": ranks is "5", expected a list$/],
    [JSON.stringify({ schema: "1.1.0", nodes: 5 }), /"nodes" is not a list$/],
    [kineto().replace('"ts":10', '"ts":"soon"'), /event "ncclDevKernel_AllReduce_Sum_f32_RING_LL": ts is "soon", expected a number$/],
    [kineto({ args: { "Process Group Ranks": "[0, x]" } }), /kernel .* at ts 10: a listed rank is "x"/],
    [kineto({ args: { "In split size": 7 } }), /"In split size" is "7", expected a list of counts$/],
    [JSON.stringify({ traceEvents: [], distributedInfo: { pg_config: 3 } }), /distributedInfo.pg_config is not a list$/],
  ];
  for (const [text, pattern] of cases) {
    writeFileSync(file, text);
    oneLine(await importUnderLimit([file]), file, pattern);
  }
}));

test("counts of 1e15, -5, 1.5, NaN and text: refused naming the node or event, before a job is written", withDir(async (dir) => {
  const file = path.join(dir, "rank0.json");
  for (const count of [1e15, -5, 1.5, "lots", "NaN"]) {
    writeFileSync(file, et([pgInit(2), rpc(10, { W: 2, count })]));
    oneLine(await importUnderLimit([file]), file, /node 10 \(record_param_comms\): its in count is .*, expected an integer from 0 to 2\^40$/);
    writeFileSync(file, kineto({ args: { "In msg nelems": count } }));
    oneLine(await importUnderLimit([file]), file, /kernel .* at ts 10: "In msg nelems" is .*, expected an integer from 0 to 2\^40$/);
  }
  // A tensor's elements in range, but a derived size (scatter: out × group) past the job's.
  writeFileSync(file, et([pgInit(2), rpc(10, { W: 2, name: "scatter", count: 2 ** 40, attrs: { out_msg_nelems: 2 ** 40 } })]));
  oneLine(await importUnderLimit([file]), file, /scatter \(group 0 #0\): a tensor of 2199023255552 elements, outside the job's range of 0 to 2\^40$/);
}));

test("control bytes and long names from the file never reach the terminal", withDir(async (dir) => {
  const file = path.join(dir, "rank0.json");
  writeFileSync(file, et([pgInit(2), rpc(10, { W: 2, attrs: { dtype: "\u001b[31mred\u0007".repeat(50) } })]));
  const p = await importUnderLimit([file]);
  oneLine(p, file, /no collectives to replay: 1 × allreduce \(dtype .* has no job dtype\)$/);
  writeFileSync(file, `{"schema": "1.1.0", "nodes": [\u001b]}`);
  oneLine(await importUnderLimit([file]), file, /not JSON: .* \(at byte \d+\)$/);
  const chakra = path.join(dir, "rank0.json");
  writeFileSync(chakra, Buffer.from([0x1b, 0x5b, 0x32, 0x4a, 0x07, 0x00, 0xff]));
  oneLine(await importUnderLimit([chakra]), chakra, /not JSON: expected a JSON object \(at byte 0\)$/);
}));

test("an export's attributes forged (stage_op, reduce_op, stage_options, compute_us): refused naming the file and node", withDir(async (dir) => {
  const { chakraCodec } = await import("../dist/trace/chakra.js");
  const { pb, GlobalMetadata, Node } = await chakraCodec();
  const exported = path.join(dir, "exported");
  const job = path.join(dir, "job.json");
  writeFileSync(job, JSON.stringify({ name: "j", worldSize: 2, tensors: { t: { dtype: "float32", count: 64 } }, stages: [{ id: "ar", op: "allreduce", input: "t" }, { id: "c", op: "compute", us: 5 }] }));
  assert.equal((await runNode([RUNNER, "trace", "export", job, "-o", exported])).code, 0);
  const file = path.join(exported, "j.0.et");
  const original = Buffer.from(execFileSync("cat", [file]));
  /** Rank 0's file with the attribute `name` of node `k` set to `value` (a new one where it has none). */
  const forge = (k, attr) => {
    const reader = pb.Reader.create(original);
    const writer = pb.Writer.create();
    GlobalMetadata.encodeDelimited(GlobalMetadata.decodeDelimited(reader), writer);
    for (let i = 0; reader.pos < reader.len; i++) {
      const node = Node.toObject(Node.decodeDelimited(reader), { longs: Number });
      if (i === k) node.attr = [...node.attr.filter((a) => a.name !== attr.name), attr];
      Node.encodeDelimited(Node.fromObject(node), writer);
    }
    writeFileSync(file, writer.finish());
  };
  const cases = [
    [0, { name: "stage_op", string_val: "rm -rf" }, /node 1 \(allreduce ar\): stage_op is "rm -rf", expected a job stage op$/],
    [0, { name: "reduce_op", string_val: "xor" }, /node 1 \(allreduce ar\): reduce_op is "xor", expected one of sum, mean, max, min$/],
    [0, { name: "stage_options", string_val: '{"group": "x"}' }, /node 1 \(allreduce ar\): stage_options is .*, expected a JSON object of at most 4096 bytes/],
    [0, { name: "stage_options", string_val: '{"algorithm": "warp"}' }, /its stage_options make no valid job: .*algorithm/],
    [1, { name: "compute_us", double_val: -1 }, /node 2 \(compute c\): compute_us is "-1", expected a number of microseconds/],
  ];
  for (const [k, attr, pattern] of cases) {
    forge(k, attr);
    oneLine(await importUnderLimit([exported]), path.join(exported, pattern.source.startsWith("its") ? "" : "j.0.et"), pattern);
  }
}));
