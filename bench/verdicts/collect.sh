#!/usr/bin/env bash
# Sets of identical campaigns for scripts/exp-verdicts.mjs (docs/PERFORMANCE.md, "Comparing campaigns"):
#   bench/verdicts/collect.sh OUT/SET N [3|5] [LOAD] [fixed]
# runs N campaigns of exp.json with 3 (or 5) repetitions into OUT/SET/c1..cN, with LOAD busy `yes` processes beside them
# (stopped at the end), and prints the load average before and after; `fixed`: every launch under
# SPMD_SHM_SINGLE_COPY=fixed (the variant "fixed"), the copy paths untimed. Then, for example:
#   node scripts/exp-verdicts.mjs identical $(ls -d OUT/SET/c* | sort -V)     # slow2x; one-op for 5 repetitions
. "$(dirname "$0")/../../scripts/usage.sh" "$@"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1 n=$2 reps=${3:-3} load=${4:-0} paths=${5:-timed}
mkdir -p "$out"
# The experiment with the repetitions asked for, beside the set, naming this folder's job by its full path.
variant='s/"world_size": \[2, 3\] }/"world_size": [2, 3], "variant": { "fixed": { "env": { "SPMD_SHM_SINGLE_COPY": "fixed" } } } }/'
[[ $paths == fixed ]] || variant=''
sed "s/\"repetitions\": 3/\"repetitions\": $reps/; s#\"job.json\"#\"$here/job.json\"#; $variant" "$here/exp.json" >"$out/exp.json"
pids=()
for ((i = 0; i < load; i++)); do yes >/dev/null & pids+=($!); done
trap '((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true' EXIT
((load)) && sleep 20
echo "start: $(cat /proc/loadavg)"
for ((i = 1; i <= n; i++)); do
  node "$here/../../runner" exp run "$out/exp.json" --dir "$out/c$i" >"$out/c$i.log" 2>&1 || echo "c$i: exit $? (see $out/c$i.log)"
done
echo "end: $(cat /proc/loadavg)"
