// How long the native communicator lives, and what it refuses to start with: a communicator that JS drops
// while an op is in flight stays alive until the op settles (the addon pins it), so neither the op nor
// the collector touches freed memory, and it is collected once the op is done; a missing rank or size is
// an error, never rank 0.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { REPO, runNode } from "./helpers/ranks.js";

const ADDON = path.join(REPO, "native/build/Release/spmd_native.node");

// Run under --expose-gc in a process of its own: prints one JSON line of what it saw.
const DROPPED_DURING_AN_OP = `
const { Communicator } = require(${JSON.stringify(ADDON)});
const collected = [];
const registry = new FinalizationRegistry((what) => collected.push(what));
const turn = () => new Promise((resolve) => setImmediate(resolve));
async function main() {
  let comm = new Communicator({ backend: "shm", name: "/spmd-lifetime-" + process.pid, tag: "00".repeat(32), rank: 0, size: 1, create: true });
  registry.register(comm, "communicator");
  const program = {
    warmup: 0, iterations: 400, check: false, timeoutSec: 60,
    tensors: [{ name: "g", dtype: "float32", count: 1 << 20, fill: { kind: "rank", seed: 0, a: 0, b: 0 } }],
    ops: [{
      stage: "ar", kind: "allreduce", inputs: [0], algorithm: "auto", lane: 0, waitFor: [], groups: null, timeoutSec: 60,
      op: "sum", mean: false, inPlace: false, compression: null,
    }],
  };
  const pending = comm.run(program);
  comm = null;
  let settled = false, collectedInFlight = 0, sweeps = 0;
  pending.finally(() => { settled = true; });
  while (!settled) {
    globalThis.gc();
    await turn();
    sweeps++;
    if (!settled) collectedInFlight = collected.length;
  }
  const results = await pending;
  for (let i = 0; i < 50 && collected.length === 0; i++) {
    globalThis.gc();
    await turn();
  }
  console.log(JSON.stringify({ sweeps, collectedInFlight, steps: results[0].timeUs.length, collectedAfter: collected.length }));
}
main().catch((e) => { console.error(e); process.exit(1); });
`;

test("a communicator dropped during an op is kept until the op settles, then collected", async () => {
  const p = await runNode(["--expose-gc", "-e", DROPPED_DURING_AN_OP], {}, 60_000);
  assert.equal(p.code, 0, p.stderr);
  const seen = JSON.parse(p.stdout.trim().split("\n").at(-1));
  assert.ok(seen.sweeps > 1, "collections ran while the op was in flight");
  assert.equal(seen.collectedInFlight, 0, "not collected while its op runs");
  assert.equal(seen.steps, 400, "the op settled with every step's time");
  assert.equal(seen.collectedAfter, 1, "collected once the op settled: the pin is released");
});

test("a communicator without a rank or size is refused, not started as rank 0", async () => {
  const script = `
const { Communicator } = require(${JSON.stringify(ADDON)});
const tries = [{ size: 1 }, { rank: 0 }, { rank: "0", size: 1 }, { rank: 0.5, size: 1 }];
for (const t of tries) {
  try {
    new Communicator({ backend: "shm", name: "/spmd-norank-" + process.pid, tag: "00".repeat(32), create: true, ...t });
    console.log("started");
  } catch (e) {
    console.log(e.code + " " + e.message);
  }
}`;
  const p = await runNode(["-e", script], {}, 30_000);
  assert.equal(p.code, 0, p.stderr);
  const lines = p.stdout.trim().split("\n");
  assert.equal(lines.length, 4);
  assert.match(lines[0], /^ERR_SPMD_INVALID .*\brank\b.*missing/);
  assert.match(lines[1], /^ERR_SPMD_INVALID .*\bsize\b.*missing/);
  assert.match(lines[2], /^ERR_SPMD_INVALID .*\brank\b.*expected an integer/);
  assert.match(lines[3], /^ERR_SPMD_INVALID .*\brank\b.*expected an integer/);
});
