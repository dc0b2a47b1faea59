#!/usr/bin/env bash
# Upstream's own code as a test oracle: tests/oracle/vpa, a Go program over the VPA recommender of
# k8s.io/autoscaler/vertical-pod-autoscaler v1.8.1, built from the Go module proxy and cached.
#
#   scripts/oracle.sh fetch   build it (a no-op once cached; a few minutes on a fresh machine)
#   scripts/oracle.sh path    print the binary's path (tests/oracle/vpa_streams.py computes the same)
#
# The binary is cached in ${TANDEM_CACHE:-$HOME/.cache/tandem}/oracle/vpa-<digest>/vpa-oracle, the
# digest being the first 16 hex digits of the sha256 of go.mod, go.sum and main.go concatenated: a
# change to the program or its versions builds a new one.  Messages go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

src=tests/oracle/vpa
digest="$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)"
dir="${TANDEM_CACHE:-$HOME/.cache/tandem}/oracle/vpa-$digest"
bin="$dir/vpa-oracle"

log() { printf '[oracle.sh] %s\n' "$*" >&2; }

case "${1:-}" in
  path)
    echo "$bin"
    ;;
  fetch)
    if [ -x "$bin" ]; then
      log "vpa-oracle cached: $bin"
      exit 0
    fi
    command -v go >/dev/null || { log "ERROR: go is required to build the VPA oracle"; exit 1; }
    log "building vpa-oracle (vertical-pod-autoscaler v1.8.1 from the Go module proxy)"
    t0=$SECONDS
    mkdir -p "$dir"
    (
      cd "$src"
      GOFLAGS="-mod=readonly -modcacherw" GOTOOLCHAIN=local CGO_ENABLED=0 \
        go build -trimpath -o "$dir/vpa-oracle.tmp" . &
      pid=$!
      next=30
      while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if (( SECONDS - t0 >= next )); then
          log "vpa-oracle: still building, $((SECONDS - t0))s elapsed"
          next=$((next + 30))
        fi
      done
      wait "$pid"
    )
    mv "$dir/vpa-oracle.tmp" "$bin"
    log "built vpa-oracle in $((SECONDS - t0))s: $bin"
    ;;
  *)
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
