#!/usr/bin/env bash
# Profiles the NOSEC, NOSEC control and CMDRSP daemons of one `tessera bench security` run:
# `perf stat` (task-clock, context switches) and a flat `perf record` on each for the whole run.
# Then `python3 groups.py OUT/TAG` prints each daemon's CPU by group (SHA-256, ring, security
# checks, SQLite, kernel, ...) and the differences over NOSEC (docs/benchmarks.md, capability
# security, "where the rest of the OSD's CPU goes").
#
#   tools/security-profile/run.sh target/release/tessera /tmp/prof/run1
set -euo pipefail
bin=$1
out=$2
mkdir -p "$(dirname "$out")"
"$bin" bench security --json "$out.json" >"$out.out" 2>&1 &
bench=$!
for _ in $(seq 150); do
  sleep 0.2
  nosec=$(pgrep -P $bench -f -- "osd --data .*/nosec --listen" | head -1 || true)
  control=$(pgrep -P $bench -f -- "osd --data .*/nosec-control --listen" | head -1 || true)
  cmdrsp=$(pgrep -P $bench -f -- "--security cmdrsp" | head -1 || true)
  [ -n "$nosec" ] && [ -n "$control" ] && [ -n "$cmdrsp" ] && break
done
if [ -z "${cmdrsp:-}" ]; then
  echo "run.sh: the daemons did not appear; see $out.out" >&2
  exit 1
fi
watchers=()
for pair in nosec:$nosec control:$control cmdrsp:$cmdrsp; do
  name=${pair%%:*}
  pid=${pair##*:}
  perf stat -e task-clock,context-switches,cpu-migrations,page-faults -p "$pid" -o "$out.stat.$name" &
  watchers+=($!)
  perf record -F 2999 -p "$pid" -o "$out.$name.data" 2>/dev/null &
  watchers+=($!)
done
status=0
wait $bench || status=$?
sleep 1
kill -INT "${watchers[@]}" 2>/dev/null || true
wait "${watchers[@]}" 2>/dev/null || true
echo "bench exit $status; perf data in $out.{nosec,control,cmdrsp}.data"
exit $status
