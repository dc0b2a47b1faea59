#!/usr/bin/env bash
# Run tandem's whole test suite on a fresh machine: a virtualenv with the project, a real Apache
# Kafka broker (fetched with Maven) and a real kube-apiserver + etcd (built from the Go module
# proxy), then pytest.  The broker and API server are started by the test fixtures and stopped at
# the end; their downloads and builds are cached in ${TANDEM_CACHE:-~/.cache/tandem}.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -m "not kafka and not kube" tests/unit   # any pytest arguments
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${TANDEM_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import scaling, faust, hypothesis" 2>/dev/null || [ pyproject.toml -nt "$venv/.installed" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -e '.[dev,rocksdb]'
  touch "$venv/.installed"
fi
export PATH="$PWD/$venv/bin:$PATH"

# The real parts the integration tests use (idempotent; a no-op once cached).
scripts/kafka.sh fetch >&2
scripts/kube.sh fetch >&2

set +e
"$venv/bin/python" -m pytest "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests; that is a broken selection, not a pass" >&2
  exit 1
fi
exit "$code"
