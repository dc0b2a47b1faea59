#!/usr/bin/env bash
# Upstream's own code as test oracles, built from the Go module proxy and cached:
#   tests/oracle/vpa  the VPA recommender of k8s.io/autoscaler/vertical-pod-autoscaler v1.8.1
#   tests/oracle/hpa  the HPA ReplicaCalculator of k8s.io/kubernetes v1.36.3 (kube-apiserver's version)
#
#   scripts/oracle.sh fetch        build both (a no-op once cached; minutes on a fresh machine)
#   scripts/oracle.sh path NAME    print NAME's binary path (tests/oracle computes the same)
#
# A binary is cached in ${TANDEM_CACHE:-$HOME/.cache/tandem}/oracle/NAME-<digest>/NAME-oracle, the
# digest being the first 16 hex digits of the sha256 of go.mod, go.sum and main.go concatenated: a
# change to the program or its versions builds a new one.  Messages go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[oracle.sh] %s\n' "$*" >&2; }

binary() {  # binary NAME: the cached binary's path
  local src="tests/oracle/$1" digest
  digest="$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)"
  echo "${TANDEM_CACHE:-$HOME/.cache/tandem}/oracle/$1-$digest/$1-oracle"
}

build() {  # build NAME WHAT
  local name="$1" what="$2" bin dir t0 pid next
  bin="$(binary "$name")"
  dir="$(dirname "$bin")"
  if [ -x "$bin" ]; then
    log "$name-oracle cached: $bin"
    return 0
  fi
  command -v go >/dev/null || { log "ERROR: go is required to build the $name oracle"; exit 1; }
  log "building $name-oracle ($what from the Go module proxy)"
  t0=$SECONDS
  mkdir -p "$dir"
  (
    cd "tests/oracle/$name"
    GOFLAGS="-mod=readonly -modcacherw" GOTOOLCHAIN=local CGO_ENABLED=0 \
      go build -trimpath -o "$dir/$name-oracle.tmp" . &
    pid=$!
    next=30
    while kill -0 "$pid" 2>/dev/null; do
      sleep 1
      if (( SECONDS - t0 >= next )); then
        log "$name-oracle: still building, $((SECONDS - t0))s elapsed"
        next=$((next + 30))
      fi
    done
    wait "$pid"
  )
  mv "$dir/$name-oracle.tmp" "$bin"
  log "built $name-oracle in $((SECONDS - t0))s: $bin"
}

case "${1:-}" in
  path)
    binary "${2:-vpa}"
    ;;
  fetch)
    build vpa "vertical-pod-autoscaler v1.8.1"
    build hpa "k8s.io/kubernetes v1.36.3 pkg/controller/podautoscaler"
    ;;
  *)
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
