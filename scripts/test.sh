#!/usr/bin/env bash
# Run tandem's whole test suite on a fresh machine: a virtualenv with the project, a real Apache
# Kafka broker (fetched with Maven) and a real kube-apiserver + etcd (built from the Go module
# proxy), then pytest.  The broker and API server are started by the test fixtures and stopped at
# the end; their downloads and builds are cached in ${TANDEM_CACHE:-~/.cache/tandem}.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -m "not kafka and not kube" tests/unit   # any pytest arguments
#   TANDEM_FAST=1 scripts/test.sh ...   # no Kafka, kube, oracle, image or compiled-core build: pytest at once
#   TANDEM_NO_COMPILE=1 scripts/test.sh # everything but building the compiled core
set -euo pipefail
cd "$(dirname "$0")/.."

# The preparing steps' own output (pip, Maven, `go: downloading ...`, apt-get and dpkg: hundreds of
# lines) goes to this log, not to the terminal; their progress lines (`[kube.sh] ...`, `kafka.sh:
# ...`, `build_core: ...`, `scripts/test.sh: ...`) still show as they come.  A step that fails says
# so, shows its last lines and names the log, which is then kept; otherwise it is removed before
# pytest starts.  One log per run: two runs at once do not write into each other's.
prep_log="${TANDEM_CACHE:-$HOME/.cache/tandem}/test-prep.$$.log"
mkdir -p "$(dirname "$prep_log")"
: >"$prep_log"
keep_prep_log=
quiet() {  # quiet WHAT CMD...: run CMD, its output to $prep_log, its progress lines to stderr
  local what=$1 code=0 from
  shift
  echo "== $what ($(date -u +%FT%TZ))" >>"$prep_log"
  from=$(($(wc -l <"$prep_log") + 1))
  "$@" 2>&1 | tee -a "$prep_log" |
    { grep --line-buffered -E '^(\[[a-z_.]+\] |[a-z_]+\.sh: |scripts/test\.sh: |build_core: )' >&2 || true; } ||
    code=${PIPESTATUS[0]}
  if [ "$code" -ne 0 ]; then
    keep_prep_log=1
    echo "scripts/test.sh: $what failed (exit $code); its last lines below, all of its output in $prep_log" >&2
    tail -n "+$from" "$prep_log" | tail -n 20 | sed 's/^/  | /' >&2
  fi
  return "$code"
}

venv=${TANDEM_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import scaling, faust, hypothesis" 2>/dev/null || [ pyproject.toml -nt "$venv/.installed" ]; then
  quiet "installing the virtualenv" "$venv/bin/python" -m pip install -q --upgrade pip
  quiet "installing the virtualenv" "$venv/bin/python" -m pip install -q -e '.[dev,rocksdb]'
  touch "$venv/.installed"
fi
[ -n "$keep_prep_log" ] || rm -f "$prep_log"  # (made again by the next step that writes to it)
export PATH="$PWD/$venv/bin:$PATH"

if [ -n "${TANDEM_FAST:-}" ]; then
  exec "$venv/bin/python" -m pytest -m "not kafka and not kube and not image and not oracle and not prometheus" "$@"
fi
started=$SECONDS

# The real parts the integration tests use (idempotent; a no-op once cached).
quiet "fetching Kafka" scripts/kafka.sh fetch
quiet "building kube-apiserver and etcd" scripts/kube.sh fetch
# Upstream's VPA recommender and HPA replica calculator as oracles of tandem's (tests/oracle; prints build times).
quiet "building the upstream oracles" scripts/oracle.sh fetch
# helm renders the chart (tests/integration/test_deploy_manifests.py); Chromium screenshots the
# report as a person would see it (tests/e2e/test_report.py).  Both from the allowed registries.
gobin="$(go env GOPATH)/bin"
if [ -z "${TANDEM_HELM:-}" ] && ! command -v helm >/dev/null && [ ! -x "$gobin/helm" ]; then
  echo "scripts/test.sh: building helm v3.16.4 with go install into $gobin (a few minutes)" >&2
  t0=$SECONDS
  quiet "building helm" env GOFLAGS=-modcacherw go install helm.sh/helm/v3/cmd/helm@v3.16.4
  echo "scripts/test.sh: built helm in $((SECONDS - t0))s" >&2
fi
if [ -z "${TANDEM_NO_APT:-}" ] && ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "scripts/test.sh: installing Debian's chromium with apt-get (as root) for the report screenshot test" >&2
  quiet "installing chromium" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium' || \
    echo "scripts/test.sh: chromium could not be installed; the screenshot test will skip" >&2
fi
# buildah and mmdebstrap build the container image from the Dockerfile on a Debian base made here
# (tests/integration/test_image.py; scripts/image.sh prints its own times).
if [ -z "${TANDEM_NO_APT:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  quiet "installing buildah" scripts/image.sh tools ||
    echo "scripts/test.sh: buildah could not be installed; the image tests will skip" >&2
  # promtool (Debian's prometheus package) checks and tests the chart's alerts (test_monitoring.py);
  # prometheus and promtool serve a generated history to tandem import prometheus (test_import_prometheus.py).
  if ! command -v promtool >/dev/null; then
    t0=$SECONDS
    if quiet "installing promtool" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus'; then
      echo "scripts/test.sh: installed Debian's prometheus (promtool) in $((SECONDS - t0))s" >&2
    else
      echo "scripts/test.sh: prometheus could not be installed; the promtool tests will skip" >&2
    fi
  fi
fi

# The optional compiled core (scripts/build_core.py: mypyc over scaling/, cached by a digest of the
# sources, so a no-op until they change); tests/e2e/test_compiled_core.py runs it against the
# interpreted core, which the rest of the suite uses.  TANDEM_NO_COMPILE=1 skips the build (and so
# those tests, unless TANDEM_CORE=compiled).
if [ -z "${TANDEM_NO_COMPILE:-}" ]; then
  t0=$SECONDS
  quiet "building the compiled core" "$venv/bin/python" scripts/build_core.py -q
  echo "scripts/test.sh: compiled core ready in $((SECONDS - t0))s" >&2
fi

[ -n "$keep_prep_log" ] || rm -f "$prep_log"
echo "scripts/test.sh: prerequisites ready after $((SECONDS - started))s; running pytest" >&2
set +e
"$venv/bin/python" -m pytest "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests; that is a broken selection, not a pass" >&2
  exit 1
fi
exit "$code"
