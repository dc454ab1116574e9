#!/usr/bin/env bash
# Sets of identical campaigns for scripts/exp-verdicts.mjs (docs/PERFORMANCE.md, "Comparing campaigns"):
#   bench/verdicts/collect.sh OUT/SET N [3|5] [LOAD]
# runs N campaigns of exp3.json (or exp5.json) into OUT/SET/c1..cN, with LOAD busy `yes` processes beside them
# (stopped at the end), and prints the load average before and after. Then, for example:
#   node scripts/exp-verdicts.mjs identical $(ls -d OUT/SET/c* | sort -V)     # slow2x; one-op for 5 repetitions
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1 n=$2 reps=${3:-3} load=${4:-0}
mkdir -p "$out"
pids=()
for ((i = 0; i < load; i++)); do yes >/dev/null & pids+=($!); done
trap '((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true' EXIT
((load)) && sleep 20
echo "start: $(cat /proc/loadavg)"
for ((i = 1; i <= n; i++)); do
  node "$here/../../runner" exp run "$here/exp$reps.json" --dir "$out/c$i" >"$out/c$i.log" 2>&1 || echo "c$i: exit $? (see $out/c$i.log)"
done
echo "end: $(cat /proc/loadavg)"
