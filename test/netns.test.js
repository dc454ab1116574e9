// One job spread over several hosts, the hosts being network namespaces on a bridge (helpers/netns.js):
// the tcp backend with every stage checked element by element; backend auto choosing shm within hosts and
// tcp between them ("shm+tcp"), also under the hierarchical quantized allreduce; IPv6-only hosts with
// --iface; a rank killed on another host. Needs root; skipped with the reason otherwise, except in CI (CI
// set), where that is a failure.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { native } from "../dist/comm/native.js";
import { bigJob, prepareJob, slicedRingJob, smallJob, verifyDumps } from "./helpers/matrix.js";
import { inHost, netnsUnavailable, placeRanks, runInHost, runSpread, withHosts } from "./helpers/netns.js";
import { runRanks, shmLeftovers } from "./helpers/ranks.js";

const missing = netnsUnavailable();
// Within a host, shm+tcp hands messages of singleCopyFromBytes and more off single-copy where CMA works (not
// timed: the shm backend's start-up timing runs its shared algorithms, which shm+tcp does not use).
const refused = native().singleCopyRefusal();
const COPY_PATH = refused ? `staged (rank 0: ${refused})` : "single-copy: cma (process_vm_readv/writev) from 1 MiB (messages within a host, not timed)";
if (missing && !process.env.CI) console.log(`# netns.test.js skipped: ${missing}`);

function netnsTest(name, fn) {
  test(name, { skip: missing && !process.env.CI ? missing : false }, async () => {
    if (missing) assert.fail(`CI must run the multi-host tests: ${missing}`);
    await fn();
  });
}

/** Runs `job` with its ranks spread as `placement` says; checks exit codes and 0 wrong; returns the result document. */
async function runJob(hosts, placement, job, { dump = false, args = [], env = {} } = {}) {
  const W = placement.length;
  const { dir, json, dumpDir, run } = prepareJob(W, job, { dump, extraArgs: args, launch: (_, a) => runSpread(hosts, placement, a, { env }) });
  try {
    const ranks = await run();
    ranks.forEach((p, r) => assert.equal(p.code, 0, `rank ${r} exited ${p.code}: ${p.stderr}`));
    const doc = JSON.parse(readFileSync(json, "utf8"));
    assert.equal(doc.results.length, job.stages.length);
    for (const row of doc.results) if (row.type) assert.equal(row.wrong, 0, `${row.stage}: runner's check found ${row.wrong} wrong`);
    if (dump) assert.ok(verifyDumps(job, W, dumpDir) > 1000 * W, "too few elements compared");
    const [runDir] = readdirSync(path.join(dir, "runs"));
    return { doc, table: readFileSync(path.join(dir, "runs", runDir, "table.txt"), "utf8") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

netnsTest("tcp backend, 4 ranks on 3 hosts (2+1+1): every stage, every dtype, exact element by element; 1000003 elements checked", async () => {
  await withHosts(3, async (hosts) => {
    const placement = [0, 0, 1, 2];
    for (const [job, dump] of [[smallJob(4), true], [bigJob(4), false]]) {
      const { doc, table } = await runJob(hosts, placement, job, { dump, args: ["--backend", "tcp"] });
      assert.equal(doc.backend, "tcp");
      assert.equal(doc.topology.hosts.length, 3);
      assert.deepEqual(doc.topology.hosts.map((h) => h.ranks), [[0, 1], [2], [3]]);
      assert.deepEqual(doc.topology.links, { shm: 0, tcp: 6 });
      assert.match(table, /backend tcp\n# 3 hosts: .*; links: 6 tcp\n/);
    }
  });
});

netnsTest("backend auto on 2 hosts × 2 ranks: shm within each host, tcp between (shm+tcp), every stage exact", async () => {
  await withHosts(2, async (hosts) => {
    const placement = [0, 0, 1, 1];
    for (const [job, dump] of [[smallJob(4), true], [bigJob(4), false], [slicedRingJob(), false]]) {
      const { doc, table } = await runJob(hosts, placement, job, { dump });
      assert.equal(doc.backend, "shm+tcp");
      assert.equal(doc.copy_path, COPY_PATH);
      assert.deepEqual(doc.topology.links, { shm: 2, tcp: 4 });
      assert.match(table, /backend shm\+tcp\n# 2 hosts: \S+ \(ranks 0,1\), \S+ \(ranks 2,3\); links: 2 shm, 4 tcp\n/);
    }
  });
});

/**
 * The hierarchical allreduce, by name and by auto (in place): float32 sum, int32 sum and int64 max over counts
 * that no number of hosts × ranks divides, none, and (float32) one of several ring slices per block across hosts.
 */
function hierarchicalJob() {
  const tensors = {}, stages = [];
  const cases = [["float32", "sum", [0, 7, 1003, 2_500_007]], ["int32", "sum", [0, 7, 1003, 300_007]], ["int64", "max", [7, 1003]]];
  for (const [dtype, reduce, counts] of cases) {
    for (const n of counts) {
      const t = `${dtype}_${n}`;
      tensors[t] = { dtype, count: n, fill: { kind: "integers", seed: n + 3, low: -9, high: 9 } };
      stages.push({ id: `${t}.hierarchical`, op: "allreduce", input: t, reduce, algorithm: "hierarchical" });
      stages.push({ id: `${t}.auto`, op: "allreduce", input: t, reduce, inPlace: true });
    }
  }
  return { name: "hierarchical", iterations: 1, warmup: 1, check: true, tensors, stages };
}

// Rank 2 of the alternating placement is its host's second member: the staged path names it by its job rank.
const stageRank2 = (r) => (r === 2 ? { SPMD_SHM_SINGLE_COPY: "0" } : {});

netnsTest("two namespace hosts of one machine: two hosts (keys differ), one machine (the boot id), whose ranks count together where cores are shared", async () => {
  const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  const script = `import(${JSON.stringify(new URL("../dist/comm/host.js", import.meta.url).href)}).then((m) => console.log(JSON.stringify(m.hostIdentity())))`;
  await withHosts(2, async (hosts) => {
    const ids = hosts.map((h) => {
      const [cmd, ...args] = inHost(h, [process.execPath, "-e", script]);
      const p = spawnSync(cmd, args, { encoding: "utf8" });
      assert.equal(p.status, 0, p.stderr);
      return JSON.parse(p.stdout);
    });
    assert.deepEqual(ids.map((id) => id.name), hosts.map((h) => h.name));
    assert.notEqual(ids[0].key, ids[1].key);
    assert.deepEqual(ids.map((id) => id.machine), [boot, boot]);
  });
});

netnsTest("hierarchical allreduce on shm+tcp: 2 × 2, 2 × 2 alternating (single copy and staged), 2 × 3 exact element by element (and 2 × 2 on tcp); 3 + 2 ranks fall back to the ring", async () => {
  await withHosts(2, async (hosts) => {
    const cases = [[[0, 0, 1, 1]], [[0, 1, 0, 1]], [[0, 1, 0, 1], undefined, stageRank2], [[0, 0, 0, 1, 1, 1]], [[0, 0, 0, 1, 1]], [[0, 0, 1, 1], "tcp"]];
    for (const [placement, backend, env = {}] of cases) {
      const even = placement.filter((h) => h === 0).length * 2 === placement.length;
      const { doc } = await runJob(hosts, placement, hierarchicalJob(), { dump: true, args: backend ? ["--backend", backend] : [], env });
      assert.equal(doc.backend, backend ?? "shm+tcp");
      assert.equal(doc.copy_path, backend ? undefined : env === stageRank2 ? "staged (rank 2: SPMD_SHM_SINGLE_COPY=0)" : COPY_PATH);
      for (const row of doc.results) {
        // Auto keeps the tree below 32 KiB, where latency rules.
        const want = row.stage.endsWith(".auto") && row.size < 32 * 1024 ? "tree" : even ? "hierarchical" : "ring";
        assert.equal(row.algorithm, want, `${placement}: ${row.stage} (${row.size} bytes)`);
      }
    }
  });
});

netnsTest("quantized_allreduce (2 nodes × 2) on 2 hosts over shm+tcp: byte-identical outputs and error buffers to one host on shm", async () => {
  const job = {
    name: "qgz-hosts", iterations: 2, warmup: 1,
    tensors: { g: { dtype: "float32", count: "64Ki", fill: { kind: "normal", seed: 5 } } },
    stages: [
      { id: "int8", op: "quantized_allreduce", input: "g", bits: 8, nodes: 2, localSize: 2, errorFeedback: { beta: 1 } },
      // In pieces of 3 of its 8 groups per block (qgz.test.js: the bytes of one piece), so the pipelined form runs on shm+tcp too.
      { id: "int4", op: "quantized_allreduce", input: "g", bits: 4, nodes: 2, localSize: 2, reduce: "mean", pieceGroups: 3 },
    ],
  };
  const dumps = {};
  const dirs = [];
  try {
    await withHosts(2, async (hosts) => {
      for (const [where, launch] of [["hosts", (_, a) => runSpread(hosts, [0, 0, 1, 1], a)], ["one host", (n, a) => runRanks(n, a)]]) {
        const { dir, json, dumpDir, run } = prepareJob(4, job, { dump: true, launch });
        dirs.push(dir);
        const ranks = await run();
        ranks.forEach((p, r) => assert.equal(p.code, 0, `${where}: rank ${r} exited ${p.code}: ${p.stderr}`));
        assert.equal(JSON.parse(readFileSync(json, "utf8")).backend, where === "hosts" ? "shm+tcp" : "shm");
        dumps[where] = dumpDir;
      }
    });
    let files = 0;
    for (const stage of ["int8", "int4"]) {
      const names = readdirSync(path.join(dumps["one host"], stage)).sort();
      assert.deepEqual(readdirSync(path.join(dumps.hosts, stage)).sort(), names);
      for (const name of names) {
        assert.ok(readFileSync(path.join(dumps.hosts, stage, name)).equals(readFileSync(path.join(dumps["one host"], stage, name))), `${stage}/${name} differs`);
        files++;
      }
    }
    assert.ok(files >= 2 * 4 * 2, `compared only ${files} files`);
  } finally {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
});

netnsTest("IPv6: 3 hosts without IPv4, rendezvous at [fd77::1], --iface eth0: every stage exact on tcp", async () => {
  await withHosts(3, async (hosts) => {
    const { doc } = await runJob(hosts, [0, 1, 2], smallJob(3), { dump: true, args: ["--iface", "eth0"] });
    assert.equal(doc.backend, "tcp", "one rank per host: auto is plain tcp");
  }, { ipv4: false });
});

netnsTest("kill -9 of a rank on another host mid-run: the others exit non-zero within seconds naming it (tcp)", async () => {
  await withHosts(3, async (hosts) => {
    const { dir } = prepareJob(3, {
      name: "long", iterations: 1000000, warmup: 0,
      tensors: { t: { dtype: "float32", count: "256Ki" } },
      stages: [{ id: "ar", op: "allreduce", input: "t" }],
    });
    try {
      const envs = placeRanks(hosts, [0, 1, 2]);
      const jobFile = `${dir}/job.json`;
      const ranks = envs.map((env, r) => runInHost(hosts[r], [jobFile, "--out", `${dir}/runs`, "--log-level", "debug", "--log-all-ranks"], env));
      // Killed once every rank runs the stage, so the failure hits the transport, not the start.
      for (const r of ranks) while (!/running 1 stages/.test(r.output())) await new Promise((res) => setTimeout(res, 50));
      await new Promise((res) => setTimeout(res, 300));
      const killedAt = Date.now();
      ranks[1].child.kill("SIGKILL");
      const results = await Promise.all(ranks.map((r) => r.done));
      const took = Date.now() - killedAt;
      assert.ok(took < 10_000, `survivors took ${took} ms to exit`);
      for (const r of [0, 2]) {
        assert.notEqual(results[r].code, 0, `rank ${r} should fail`);
        assert.match(results[r].stderr, /rank 1 \(10\.77\.0\.2:\d+\) is gone/, `rank ${r} names the dead rank:\n${results[r].stderr}`);
      }
      assert.deepEqual(shmLeftovers(results.map((r) => r.pid)), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

netnsTest("a rank stopped (SIGSTOP) on shm+tcp, 2 hosts × 2 ranks: every other rank names it at the deadline, from the segment or the roll call", async () => {
  await withHosts(2, async (hosts) => {
    const timeoutSec = 3, stopped = 3;
    const { dir } = prepareJob(4, {
      name: "long", iterations: 1000000, warmup: 0, timeoutSec,
      tensors: { t: { dtype: "float32", count: "16Ki" } },
      stages: [{ id: "ar", op: "allreduce", input: "t" }],
    });
    try {
      const placement = [0, 0, 1, 1];
      const envs = placeRanks(hosts, placement);
      const ranks = envs.map((env, r) => runInHost(hosts[placement[r]], [`${dir}/job.json`, "--out", `${dir}/runs`, "--log-level", "debug", "--log-all-ranks"], env));
      for (const r of ranks) while (!/running 1 stage/.test(r.output())) await new Promise((res) => setTimeout(res, 50));
      await new Promise((res) => setTimeout(res, 300));
      const stoppedAt = Date.now();
      ranks[stopped].child.kill("SIGSTOP");
      try {
        const others = await Promise.all(ranks.filter((_, r) => r !== stopped).map((r) => r.done));
        const took = Date.now() - stoppedAt;
        assert.ok(took < timeoutSec * 1000 + 10_000, `the others took ${took} ms to exit`);
        for (const p of others) {
          assert.equal(p.code, 1, p.stderr);
          // Rank 2 shares rank 3's segment and sees it silent there; ranks 0 and 1 ask it over tcp.
          assert.match(p.stderr, /holding up op #\d+[^\n]*: rank 3 (silent for \d+\.\d s|did not answer the roll call)/, p.stderr);
          assert.doesNotMatch(p.stderr, /holding up [^\n]*rank [012] (silent|did not|is )/, "only the stopped rank is blamed");
        }
      } finally {
        ranks[stopped].child.kill("SIGKILL");
        ranks[stopped].child.kill("SIGCONT");
      }
      await ranks[stopped].done;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
