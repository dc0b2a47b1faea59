#!/usr/bin/env bash
# A real Prometheus (Debian's `prometheus` package, installed by scripts/test.sh) for development and
# tests of `tandem import prometheus`: its own TSDB in DIR, a free loopback port, no scraping.
#
# Usage:
#   scripts/prometheus.sh load DIR FILE   fill DIR's TSDB from an OpenMetrics file (promtool tsdb
#                                         create-blocks-from openmetrics); before `start`
#   scripts/prometheus.sh start DIR       start Prometheus on DIR's TSDB; prints its URL
#                                         http://127.0.0.1:PORT as the last line of stdout once ready
#   scripts/prometheus.sh stop DIR        stop it (TERM, then KILL after a deadline); keeps DIR
#
# State dir layout: data/ (the TSDB), prometheus.yml, prometheus.log, prometheus.pid, url
#
# Environment:
#   TANDEM_PROMETHEUS_LOOKBACK      --query.lookback-delta (default 5m).  Blocks made by promtool have
#                                   no staleness markers, so a series that ends is seen for this long
#                                   after its last sample: keep it just under the step of the queries.
#   TANDEM_PROMETHEUS_START_TIMEOUT seconds to wait for readiness (default 60)
#   TANDEM_PROMETHEUS_WATCH_PID     if set, a watchdog stops Prometheus once this pid is gone
set -euo pipefail

LOOKBACK="${TANDEM_PROMETHEUS_LOOKBACK:-5m}"
START_TIMEOUT="${TANDEM_PROMETHEUS_START_TIMEOUT:-60}"
PYTHON="${PYTHON:-python3}"

log() { printf 'prometheus.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

need() { command -v "$1" >/dev/null || die "$1 not found (apt-get install prometheus; scripts/test.sh does as root)"; }

cmd_load() {
    local dir=$1 file=$2
    need promtool
    mkdir -p "$dir/data"
    local t0=$SECONDS
    promtool tsdb create-blocks-from openmetrics "$file" "$dir/data" >"$dir/promtool.log" 2>&1 ||
        { tail -n 20 "$dir/promtool.log" >&2; die "promtool could not load $file"; }
    log "loaded $file into $dir/data in $((SECONDS - t0))s"
}

cmd_start() {
    local dir=$1
    need prometheus
    mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    if [[ -f "$dir/prometheus.pid" ]] && kill -0 "$(cat "$dir/prometheus.pid")" 2>/dev/null; then
        cat "$dir/url"
        return 0
    fi
    printf 'global: {}\nscrape_configs: []\n' >"$dir/prometheus.yml"
    local port
    port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # Blocks from the past must stay: retention is judged against the newest block, and the
    # history a test loads may be years old.
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
        --storage.tsdb.retention.time=100y --web.listen-address="127.0.0.1:$port" \
        --query.lookback-delta="$LOOKBACK" --log.level=warn >"$dir/prometheus.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$dir/prometheus.pid"
    echo "http://127.0.0.1:$port" >"$dir/url"
    if [[ -n "${TANDEM_PROMETHEUS_WATCH_PID:-}" ]]; then
        (while kill -0 "$TANDEM_PROMETHEUS_WATCH_PID" 2>/dev/null && kill -0 "$pid" 2>/dev/null; do sleep 2; done
         kill "$pid" 2>/dev/null || true) >/dev/null 2>&1 &
    fi
    local deadline=$((SECONDS + START_TIMEOUT))
    until "$PYTHON" -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1] + '/-/ready', timeout=2)" \
        "http://127.0.0.1:$port" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$dir/prometheus.log" >&2; die "prometheus exited"; }
        ((SECONDS < deadline)) || { tail -n 20 "$dir/prometheus.log" >&2; die "not ready after ${START_TIMEOUT}s"; }
        sleep 0.2
    done
    log "ready on 127.0.0.1:$port (pid $pid)"
    echo "http://127.0.0.1:$port"
}

cmd_stop() {
    local dir=$1 pid
    [[ -f "$dir/prometheus.pid" ]] || return 0
    pid=$(cat "$dir/prometheus.pid")
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$dir/prometheus.pid"; return 0; }
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/prometheus.pid"
}

case "${1:-}" in
    load) [[ $# -eq 3 ]] || usage; cmd_load "$2" "$3" ;;
    start) [[ $# -eq 2 ]] || usage; cmd_start "$2" ;;
    stop) [[ $# -eq 2 ]] || usage; cmd_stop "$2" ;;
    *) usage ;;
esac
