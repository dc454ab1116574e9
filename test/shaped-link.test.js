// On a shaped link (1 Gbit/s token bucket, plus 1 ms delay where the kernel has sch_netem) between two
// hosts (network namespaces), jobs/onebit.json shows the 1-bit compressed allreduce overtaking the exact
// mean allreduce as the size grows: prints the crossover table (docs/PERFORMANCE.md records a full one).
// Needs root; skipped with the reason otherwise, except in CI (CI set), where that is a failure.
import assert from "node:assert/strict";
import { test } from "node:test";
import { crossoverTable, measureCrossover } from "./helpers/onebit-crossover.js";
import { netnsUnavailable } from "./helpers/netns.js";

const missing = netnsUnavailable();
if (missing && !process.env.CI) console.log(`# shaped-link.test.js skipped: ${missing}`);

test("shaped 1 Gbit/s link, 2 hosts: compressed_allreduce overtakes the exact allreduce within 1Ki..4Mi elements", {
  skip: missing && !process.env.CI ? missing : false,
}, async () => {
  if (missing) assert.fail(`CI must run the shaped-link test: ${missing}`);
  // Trimmed sweep: the exact allreduce of 4Mi floats already moves 16 MB per rank, ~130 ms at 1 Gbit/s.
  // Means of 5 iterations: on a machine loaded by other work one sweep once had the compressed allreduce
  // ahead at 1 Ki (33 against 67 µs; alone it is behind, 62 to 90 against 43 to 53), so a sweep without a
  // crossover is measured once more and the second decides.
  const sweep = async () => {
    const r = await measureCrossover({ to: "4Mi", iterations: 5, warmup: 2 });
    console.log(`# link: ${r.shaping}; backend ${r.backend}`);
    for (const line of crossoverTable(r).split("\n")) console.log(`# ${line}`);
    return r;
  };
  let result = await sweep();
  if (result.crossover === undefined || result.crossover <= result.rows[0].count) result = await sweep();
  assert.equal(result.backend, "tcp");
  const last = result.rows.at(-1);
  // At 4Mi the exact allreduce puts 32x the bytes on the wire; on a 1 Gbit/s link that outweighs the
  // compression's extra passes by a wide margin, even on a busy machine.
  assert.ok(last.onebit_us < last.exact_us, `at ${last.count} elements compressed ${last.onebit_us} us vs exact ${last.exact_us} us`);
  // Small sizes are latency-bound, where the compressed allreduce's extra phases cost more than they save.
  assert.ok(result.crossover !== undefined && result.crossover > result.rows[0].count, "the compressed allreduce is faster at every size");
});
