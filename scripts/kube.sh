#!/usr/bin/env bash
# Real kube-apiserver + etcd for tests: no mocks, no containers.
#
#   scripts/kube.sh fetch        build kube-apiserver and etcd from the Go module proxy (cached)
#   scripts/kube.sh start [DIR]  start etcd + kube-apiserver on free 127.0.0.1 ports;
#                                the LAST line of stdout is the kubeconfig path
#   scripts/kube.sh stop DIR     stop both (TERM, then KILL after a deadline)
#   scripts/kube.sh env          print the versions and cache paths in use
#
# Binaries are cached outside the repo in ${TANDEM_CACHE:-$HOME/.cache/tandem}/kube-<version>/bin/.
# Knobs (environment):
#   TANDEM_KUBE_VERSION        Kubernetes release to build (default 1.36.3)
#   TANDEM_ETCD_VERSION        etcd release to build (default 3.5.35)
#   TANDEM_KUBE_START_TIMEOUT  seconds to wait for /readyz (default 90)
#   TANDEM_KUBE_STOP_TIMEOUT   seconds between TERM and KILL (default 20)
#   TANDEM_KUBE_ETCD_APT_FALLBACK=0  never fall back to Debian's etcd-server if etcd 3.5 cannot be built
#   TANDEM_KUBE_APISERVER_ARGS extra kube-apiserver flags, space-separated (a test that needs
#                              --watch-cache=false to see etcd's own 410 Gone)
# Messages go to stderr; only results go to stdout.
set -euo pipefail

KUBE_VERSION="${TANDEM_KUBE_VERSION:-1.36.3}"
KUBE_VERSION="${KUBE_VERSION#v}"
ETCD_VERSION="${TANDEM_ETCD_VERSION:-3.5.35}"
ETCD_VERSION="${ETCD_VERSION#v}"
CACHE_ROOT="${TANDEM_CACHE:-$HOME/.cache/tandem}"
KUBE_HOME="$CACHE_ROOT/kube-$KUBE_VERSION"
BIN_DIR="$KUBE_HOME/bin"
BUILD_DIR="$KUBE_HOME/build"
START_TIMEOUT="${TANDEM_KUBE_START_TIMEOUT:-90}"
STOP_TIMEOUT="${TANDEM_KUBE_STOP_TIMEOUT:-20}"

log() { printf '[kube.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# progress_wait PID LABEL: wait for a background build, saying every 30 s how long it has run, so a
# ten-minute compile on a fresh machine is visibly alive.  Returns the build's exit status.
progress_wait() {
  local pid="$1" label="$2" t0=$SECONDS next=30
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (( SECONDS - t0 >= next )); then
      log "$label: still building, $((SECONDS - t0))s elapsed"
      next=$((next + 30))
    fi
  done
  wait "$pid"
}

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---------------------------------------------------------------------------------------------
# fetch
# ---------------------------------------------------------------------------------------------

go_env() {
  export GOFLAGS="-mod=mod"
  export GOTOOLCHAIN=local
  export CGO_ENABLED=0
  # Module downloads are read-only by default; keep them deletable with `rm -rf`.
  export GOFLAGS="$GOFLAGS -modcacherw"
}

# stamp_ok NAME WANT: the binary exists and was built from WANT by this script.
stamp_ok() {
  [[ -x "$BIN_DIR/$1" && -f "$BIN_DIR/.$1.version" && "$(cat "$BIN_DIR/.$1.version")" == "$2" ]]
}

# write_gomod DIR MODULE-REQUIRE REPLACE-LINES...
write_gomod() {
  local dir="$1" require="$2"
  shift 2
  local gover
  gover="$(go env GOVERSION)"   # e.g. go1.26.8
  gover="${gover#go}"
  mkdir -p "$dir"
  {
    echo "module tandem.local/kubebuild"
    echo
    echo "go $gover"
    echo
    echo "require $require"
    echo
    echo "replace ("
    local r
    for r in "$@"; do echo "	$r"; done
    echo ")"
  } >"$dir/go.mod"
  rm -f "$dir/go.sum"
}

build_kube_apiserver() {
  local want="kubernetes v$KUBE_VERSION"
  if stamp_ok kube-apiserver "$want"; then
    log "kube-apiserver v$KUBE_VERSION already built: $BIN_DIR/kube-apiserver"
    return 0
  fi
  command -v go >/dev/null || die "go is not installed (needed to build kube-apiserver)"
  go_env
  local dir="$BUILD_DIR/kube-apiserver" minor="${KUBE_VERSION#*.}"
  minor="${minor%%.*}"
  local staging_version="v0.${KUBE_VERSION#*.}"
  log "resolving k8s.io/kubernetes@v$KUBE_VERSION (staging modules at $staging_version)"
  # The staging modules are listed as `k8s.io/X => ./staging/src/k8s.io/X` in kubernetes' go.mod;
  # a consumer must replace each with its published v0.<minor>.<patch> release.
  local gomod
  gomod="$(cd / && GOFLAGS="" go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -f "$gomod" ]] || die "could not download go.mod of k8s.io/kubernetes@v$KUBE_VERSION"
  local replaces=() m
  while read -r m; do
    replaces+=("$m => $m $staging_version")
  done < <(sed -n 's|^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\)[[:space:]]*=>[[:space:]]*\./staging/.*|\1|p' "$gomod")
  ((${#replaces[@]} > 0)) || die "no staging replace directives found in $gomod"
  write_gomod "$dir" "k8s.io/kubernetes v$KUBE_VERSION" "${replaces[@]}"
  local ldflags="-s -w"
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  local t0=$SECONDS
  log "building kube-apiserver v$KUBE_VERSION (this takes a while: several minutes on 2 cores)"
  (
    cd "$dir"
    go get "k8s.io/kubernetes/cmd/kube-apiserver@v$KUBE_VERSION" >&2
    go build -trimpath -ldflags="$ldflags" -o "$BIN_DIR/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  ) &
  progress_wait $! "kube-apiserver v$KUBE_VERSION" || die "building kube-apiserver v$KUBE_VERSION failed"
  mv -f "$BIN_DIR/kube-apiserver.tmp" "$BIN_DIR/kube-apiserver"
  echo "$want" >"$BIN_DIR/.kube-apiserver.version"
  log "built kube-apiserver v$KUBE_VERSION in $((SECONDS - t0))s ($(du -h "$BIN_DIR/kube-apiserver" | cut -f1))"
}

build_etcd() {
  local want="etcd v$ETCD_VERSION"
  if stamp_ok etcd "$want"; then
    log "etcd v$ETCD_VERSION already built: $BIN_DIR/etcd"
    return 0
  fi
  if stamp_ok etcd "etcd debian-fallback"; then
    log "etcd: using the Debian etcd-server fallback copied earlier ($BIN_DIR/etcd)"
    return 0
  fi
  command -v go >/dev/null || die "go is not installed (needed to build etcd)"
  go_env
  local dir="$BUILD_DIR/etcd" v="v$ETCD_VERSION"
  local v2="v2.305.${ETCD_VERSION#3.5.}"
  local replaces=(
    "go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $v"
    "go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $v"
    "go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $v"
    "go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $v"
  )
  if [[ "$ETCD_VERSION" == 3.5.* ]]; then
    replaces+=(
      "go.etcd.io/etcd/client/v2 => go.etcd.io/etcd/client/v2 $v2"
      "go.etcd.io/etcd/raft/v3 => go.etcd.io/etcd/raft/v3 $v"
    )
  fi
  write_gomod "$dir" "go.etcd.io/etcd/server/v3 $v" "${replaces[@]}"
  local t0=$SECONDS
  log "building etcd $v"
  (
    cd "$dir"
    go get "go.etcd.io/etcd/server/v3@$v" >&2
    go build -trimpath -ldflags="-s -w" -o "$BIN_DIR/etcd.tmp" go.etcd.io/etcd/server/v3
  ) &
  if progress_wait $! "etcd $v"; then
    mv -f "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd"
    echo "$want" >"$BIN_DIR/.etcd.version"
    log "built etcd $v in $((SECONDS - t0))s ($(du -h "$BIN_DIR/etcd" | cut -f1))"
    return 0
  fi
  rm -f "$BIN_DIR/etcd.tmp"
  if [[ "${TANDEM_KUBE_ETCD_APT_FALLBACK:-1}" == 0 ]]; then
    die "building etcd $v failed"
  fi
  log "building etcd $v failed; falling back to Debian's etcd-server"
  if [[ ! -x /usr/bin/etcd ]]; then
    command -v apt-get >/dev/null || die "no apt-get for the etcd-server fallback"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server >&2 ||
      { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server >&2; } ||
      die "could not install etcd-server"
  fi
  cp -f /usr/bin/etcd "$BIN_DIR/etcd"
  echo "etcd debian-fallback" >"$BIN_DIR/.etcd.version"
  log "etcd: using Debian's $(/usr/bin/etcd --version 2>/dev/null | head -1)"
}

cmd_fetch() {
  mkdir -p "$BIN_DIR"
  # Serialise concurrent fetches (parallel test sessions) on one cache.
  if command -v flock >/dev/null; then
    exec 9>"$KUBE_HOME/.fetch.lock"
    flock 9
  fi
  build_etcd
  build_kube_apiserver
}

# ---------------------------------------------------------------------------------------------
# start / stop
# ---------------------------------------------------------------------------------------------

# free_ports N: print N distinct free TCP ports on 127.0.0.1, one per line.
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
for s in socks:
    s.close()
EOF
}

# alive PIDFILE NAME: the pid in PIDFILE is running and is the NAME binary.
alive() {
  local pidfile="$1" name="$2" pid
  [[ -f "$pidfile" ]] || return 1
  pid="$(cat "$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  local cmdline
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *"$name"* ]] || return 1
  # a zombie counts as gone
  [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]]
}

# running PIDFILE: the pid is a live process.  Used while starting: right after `nohup ... &` the
# child may not have exec'd the binary yet, so its command line can still be this script's.
running() {
  local pid
  pid="$(cat "$1" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]]
}

stop_one() {
  local dir="$1" name="$2" pidfile="$1/$2.pid" pid
  if ! alive "$pidfile" "$name"; then
    rm -f "$pidfile"
    return 0
  fi
  pid="$(cat "$pidfile")"
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while alive "$pidfile" "$name" && ((SECONDS < deadline)); do sleep 0.2; done
  if alive "$pidfile" "$name"; then
    log "$name (pid $pid) ignored TERM for ${STOP_TIMEOUT}s; sending KILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while alive "$pidfile" "$name" && ((SECONDS < deadline)); do sleep 0.2; done
  fi
  rm -f "$pidfile"
}

cmd_stop() {
  local dir="${1:-}"
  [[ -n "$dir" ]] || die "usage: $0 stop DIR"
  [[ -d "$dir" ]] || { log "no such directory: $dir (nothing to stop)"; return 0; }
  stop_one "$dir" kube-apiserver
  stop_one "$dir" etcd
}

fail_start() {
  local dir="$1"
  shift
  log "ERROR: $*"
  local f
  for f in "$dir/etcd.log" "$dir/kube-apiserver.log"; do
    if [[ -s "$f" ]]; then
      log "---- last lines of $f ----"
      tail -n 30 "$f" >&2 || true
    fi
  done
  cmd_stop "$dir" || true
  exit 1
}

cmd_start() {
  local dir="${1:-}"
  if [[ -z "$dir" ]]; then
    dir="$(mktemp -d "${TMPDIR:-/tmp}/tandem-kube.XXXXXX")"
  fi
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if alive "$dir/kube-apiserver.pid" kube-apiserver || alive "$dir/etcd.pid" etcd; then
    die "$dir already has a running etcd/kube-apiserver; run '$0 stop $dir' first"
  fi
  command -v openssl >/dev/null || die "openssl is required"
  command -v curl >/dev/null || die "curl is required"
  command -v python3 >/dev/null || die "python3 is required (free port lookup)"

  # fetch writes only to stderr; keep stdout for the kubeconfig path.
  (cmd_fetch) >&2

  local t0=$SECONDS ports etcd_client etcd_peer api_port
  mapfile -t ports < <(free_ports 3)
  etcd_client="${ports[0]}"
  etcd_peer="${ports[1]}"
  api_port="${ports[2]}"

  # ---- etcd ----
  rm -rf "$dir/etcd-data"
  mkdir -p "$dir/etcd-data" "$dir/certs"
  chmod 700 "$dir/etcd-data"
  local etcd_args=(
    --name tandem
    --data-dir "$dir/etcd-data"
    --listen-client-urls "http://127.0.0.1:$etcd_client"
    --advertise-client-urls "http://127.0.0.1:$etcd_client"
    --listen-peer-urls "http://127.0.0.1:$etcd_peer"
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer"
    --initial-cluster "tandem=http://127.0.0.1:$etcd_peer"
    --initial-cluster-state new
    --log-level warn
  )
  # Test data is throwaway: skip fsync when the etcd build knows how (3.5+).
  if "$BIN_DIR/etcd" --help 2>&1 | grep -q -- '--unsafe-no-fsync'; then
    etcd_args+=(--unsafe-no-fsync)
  fi
  log "starting etcd on 127.0.0.1:$etcd_client (peer $etcd_peer), data in $dir/etcd-data"
  nohup "$BIN_DIR/etcd" "${etcd_args[@]}" </dev/null >"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/etcd.pid"
  echo "$etcd_client" >"$dir/etcd.port"

  local deadline=$((SECONDS + START_TIMEOUT))
  until curl -sf "http://127.0.0.1:$etcd_client/health" 2>/dev/null | grep -q '"health":"true"'; do
    running "$dir/etcd.pid" || fail_start "$dir" "etcd exited during start-up"
    ((SECONDS < deadline)) || fail_start "$dir" "etcd not healthy after ${START_TIMEOUT}s"
    sleep 0.2
  done

  # ---- credentials ----
  # A throwaway CA and a serving certificate for 127.0.0.1, so clients verify TLS for real.
  local certs="$dir/certs"
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=tandem-test-ca" \
    -keyout "$certs/ca.key" -out "$certs/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=kube-apiserver" \
    -keyout "$certs/apiserver.key" -out "$certs/apiserver.csr" 2>/dev/null
  cat >"$certs/apiserver.ext" <<'EXT'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EXT
  openssl x509 -req -sha256 -days 3650 -in "$certs/apiserver.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" \
    -CAcreateserial -extfile "$certs/apiserver.ext" -out "$certs/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  local token
  token="$(openssl rand -hex 24)"
  # static token file: token,user,uid,"group1,group2"
  printf '%s,admin,admin,"system:masters"\n' "$token" >"$dir/tokens.csv"
  chmod 600 "$dir/sa.key" "$dir/tokens.csv" "$certs/ca.key" "$certs/apiserver.key"

  # ---- kube-apiserver ----
  local api_args=(
    --etcd-servers "http://127.0.0.1:$etcd_client"
    --bind-address 127.0.0.1
    --advertise-address 127.0.0.1
    --secure-port "$api_port"
    --cert-dir "$certs"
    --tls-cert-file "$certs/apiserver.crt"
    --tls-private-key-file "$certs/apiserver.key"
    --token-auth-file "$dir/tokens.csv"
    --authorization-mode RBAC
    --service-account-key-file "$dir/sa.pub"
    --service-account-signing-key-file "$dir/sa.key"
    --service-account-issuer https://kubernetes.default.svc.cluster.local
    --service-cluster-ip-range 10.0.0.0/24
    --disable-admission-plugins ServiceAccount
    --allow-privileged=true
    --endpoint-reconciler-type none
    --profiling=false
    --v=1
  )
  if [[ -n "${TANDEM_KUBE_APISERVER_ARGS:-}" ]]; then
    local extra
    read -r -a extra <<<"$TANDEM_KUBE_APISERVER_ARGS"
    api_args+=("${extra[@]}")
  fi
  log "starting kube-apiserver on https://127.0.0.1:$api_port"
  nohup "$BIN_DIR/kube-apiserver" "${api_args[@]}" </dev/null >"$dir/kube-apiserver.log" 2>&1 &
  echo $! >"$dir/kube-apiserver.pid"
  echo "$api_port" >"$dir/kube-apiserver.port"

  local body=""
  until [[ "$body" == ok ]]; do
    running "$dir/kube-apiserver.pid" || fail_start "$dir" "kube-apiserver exited during start-up"
    running "$dir/etcd.pid" || fail_start "$dir" "etcd exited during kube-apiserver start-up"
    ((SECONDS < deadline)) || fail_start "$dir" "kube-apiserver /readyz not ok after ${START_TIMEOUT}s (last answer: ${body:0:200})"
    sleep 0.3
    body="$(curl -s --cacert "$certs/ca.crt" --max-time 5 -H "Authorization: Bearer $token" \
      "https://127.0.0.1:$api_port/readyz" 2>/dev/null || true)"
  done

  umask 077
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tandem
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 "$certs/ca.crt")
users:
- name: admin
  user:
    token: $token
contexts:
- name: tandem
  context:
    cluster: tandem
    user: admin
    namespace: default
current-context: tandem
EOF
  log "kube-apiserver ready in $((SECONDS - t0))s; logs in $dir/*.log; stop with: $0 stop $dir"
  echo "$dir/kubeconfig"
}

cmd_env() {
  echo "KUBE_VERSION=$KUBE_VERSION"
  echo "ETCD_VERSION=$ETCD_VERSION"
  echo "BIN_DIR=$BIN_DIR"
}

main() {
  local cmd="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    fetch) cmd_fetch "$@" ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    env) cmd_env ;;
    *) usage ;;
  esac
}

main "$@"
