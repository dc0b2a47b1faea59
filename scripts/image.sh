#!/usr/bin/env bash
# Build tandem's image from the top-level Dockerfile without a container daemon or registry: a base
# made locally from Debian's packages with mmdebstrap, then `buildah bud --isolation chroot` (the
# isolation that works in a container without privileges; docs/operating.md, "The image").
#
#   scripts/image.sh tools          # install buildah and mmdebstrap with apt-get (root); prints the time
#   scripts/image.sh base           # the local base image (created once, its root fs cached); prints its name
#   scripts/image.sh build [NAME]   # the base, then the Dockerfile on it; prints the image name
#   scripts/image.sh buildah ARGS   # buildah on that same storage (run, from, inspect, rm, rmi ...)
#
# Everything is kept in ${TANDEM_CACHE:-~/.cache/tandem}/image/: the base's root file system (keyed
# by the suite and package list) and buildah's own storage (images and the Dockerfile's layers,
# --layers), so a rebuild redoes only what changed (the dependencies layer only when pyproject.toml
# changes) and a machine that keeps that cache keeps them too.  pip inside the build
# reaches the package index with this machine's pip configuration: every pip config file `pip config
# debug` finds, and every file named by a `cert` or `client-cert` setting, are mounted read-only at
# the same paths (the notes in docs/operating.md say why).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

SUITE=${TANDEM_IMAGE_SUITE:-bookworm}
PACKAGES=python3,python3-venv,ca-certificates,passwd
cache=${TANDEM_CACHE:-$HOME/.cache/tandem}/image
key=$(printf '%s %s\n' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-12)
BASE=localhost/tandem-base:$SUITE-$key
log() { echo "[image.sh] $*" >&2; }

# buildah's storage in the cache (containers-storage.conf(5)); the run root holds only locks and state.
mkdir -p "$cache"
printf '[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n' \
  "$cache/storage" "${XDG_RUNTIME_DIR:-/run}/tandem-image" >"$cache/storage.conf.$$"
mv "$cache/storage.conf.$$" "$cache/storage.conf"
export CONTAINERS_STORAGE_CONF=$cache/storage.conf

tools() {
  if command -v buildah >/dev/null && command -v mmdebstrap >/dev/null; then
    return 0
  fi
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "buildah and mmdebstrap are missing and cannot be installed here (needs root and apt-get)"
    return 1
  fi
  local t0=$SECONDS
  log "installing buildah and mmdebstrap with apt-get"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah mmdebstrap >&2
  log "installed buildah and mmdebstrap in $((SECONDS - t0))s"
}

base() {
  if buildah inspect --type image "$BASE" >/dev/null 2>&1; then
    echo "$BASE"
    return 0
  fi
  local tarball=$cache/base-$SUITE-$key.tar t0=$SECONDS
  mkdir -p "$cache"
  if [ ! -s "$tarball" ]; then
    log "making the base root file system with mmdebstrap ($SUITE: $PACKAGES)"
    mmdebstrap --quiet --variant=minbase --format=tar --include="$PACKAGES" "$SUITE" "$tarball.tmp" >&2
    mv "$tarball.tmp" "$tarball"
    log "made $tarball in $((SECONDS - t0))s"
  fi
  local ctr mnt
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  tar -xf "$tarball" -C "$mnt"
  buildah umount "$ctr" >/dev/null
  # minbase has no PATH of its own: the usual Debian one, with the sbin directories for useradd.
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --cmd /bin/bash "$ctr"
  buildah commit --quiet --rm "$ctr" "$BASE" >/dev/null
  log "committed the base image $BASE in $((SECONDS - t0))s"
  echo "$BASE"
}

pip_mounts() {
  # Files pip reads: its config files, and the certificate bundles they or the environment name.
  local files=() line value
  while IFS= read -r line; do
    case "$line" in
      *", exists: True") files+=("$(sed -E 's/^ *//; s/, exists: True$//' <<<"$line")") ;;
    esac
  done < <(python3 -m pip config debug 2>/dev/null || true)
  while IFS= read -r line; do
    case "$line" in
      *cert=*) value=${line#*=}; value=${value//\'/}; files+=("$value") ;;
    esac
  done < <(python3 -m pip config list 2>/dev/null || true)
  local f
  for f in "${files[@]}"; do
    if [ -f "$f" ]; then printf -- '--volume=%s:%s:ro\n' "$f" "$f"; fi
  done | awk '!seen[$0]++'
}

build() {
  local name=${1:-localhost/tandem:dev} version base t0=$SECONDS
  version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
  base=$(base)
  local args=() line
  while IFS= read -r line; do args+=("$line"); done < <(pip_mounts)
  local old new
  old=$(buildah inspect --type image --format '{{.FromImageID}}' "$name" 2>/dev/null || true)
  log "building $name (version $version) on $base with buildah bud --isolation chroot (a few minutes when cold)"
  buildah bud --quiet --isolation chroot --layers --build-arg BASE="$base" --build-arg VERSION="$version" \
    "${args[@]}" -t "$name" -f Dockerfile . >&2
  new=$(buildah inspect --type image --format '{{.FromImageID}}' "$name")
  # The image this name had before: its virtualenv layer (about 240 MB) is of no further use. The
  # build stage's layers stay: they are the cache of the next build.
  if [ -n "$old" ] && [ "$old" != "$new" ]; then
    buildah rmi "$old" >/dev/null 2>&1 || true
  fi
  log "built $name in $((SECONDS - t0))s"
  echo "$name"
}

case "${1:-}" in
  tools) tools ;;
  base) base ;;
  build) shift; build "$@" ;;
  buildah) shift; exec buildah "$@" ;;
  *) echo "usage: scripts/image.sh tools | base | build [NAME] | buildah ARGS..." >&2; exit 2 ;;
esac
