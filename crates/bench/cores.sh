#!/bin/bash
# Throughput against cores (docs/benchmarks.md, "The ceiling: two runtime workers"): for 1, 2, 4, 8 and 16 CPUs
# (`taskset`), 64 HTTP sessions x 4 calls in flight through one `toolgate serve` with its default workers (one per
# CPU, at least two) and the same binary held to two (`serve --workers 2`), alternating.
# Usage: crates/bench/cores.sh DIR OUT   (DIR holds release `toolgate` and `toolgate-bench`; results go to OUT)
set -u
dir=$(cd "${1:?DIR with toolgate and toolgate-bench}" && pwd) || exit 2
out=${2:?OUT directory}
mkdir -p "$out"
held=$(mktemp -d)
trap 'rm -rf "$held"' EXIT
# The same binary held to two workers: `serve --workers 2 ARGS...`.
printf '#!/bin/sh\ncmd="$1"; shift\nexec "%s/toolgate" "$cmd" --workers 2 "$@"\n' "$dir" > "$held/toolgate-w2"
chmod +x "$held/toolgate-w2"
echo "== machine: $(nproc) cores; load $(cat /proc/loadavg)"
for cores in 1 2 4 8 16; do
  [ "$cores" -le "$(nproc)" ] || break
  for bin in "$dir/toolgate" "$held/toolgate-w2"; do
    name=$(basename "$bin")
    echo "== cores $cores $name"
    timeout 60 taskset -c 0-$((cores - 1)) "$dir/toolgate-bench" run --toolgate "$bin" --calls 1000 --warmup 100 \
      --rounds 2 --only http --in-flight 8 --many-calls 30000 --sessions 64 > "$out/cores$cores-$name.txt" 2>&1
    grep -E "^http-sessions" "$out/cores$cores-$name.txt"
  done
done
