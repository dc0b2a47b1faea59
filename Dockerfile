# tandem's container image (docs/operating.md, "The image").
#
#   docker build -t tandem .        # where a registry is reachable
#   scripts/image.sh build         # here: buildah on a Debian base made locally
#
# Stage 1 builds the wheel and the compiled core (scripts/build_core.py: mypyc over scaling/, needs a C
# compiler) and installs both into the virtualenv /opt/tandem; the final stage copies only that
# virtualenv onto a fresh BASE, so no compiler, header or build tool reaches it. The compiled core is
# kept in /opt/tandem/cache/core/<digest> and TANDEM_CORE=compiled makes a process refuse to start
# rather than silently run the interpreted core if the installed sources ever stopped matching it.
#
# BASE: any Debian-family image with python3 (>= 3.11, with venv) and useradd; both stages use it, so the
# compiled core and the virtualenv match the final interpreter. The default is the official image.
# VERSION: the OCI version label; scripts/image.sh passes the package's version (pyproject.toml), and
# tests/unit/test_release.py keeps this default equal to it.
ARG BASE=docker.io/library/python:3.11-slim-bookworm

FROM ${BASE} AS build
# A C compiler and Python's headers, only where the base lacks them (the official image has the
# headers, not the compiler; Debian's python3 has neither).
RUN set -eu; \
    need=""; \
    command -v cc >/dev/null || need="gcc libc6-dev"; \
    python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
      || need="$need python3-dev"; \
    if [ -n "$need" ]; then \
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null \
      && rm -rf /var/lib/apt/lists/*; \
    fi
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The dependencies first, from pyproject.toml alone: this layer is reused until they change. The build
# tools get their own virtualenv, which sees the dependencies (mypyc type-checks against orjson's types).
COPY pyproject.toml ./
RUN python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["rocksdb"]))' > /tmp/requirements.txt \
    && python3 -m venv /opt/tandem \
    && /opt/tandem/bin/pip install -q -r /tmp/requirements.txt \
    && python3 -m venv /opt/build \
    && /opt/build/bin/pip install -q "setuptools>=77" wheel "mypy>=1.10" \
    && /opt/tandem/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
       > "$(/opt/build/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/tandem-deps.pth"
COPY README.md ./
COPY scaling scaling
COPY schemas schemas
COPY streams streams
COPY agents agents
COPY edge edge
COPY analysis analysis
COPY ops ops
COPY cli cli
COPY scripts/build_core.py scripts/
# The wheel, installed without its dependencies (all above), then the compiled core of exactly the sources
# the wheel installed; `tandem --version` with TANDEM_CORE=compiled proves the installed copy finds it.
RUN /opt/build/bin/pip wheel -q --no-deps --no-build-isolation --wheel-dir /dist . \
    && /opt/tandem/bin/pip install -q --no-deps /dist/tandem-*.whl \
    && TANDEM_CACHE=/opt/tandem/cache /opt/build/bin/python scripts/build_core.py -q \
    && rm -rf /opt/tandem/cache/core/.tmp-* \
    && TANDEM_CACHE=/opt/tandem/cache TANDEM_CORE=compiled /opt/tandem/bin/tandem --version

FROM ${BASE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="tandem" \
      org.opencontainers.image.description="Scale Kubernetes workloads horizontally and vertically in tandem: central Faust workers and per-cluster collector and applier." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/tandem-dev/tandem" \
      org.opencontainers.image.documentation="https://github.com/tandem-dev/tandem/blob/main/docs/operating.md"
# The user the chart runs as (values.yaml podSecurityContext: 10001); its home holds the worker's tables.
RUN PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH" \
    && groupadd --gid 10001 tandem \
    && useradd --uid 10001 --gid 10001 --home-dir /var/lib/tandem --create-home --shell /usr/sbin/nologin tandem
COPY --from=build /opt/tandem /opt/tandem
# The bundled example (README, "First two commands"): `tandem replay /opt/tandem/examples/stream.jsonl.gz
# --policy /opt/tandem/examples/policies.yaml` runs the decision core with nothing else.
COPY examples/stream.jsonl.gz examples/policies.yaml /opt/tandem/examples/
ENV PATH=/opt/tandem/bin:$PATH \
    TANDEM_CACHE=/opt/tandem/cache \
    TANDEM_CORE=compiled \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /var/lib/tandem
ENTRYPOINT ["tandem"]
CMD ["--help"]
