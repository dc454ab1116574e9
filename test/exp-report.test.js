// The campaign report's crossover table (`runner exp report`): which series leads at each size, by how much,
// and a flag where the lead does not hold across repetitions (the series' repetitions overlap).
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { RUNNER, runNode } from "./helpers/ranks.js";
import { withTempDir } from "./helpers/tmp.js";

/**
 * A campaign folder as `exp run` leaves it: one point per backend at W=2, busbw[size] per repetition, and where
 * `trips` gives them, each repetition's core round trip per backend.
 */
function campaign(dir, busbw, trips = {}) {
  for (const [i, [backend, sizes]] of Object.entries(busbw).entries()) {
    const id = `00000000000${i}`;
    const params = { job: "j", backend, world_size: 2, hosts: 1, variant: "base", executor: "local" };
    const reps = Object.values(sizes)[0].length;
    const point = path.join(dir, "points", id);
    mkdirSync(point, { recursive: true });
    writeFileSync(path.join(point, "point.json"), JSON.stringify({ id, slot: backend, params, job_path: "job.json", env: {}, version: "0.1.0", repetitions: reps, attempts: reps }));
    for (let rep = 1; rep <= reps; rep++) {
      const results = Object.entries(sizes).map(([size, v]) => {
        const us = Number(size) / v[rep - 1] / 1e3;
        return { stage: "ar", op: "allreduce", size: Number(size), count: size / 4, type: "float32", redop: "sum", root: null, busbw: v[rep - 1], algbw: v[rep - 1], wrong: 0, time: { avg_us: us, min_us: us, p50_us: us, max_us: us } };
      });
      mkdirSync(path.join(point, `rep-${rep}`));
      const probe = trips[backend] ? { core_round_trip_ns: [trips[backend][rep - 1]] } : {};
      writeFileSync(path.join(point, `rep-${rep}`, "results.json"), JSON.stringify({ version: "0.1.0", job: "j", world_size: 2, backend, ...probe, results }));
      writeFileSync(path.join(point, `rep-${rep}`, "marker.json"), JSON.stringify({ state: "done", exit_code: 0, ended: "2026-11-28T00:00:00.000Z" }));
    }
  }
}

test("crossover: a lead whose repetitions overlap the runner-up's is flagged within noise; one apart in every repetition is not", async () => {
  await withTempDir("spmd-exp-report-", async (tmp) => {
    campaign(tmp, {
      // 16 KiB: shm leads by its median (9 against 6 GB/s), but one repetition of each side crosses the other's.
      // 1 MiB: shm is ahead in every repetition.
      shm: { 16384: [9, 4, 10], 1048576: [10, 11, 10.5] },
      tcp: { 16384: [6, 8, 5], 1048576: [5, 5.2, 5.1] },
    });
    const p = await runNode([RUNNER, "exp", "report", "--dir", tmp], {}, 120_000);
    assert.equal(p.code, 0, p.stderr);
    const md = readFileSync(path.join(tmp, "report.md"), "utf8");
    const table = md.split("## Crossover")[1].split("\n## ")[0];
    const row = (size) => table.split("\n").find((l) => l.includes(`| ${size} |`));
    assert.match(row("16 KiB") ?? table, /\| shm \| 9 \| tcp \| 50\.0% \\\(within noise\\\) \|$/, "report.md escapes the parentheses");
    assert.match(row("1 MiB") ?? table, /\| shm \| 10\.500 \| tcp \| 105\.9% \|$/);
    const html = readFileSync(path.join(tmp, "report.html"), "utf8");
    assert.match(html, /50\.0% \(within noise\)/);
  });
});

test("crossover: a lead whose launches measured another machine than the runner-up's is flagged 'machine differed'", async () => {
  await withTempDir("spmd-exp-report-", async (tmp) => {
    // shm ahead in every repetition, but every one of its launches found the ranks' cores 50 ns apart, mpi's 320.
    campaign(tmp, { shm: { 1048576: [10, 11, 10.5] }, mpi: { 1048576: [5, 5.2, 5.1] } }, { shm: [50, 51, 52], mpi: [320, 330, 310] });
    const p = await runNode([RUNNER, "exp", "report", "--dir", tmp], {}, 120_000);
    assert.equal(p.code, 0, p.stderr);
    const table = readFileSync(path.join(tmp, "report.md"), "utf8").split("## Crossover")[1].split("\n## ")[0];
    assert.match(table, /\| shm \| 10\.500 \| mpi \| 105\.9% \\\(machine differed\\\) \|$/m);
  });
});

test("crossover: a campaign of one backend says there is nothing to rank instead of an empty table", async () => {
  await withTempDir("spmd-exp-report-", async (tmp) => {
    campaign(tmp, { shm: { 16384: [9, 4, 10] } });
    const p = await runNode([RUNNER, "exp", "report", "--dir", tmp], {}, 120_000);
    assert.equal(p.code, 0, p.stderr);
    const section = readFileSync(path.join(tmp, "report.md"), "utf8").split("## Crossover")[1].split("\n## ")[0];
    assert.equal(section.trim(), "Each op, size and world size ran one backend: nothing to rank.");
    assert.match(readFileSync(path.join(tmp, "report.html"), "utf8"), /<p>Each op, size and world size ran one backend: nothing to rank\.<\/p>/);
  });
});

test("campaign charts: a line per stage and combination of its swept parameters (sum and max drew one zigzag)", async () => {
  const [{ campaignSpecs }, { groupRows }] = await Promise.all([import("../dist/exp/plots.js"), import("../dist/exp/analyze.js")]);
  const row = (size, reduce, busbw) => ({ point_id: "p", rep: 1, job: "j", backend: "shm", world_size: 2, hosts: 1, variant: "base", executor: "local",
    stage: "ar", op: "allreduce", size, type: "float32", busbw, wrong: 0, avg_us: 1, params_reduce: reduce });
  const [bandwidth] = campaignSpecs(groupRows([1024, 4096].flatMap((size) => [row(size, "sum", 1), row(size, "max", 2)])), ["backend"]);
  assert.deepEqual([...new Set(bandwidth.data.values.map((v) => v.stage))].sort(), ["ar[reduce=max]", "ar[reduce=sum]"]);
});
