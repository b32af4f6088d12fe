#!/bin/bash
# Before/after on one machine in one run (docs/benchmarks.md, "Issue 14's figures as before"): an older toolgate
# binary, this build held to two runtime workers (`serve --workers 2`) and this build with its default, alternating
# twice, one toolgate-bench driving all.
# Usage: crates/bench/compare.sh DIR OUT OLD   (DIR holds release `toolgate` and `toolgate-bench`; OLD an older
# `toolgate` binary; results go to OUT)
set -u
dir=$(cd "${1:?DIR with toolgate and toolgate-bench}" && pwd) || exit 2
out=${2:?OUT directory}
old=${3:?an older toolgate binary}
mkdir -p "$out"
held=$(mktemp -d)
trap 'rm -rf "$held"' EXIT
printf '#!/bin/sh\ncmd="$1"; shift\nexec "%s/toolgate" "$cmd" --workers 2 "$@"\n' "$dir" > "$held/toolgate-w2"
chmod +x "$held/toolgate-w2"
echo "== machine: $(nproc) cores; load $(cat /proc/loadavg)"
for run in 1 2; do
  for bin in "$old" "$held/toolgate-w2" "$dir/toolgate"; do
    name=$(basename "$bin")
    echo "== $name run $run"
    timeout 120 "$dir/toolgate-bench" run --toolgate "$bin" --calls 2000 --warmup 200 --rounds 2 --only stdio,http \
      --many-calls 20000 > "$out/$name-$run.txt" 2>&1
    grep -E "toolgate/" "$out/$name-$run.txt"
  done
done
