#!/usr/bin/env bash
# docker compose, for real, without a registry: builds a Debian bookworm base with
# debootstrap (once: skipped while the image exists), the service and Redis images on
# it, starts docker/compose.yaml with 3 workers, checks the sandbox's isolation in the
# non-root containers, then judges jobs of the bundled examples through the API while a
# worker holding rollouts is SIGKILLed (`docker kill -s KILL`; as root also a crash that
# Docker's restart policy restarts) and checks that every rollout got exactly one result,
# in order, none lost (docker/compose_check.py). Exits non-zero on any failure; the
# compose project is always taken down (its volume too).
#
# Needs: a Docker engine, Compose (v2 plugin or Debian's docker-compose 1.29), git,
# python3; debootstrap for the base (installed with apt-get as root when missing; .ci/run
# installs all three from Debian: docker.io, docker-compose, debootstrap). The images'
# Python packages come from PyPI (through the host's CA, copied into the base) or from
# the host's PIP_INDEX_URL / PIP_EXTRA_INDEX_URL where they are http(s).
# Settings: JUDGE_BASE_IMAGE (default judge-base:bookworm: built here if missing),
# DEBIAN_MIRROR (default: the one apt uses), COMPOSE_CHECK_ROLLOUTS (per job, 2000),
# COMPOSE_CHECK_TIMEOUT_S (after a kill, 120), COMPOSE_CHECK_CRASH (1 as root),
# COMPOSE_CHECK_ENV_FILE (extra JUDGE_* settings for the containers),
# COMPOSE_CHECK_SUMMARY (write the findings there as JSON).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=${JUDGE_BASE_IMAGE:-judge-base:bookworm}
IMAGE=judge-service:local
PROJECT=judge-compose-check
WORKERS=3
ROLLOUTS=${COMPOSE_CHECK_ROLLOUTS:-2000}
TIMEOUT_S=${COMPOSE_CHECK_TIMEOUT_S:-120}
CRASH=${COMPOSE_CHECK_CRASH:-$([ "$(id -u)" = 0 ] && echo 1 || echo 0)}
started=$SECONDS

say() { echo "[compose-check $(date +%T)] $*"; }

if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null; then
  COMPOSE=(docker-compose)
else
  say "no Docker Compose (docker compose, docker-compose)"; exit 1
fi
COMPOSE+=(-p "$PROJECT" -f docker/compose.yaml)
PYTHON=python3
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python

work=$(mktemp -d)
export JUDGE_BASE_IMAGE=$BASE_IMAGE JUDGE_PORT=0 JUDGE_ENV_FILE=$work/check.env
if [ -n "${COMPOSE_CHECK_ENV_FILE:-}" ]; then
  cp "$COMPOSE_CHECK_ENV_FILE" "$JUDGE_ENV_FILE"
else
  echo "# docker/compose-check.sh: docker/judge.env's defaults only" >"$JUDGE_ENV_FILE"
fi

cleanup() {
  local rc=$?
  if [ "$rc" != 0 ] && [ -f "$work/up" ]; then
    say "failed; the containers and their last log lines:"
    "${COMPOSE[@]}" ps -a || true
    "${COMPOSE[@]}" logs --tail=30 || true
  fi
  "${COMPOSE[@]}" down -v --remove-orphans -t 5 >"$work/down.log" 2>&1 \
    || { say "compose down failed:"; cat "$work/down.log"; }
  rm -rf "$work"
  say "exit $rc after $((SECONDS - started)) s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# 1. The base: Debian bookworm from the mirror apt uses, with this machine's extra CA
# certificates (a TLS-intercepting proxy's) so that pip in the build trusts what the
# host trusts. Built once; remove the image to rebuild it.
if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  say "base $BASE_IMAGE: exists"
else
  t=$SECONDS
  if ! command -v debootstrap >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
  fi
  mirror=${DEBIAN_MIRROR:-$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v '^[[:space:]]*#' \
    | grep -o -E 'https?://[^ ]+/debian/?' | grep -v security | head -n 1 || true)}
  mirror=${mirror:-http://deb.debian.org/debian}
  mirror=${mirror%/}
  say "base $BASE_IMAGE: debootstrap bookworm from $mirror"
  root=$work/rootfs
  debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log"; exit 1; }
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" \
    2>/dev/null || true
  chroot "$root" update-ca-certificates >/dev/null 2>&1
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$mirror" "$mirror" \
    >"$root/etc/apt/sources.list"
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
  tar -C "$root" -c . | docker import --change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
  say "base $BASE_IMAGE: built in $((SECONDS - t)) s"
fi

# 2. The images. The service's build context is what git sees (tracked and untracked,
# not ignored), so a local .venv never travels to the daemon, less the top-level names
# of .dockerignore (tests/, docs/, ARCHITECTURE.md, ...: a change there rebuilds
# nothing), plus the Dockerfile. The daemon does not apply .dockerignore to a context
# sent as a tar. A pip index of the host's (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL: http(s)
# only; a file:// one means nothing in the build) is passed to the build.
t=$SECONDS
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  excludes=()
  while read -r line; do
    excludes+=(":(exclude)${line%/}")
  done < <(grep -E '^[A-Za-z0-9._-]+/?$' .dockerignore 2>/dev/null || true)
  { git ls-files -z --cached --others --exclude-standard -- . "${excludes[@]}"
    printf 'docker/Dockerfile\0'; } \
    | tar --null --ignore-failed-read -T - -c -f "$work/context.tar" 2>/dev/null
else
  tar --exclude=./.venv --exclude=./.git -c -f "$work/context.tar" .
fi
pip_args=()
for name in PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do
  urls=$(printf '%s\n' ${!name:-} | grep -E '^https?://' | paste -s -d ' ' || true)
  if [ -n "$urls" ]; then pip_args+=(--build-arg "$name=$urls"); fi
done
if [ -n "${PIP_TRUSTED_HOST:-}" ]; then
  pip_args+=(--build-arg "PIP_TRUSTED_HOST=$PIP_TRUSTED_HOST")
fi
previous=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
docker build -t "$IMAGE" --build-arg BASE_IMAGE="$BASE_IMAGE" "${pip_args[@]}" \
  -f docker/Dockerfile - <"$work/context.tar" >"$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log"; exit 1; }
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true  # the last build's, now untagged
fi
"${COMPOSE[@]}" build redis >"$work/build-redis.log" 2>&1 \
  || { tail -n 40 "$work/build-redis.log"; exit 1; }
say "images $IMAGE, judge-redis:local: built in $((SECONDS - t)) s"

# 3. Up, with 3 workers; the API on a free port of the host.
t=$SECONDS
touch "$work/up"
"${COMPOSE[@]}" up -d --no-build --scale worker="$WORKERS" >"$work/up.log" 2>&1 \
  || { cat "$work/up.log"; exit 1; }
port=$("${COMPOSE[@]}" port api 8000 | tail -n 1)
port=${port##*:}
say "up in $((SECONDS - t)) s: the API on 127.0.0.1:$port, $WORKERS workers"

# 4. Judge through the kills, check every result; check the sandbox.
args=(--url "http://127.0.0.1:$port" --project "$PROJECT" --image "$IMAGE"
  --workers "$WORKERS" --rollouts "$ROLLOUTS" --timeout "$TIMEOUT_S")
[ "$CRASH" = 1 ] && args+=(--crash)
[ -n "${COMPOSE_CHECK_SUMMARY:-}" ] && args+=(--summary "$COMPOSE_CHECK_SUMMARY")
"$PYTHON" docker/compose_check.py "${args[@]}"
