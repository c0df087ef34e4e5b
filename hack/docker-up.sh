#!/usr/bin/env bash
# Make sure a Docker engine answers here, for the kind clusters (hack/build-kind-images.sh, tests/e2e on kind):
#   - installs Debian's docker.io when dockerd is missing;
#   - on a host whose capability bounding set lacks capabilities (some VMs), registers hack/docker/bounded-runc as
#     dockerd's default runtime, without which `docker run --privileged` (every kind node) fails;
#   - starts dockerd when nothing answers, detached, logging to $MULTIQUEUE_DOCKERD_LOG.
# Progress goes to stderr. The last line on stdout is the PID of the dockerd it started, or nothing when one was
# already running, so a caller stops only what it started:
#   pid=$(bash hack/docker-up.sh | tail -n1); ...; [ -z "$pid" ] || kill "$pid"
set -euo pipefail

prog=docker-up
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log=${MULTIQUEUE_DOCKERD_LOG:-/var/log/multiqueue-dockerd.log}
runtime_dir=/usr/local/libexec/multiqueue
daemon_json=/etc/docker/daemon.json

say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 1; }
root=""
[ "$(id -u)" -eq 0 ] || root="sudo -n"

if ! command -v dockerd >/dev/null 2>&1; then
    say "installing docker.io (Debian's package)"
    { $root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io ||
        { $root apt-get update -q && $root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io; }
    } >&2 || die "could not install docker.io with apt-get; install Docker and run this again"
fi

if docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; then
    say "dockerd is running ($(docker info --format '{{.ServerVersion}}, default runtime {{.DefaultRuntime}}'))"
    echo
    exit 0
fi

# Capabilities missing from the bounding set: the runtime then has to leave them out of every container's spec.
absent=$(python3 - "$here/docker/bounded-runc" <<'PY'
import sys
from importlib.machinery import SourceFileLoader
print(" ".join(sorted(SourceFileLoader("bounded_runc", sys.argv[1]).load_module().missing())))
PY
)
if [ -n "$absent" ]; then
    say "this host's capability bounding set lacks $absent: dockerd's default runtime becomes bounded-runc"
    $root install -D -m 0755 "$here/docker/bounded-runc" "$runtime_dir/bounded-runc"
    $root mkdir -p "$(dirname "$daemon_json")"
    # Merge into any existing daemon.json rather than replace it.
    $root python3 - "$daemon_json" "$runtime_dir/bounded-runc" <<'PY'
import json, sys
from pathlib import Path
path, runtime = Path(sys.argv[1]), sys.argv[2]
config = json.loads(path.read_text()) if path.exists() and path.read_text().strip() else {}
config.setdefault("runtimes", {})["bounded-runc"] = {"path": runtime}
config["default-runtime"] = "bounded-runc"
path.write_text(json.dumps(config, indent=2) + "\n")
PY
fi

say "starting dockerd (log: $log)"
$root mkdir -p "$(dirname "$log")"
# setsid: dockerd outlives this script and the caller's process group.
$root setsid dockerd >"$log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 1 120); do
    if docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; then
        say "dockerd $(docker info --format '{{.ServerVersion}}') answers (pid $pid)"
        echo "$pid"
        exit 0
    fi
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; die "dockerd exited; its log is $log"; }
    sleep 0.5
done
tail -n 20 "$log" >&2
die "dockerd did not answer within 60 s; its log is $log"
