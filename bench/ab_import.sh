#!/bin/bash
# Old against new: `tandem import prometheus` of two days of bench/bench_import.py's fleet, then
# `tandem replay` of what it wrote, each tree alternated (A B A B), whole processes, the interpreted
# core for both (a compiled core is built for one tree's source), Prometheus's CPU read from /proc.
#
#   bench/ab_import.sh OLD_TREE NEW_TREE DIR [HOURS]
#
# DIR is a `bench/bench_import.py --keep DIR` whose Prometheus runs (`--print-url` starts it).
# Each tree runs from its own directory: `python -m cli` takes the code of the directory it is
# run from.  Prints one line per step and run, then whether the two trees wrote the same bytes.
set -euo pipefail
OLD=$1 NEW=$2 D=$3 H=${4:-48}
URL=$(cat "$D/prometheus/url"); PID=$(cat "$D/prometheus/prometheus.pid")
END=$(date -u -d "@$((1767225600 + H * 3600))" +%Y-%m-%dT%H:%M:%SZ)
OUT=$(mktemp -d)
export TANDEM_PROMETHEUS_LOOKBACK=55s TANDEM_CORE=interpreted
PY=${PYTHON:-python}
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
for _ in 1 2; do
  for tree in old new; do
    dir=$OLD; [ "$tree" = new ] && dir=$NEW
    p0=$(cpu)
    (cd "$dir" && /usr/bin/time -f "$tree import: wall %e s, cpu %U+%S s, rss %M KiB" "$PY" -m cli import prometheus \
      "$URL" --start 2026-01-01T00:00:00Z --end "$END" --cluster bench --step 60s --out "$OUT/$tree.jsonl.gz" 2>&1 \
      | grep -v warning | tail -1)
    echo "$tree import: prometheus cpu $(( $(cpu) - p0 ))0 ms"
    (cd "$dir" && /usr/bin/time -f "$tree replay: wall %e s, cpu %U+%S s, rss %M KiB" "$PY" -m cli replay \
      "$OUT/$tree.jsonl.gz" --out "$OUT/$tree-audit.jsonl" 2>&1 | tail -1)
  done
done
cmp <(zcat "$OUT/old.jsonl.gz") <(zcat "$OUT/new.jsonl.gz") && echo "import: the same bytes"
cmp "$OUT/old-audit.jsonl" "$OUT/new-audit.jsonl" && echo "replay: the same audit"
rm -rf "$OUT"
