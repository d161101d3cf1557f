#!/usr/bin/env bash
# Build deploy/Dockerfile with a daemonless builder (podman from Debian's packages) and
# run one gate through the container against a Temporal dev server on loopback.
#
#   deploy/build-and-run.sh            # from the repository root, as root, Vicar's venv active
#
# Exit 0: built, the worker came up ready and answered a gate. Exit 77: skipped, the
# reason on the last line (no podman/runc/debootstrap, not root, podman unusable here, no
# base image and no Debian mirror). Anything else: the image did not build or the gate
# did not run. Nothing is left behind but the cached base root filesystem.
#
# Settings (environment): VICAR_CI_CACHE (default /var/cache/vicar-ci) holds the base
# root filesystem's tarball between runs; VICAR_BASE_TARBALL uses a given one instead;
# DEBIAN_MIRROR (default http://deb.debian.org/debian); VICAR_BUILD_TIMEOUT (s, 1500);
# VICAR_DOCKERFILE (default deploy/Dockerfile).
set -euo pipefail
cd "$(dirname "$0")/.."

T0=$SECONDS
step() { printf '[build-and-run %4ds] %s\n' "$((SECONDS - T0))" "$*"; }
skip() { step "SKIP: $*"; exit 77; }
die() { step "FAIL: $*"; exit 1; }
# Until deadline $1 (in $SECONDS), run the rest of the line every second until it succeeds.
retry_until() {
    local end=$1; shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 1
    done
}

PY=${VICAR_PYTHON:-python3}
CACHE=${VICAR_CI_CACHE:-/var/cache/vicar-ci}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BUILD_TIMEOUT=${VICAR_BUILD_TIMEOUT:-1500}
# The base the Dockerfile's PYTHON_IMAGE stands for: Debian 12's Python 3.11, as in
# python:3.11-slim-bookworm, where no registry is reachable.
INCLUDE=python3,python3-venv,python-is-python3,ca-certificates
BASE_TAR=${VICAR_BASE_TARBALL:-$CACHE/bookworm-minbase-$(echo "$INCLUDE" | md5sum | cut -c1-8).tar.gz}

# --- What this machine must offer; missing pieces are a skip, not a failure. ---------
[ "$(id -u)" = 0 ] || skip "not root: rootless podman needs subuid ranges this script does not set up"
for tool in podman runc; do
    command -v "$tool" >/dev/null || skip "$tool is not installed (apt-get install podman buildah runc debootstrap)"
done
"$PY" -c 'import vicar' 2>/dev/null || skip "$PY cannot import vicar: activate Vicar's venv (pip install -e .)"

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/vicar-image.XXXXXX")
SERVER_PID=""
CONTAINER=vicar-ci-$$
cleanup() {
    rc=$?
    set +e
    trap '' INT TERM  # a second signal (timeout signals the whole group) must not cut this short
    if [ -n "${CONTAINERS_CONF:-}" ]; then
        timeout 60 podman rm -f -t 5 "$CONTAINER" >/dev/null 2>&1
        timeout 60 podman volume rm -f "$CONTAINER-data" >/dev/null 2>&1
        # Images, layers and podman's state are this run's own (the configs below): they
        # go with $WORK, after anything still mounted under it.
        grep -o " $WORK/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
    fi
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; fi
    rm -rf "$WORK"
    step "done in $((SECONDS - T0)) s (exit $rc)"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A private configuration, so the build depends on no file under /etc/containers and
# leaves no image in the machine's storage. vfs, runc, cgroupfs, host networking and
# limits of 20000: what works in these VMs (overlay, crun and higher limits do not).
cat >"$WORK/containers.conf" <<EOF
[containers]
netns = "host"
default_ulimits = ["nofile=20000:20000", "nproc=20000:20000"]
log_driver = "k8s-file"
[engine]
tmp_dir = "$WORK/libpod"
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
cat >"$WORK/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$WORK/storage"
runroot = "$WORK/run"
EOF
export CONTAINERS_CONF="$WORK/containers.conf" CONTAINERS_STORAGE_CONF="$WORK/storage.conf"
timeout 60 podman info >"$WORK/podman-info" 2>&1 || skip "podman does not run here: $(tail -1 "$WORK/podman-info")"

# --- The base image: a debootstrapped Debian 12, cached as a tarball. ------------------
if [ ! -s "$BASE_TAR" ]; then
    command -v debootstrap >/dev/null || skip "no cached base ($BASE_TAR) and debootstrap is not installed"
    step "debootstrap bookworm ($INCLUDE) from $MIRROR"
    timeout 900 debootstrap --variant=minbase --include="$INCLUDE" bookworm "$WORK/rootfs" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1 \
        || skip "debootstrap failed (mirror unreachable?): $(tail -1 "$WORK/debootstrap.log")"
    rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
    mkdir -p "$(dirname "$BASE_TAR")" 2>/dev/null || true
    tar_to=$BASE_TAR
    [ -w "$(dirname "$BASE_TAR")" ] || tar_to=$WORK/base.tar.gz
    timeout 300 tar --numeric-owner -C "$WORK/rootfs" -czf "$tar_to.part" .
    mv "$tar_to.part" "$tar_to"   # atomic: a killed run never leaves half a cache
    BASE_TAR=$tar_to
    rm -rf "$WORK/rootfs"
else
    step "base root filesystem from cache: $BASE_TAR"
fi
BASE=localhost/vicar-ci-base:bookworm
timeout 300 podman import -q "$BASE_TAR" "$BASE" >/dev/null || die "podman import $BASE_TAR"

# --- pip's settings for the build: only what reaches an index over the network. -------
# The host's CA bundle (with any extra CAs from /usr/local/share/ca-certificates) and a
# pip.conf of its network settings go in as build secrets: no layer and no history keeps
# them, and nothing about this host is committed. Local paths (find-links, file://
# indexes, constraints) mean nothing inside the build and are left out.
"$PY" - "$WORK/pip.conf" <<'EOF'
import configparser, os, subprocess, sys
keep = {"index-url", "extra-index-url", "trusted-host", "timeout", "default-timeout",
        "retries", "proxy"}
out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                     text=True).stdout
conf = configparser.ConfigParser(interpolation=None)
conf["global"] = {}
for line in out.splitlines():
    key, _, value = line.partition("=")
    opt = key.rsplit(".", 1)[-1]
    value = value.strip().strip("'\"")
    if opt not in keep:
        continue
    if "index-url" in opt:
        value = " ".join(u for u in value.split() if u.startswith(("http://", "https://")))
        if not value:
            continue
    conf["global"][opt] = value
with open(sys.argv[1], "w") as f:
    conf.write(f)
EOF
CA=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
[ -s "$CA" ] || CA=/dev/null

# --- Build. ---------------------------------------------------------------------------
IMAGE=localhost/vicar-worker:ci
step "podman build (--format docker, --network host; timeout ${BUILD_TIMEOUT} s)"
b0=$SECONDS
# --layers=false: with vfs every committed layer is a full copy of the root filesystem;
# committing only each stage's end saves minutes and gigabytes (no cache to reuse here).
if ! timeout "$BUILD_TIMEOUT" podman build --format docker --network host --pull=never --layers=false \
        --build-arg PYTHON_IMAGE="$BASE" \
        --secret id=pip.conf,src="$WORK/pip.conf" --secret id=ca.crt,src="$CA" \
        -f "${VICAR_DOCKERFILE:-deploy/Dockerfile}" -t "$IMAGE" . >"$WORK/build.log" 2>&1; then
    tail -40 "$WORK/build.log"
    die "the image did not build (${VICAR_DOCKERFILE:-deploy/Dockerfile})"
fi
b1=$SECONDS
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
step "built in $((b1 - b0)) s: $IMAGE, $((size / 1000000)) MB"
hc=$(podman image inspect --format '{{.Config.Healthcheck}}' "$IMAGE")
case "$hc" in *readyz*) ;; *) die "the image has no HEALTHCHECK (built as OCI?): $hc" ;; esac

# --- A Temporal dev server on loopback, on free ports. --------------------------------
read -r TPORT UIPORT OPSPORT METRICSPORT < <("$PY" -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
for s in socks: s.close()')
TEMPORAL=$("$PY" -c 'from vicar.runtime.server import temporal_binary; print(temporal_binary())')
step "Temporal dev server on 127.0.0.1:$TPORT"
"$TEMPORAL" server start-dev --ip 127.0.0.1 --port "$TPORT" --ui-port "$UIPORT" --headless \
    --db-filename "$WORK/temporal.db" --log-level error >"$WORK/temporal.log" 2>&1 &
SERVER_PID=$!
export TEMPORAL_ADDRESS=127.0.0.1:$TPORT VICAR_DATA_DIR=$WORK/host-data
server_up() {
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/temporal.log"; die "the dev server exited"; }
    timeout 5 "$TEMPORAL" operator namespace describe --address "$TEMPORAL_ADDRESS" default >/dev/null 2>&1
}
retry_until $((SECONDS + 60)) server_up || die "the dev server did not answer within 60 s"

# The CLI on the host and the worker in the container share one payload key (docs/codec.md):
# each would otherwise make its own under its own data dir and read none of the other's.
"$PY" -c "from vicar.runtime.codec import new_key_line; print(new_key_line('ci'))" >"$WORK/codec-keys"
chown 10001:10001 "$WORK/codec-keys" && chmod 0400 "$WORK/codec-keys"
export VICAR_CODEC_KEY_FILE=$WORK/codec-keys

# --- The worker in the container: read-only root, no capabilities, data in a volume. --
step "worker container (read-only, --cap-drop ALL) -> $TEMPORAL_ADDRESS"
r0=$SECONDS
timeout 300 podman run -d --name "$CONTAINER" --network host --read-only --cap-drop ALL \
    --security-opt no-new-privileges \
    --volume "$CONTAINER-data:/var/lib/vicar" \
    --volume "$WORK/codec-keys:/run/vicar/codec-keys:ro" \
    -e VICAR_CODEC_KEY_FILE=/run/vicar/codec-keys \
    -e TEMPORAL_ADDRESS="$TEMPORAL_ADDRESS" \
    -e VICAR_OPS_ADDRESS=127.0.0.1:$OPSPORT -e VICAR_METRICS_ADDRESS=127.0.0.1:$METRICSPORT \
    "$IMAGE" worker >"$WORK/run.log" 2>&1 || { cat "$WORK/run.log"; die "podman run"; }
# (podman's "unable to get systemd connection to add healthchecks" in run.log: there is
# no systemd to time the image's HEALTHCHECK here; /readyz is polled below instead.)
r1=$SECONDS  # vfs copies the image's root filesystem for the container: most of r1-r0
logs() { timeout 30 podman logs --tail 40 "$CONTAINER" 2>&1 || true; }
readyz() {
    [ "$(timeout 30 podman inspect --format '{{.State.Running}}' "$CONTAINER")" = true ] \
        || { logs; die "the worker container exited"; }
    "$PY" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$OPSPORT/readyz', timeout=2)" 2>/dev/null
}
retry_until $((SECONDS + 180)) readyz || { logs; die "/readyz not 200 within 180 s"; }
step "/readyz 200: $((SECONDS - r1)) s after the container started ($((r1 - r0)) s to create it)"
absent=$(timeout 60 podman exec "$CONTAINER" sh -c 'test -e /opt/vicar/bin/temporal || echo absent') \
    || die "podman exec"
[ "$absent" = absent ] || die "the image carries the temporal CLI, which a worker with TEMPORAL_ADDRESS never runs"

# --- One gate through the container: escalated to the human, answered, completed. ----
GATE=ci-$(date +%s)-$$
timeout 60 vicar gate start --principal ci-image --gate-id "$GATE" --state PLAN_ASSERT \
    --task-type image-check --question "Ship the image?" --artifact "deploy/Dockerfile" \
    --escalation-mode always -o json >"$WORK/start.json" \
    || { cat "$WORK/start.json"; logs; die "vicar gate start"; }
step "gate $GATE started; answering as the human"
g0=$SECONDS
answer() { timeout 30 vicar answer "$GATE" approve "looks right" --responder ci-image >"$WORK/answer.out" 2>&1; }
retry_until $((SECONDS + 120)) answer || { cat "$WORK/answer.out"; logs; die "vicar answer $GATE"; }
result() { timeout 30 vicar gate result "$GATE" >"$WORK/result.json" 2>"$WORK/result.err"; }
retry_until $((SECONDS + 120)) result || { cat "$WORK/result.err"; logs; die "gate $GATE has no result"; }
"$PY" - "$WORK/result.json" <<'EOF2' || { logs; die "gate result is not the human's approval"; }
import json, sys
r = json.load(open(sys.argv[1]))
print({k: r.get(k) for k in ("gate_id", "action", "text", "answered_by", "responder")})
assert (r["action"], r["text"], r["answered_by"], r["responder"]) == ("approve", "looks right", "human", "ci-image"), r
EOF2
step "gate $GATE completed with the human's approval ($((SECONDS - g0)) s after it was started)"
step "OK: build $((b1 - b0)) s, image $((size / 1000000)) MB, container created in $((r1 - r0)) s, total $((SECONDS - T0)) s"
