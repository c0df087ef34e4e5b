#!/usr/bin/env bash
# Build the JobSet controller from the Go module pinned in hack/jobset/go.mod, and copy the JobSet CRD the module
# carries beside it, into a cache outside the repository:
#
#   ${MULTIQUEUE_JOBSET_CACHE:-$HOME/.cache/multiqueue/jobset}/<jobset version>/
#       jobset-controller jobset.x-k8s.io_jobsets.yaml .stamp
#
# The last line printed is that directory (tests find it through MULTIQUEUE_JOBSET_ASSETS, else this default).
# Progress goes to stderr. Idempotent: .stamp records the pinned version and a hash of go.mod/go.sum and of the
# build recipe; when it matches and both files are there, nothing is built.
set -euo pipefail

prog=build-jobset
hack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod_dir=$hack_dir/jobset

die() { echo "$prog: $*" >&2; exit 1; }

version=$(sed -nE 's#^[[:space:]]*(require[[:space:]]+)?sigs\.k8s\.io/jobset[[:space:]]+(v[^[:space:]]+).*#\2#p' \
    "$mod_dir/go.mod" | head -n1)
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "cannot read the sigs.k8s.io/jobset version from $mod_dir/go.mod"

# Static and stripped; the version variables of the module's own Makefile, so the binary says what it is.
ldflags="-s -w -X 'sigs.k8s.io/jobset/pkg/version.GitVersion=$version' -X 'sigs.k8s.io/jobset/pkg/version.GitCommit=module'"
goflags=(-mod=readonly -trimpath -buildvcs=false)
recipe="CGO_ENABLED=0 ${goflags[*]} $ldflags"

cache_root=${MULTIQUEUE_JOBSET_CACHE:-$HOME/.cache/multiqueue/jobset}
out_dir=$cache_root/$version
stamp=$out_dir/.stamp
crd=jobset.x-k8s.io_jobsets.yaml
inputs_hash=$(cat "$mod_dir/go.mod" "$mod_dir/go.sum" <(echo "$recipe") | sha256sum | cut -d' ' -f1)
stamp_key="jobset $version
inputs $inputs_hash"

if [[ -f $stamp && "$(head -n2 "$stamp")" == "$stamp_key" && -x $out_dir/jobset-controller && -f $out_dir/$crd ]]; then
    echo "$prog: up to date (JobSet $version)" >&2
    echo "$out_dir"
    exit 0
fi

command -v go >/dev/null 2>&1 || die "'go' not found on PATH: install Go (https://go.dev/dl/) to build the JobSet controller"
mkdir -p "$out_dir"
rm -f "$stamp"
log=$(mktemp "${TMPDIR:-/tmp}/$prog.XXXXXX.log")
trap 'rm -f "$log" "$out_dir"/.*.tmp.$$' EXIT
export CGO_ENABLED=0 GOWORK=off

echo "$prog: building JobSet $version into $out_dir ($(go version | cut -d' ' -f3-))" >&2
start=$(date +%s)
if ! (cd "$mod_dir" && go build "${goflags[@]}" -ldflags="$ldflags" -o "$out_dir/.jobset-controller.tmp.$$" \
    sigs.k8s.io/jobset) >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "building the JobSet controller failed"
fi
mv -f "$out_dir/.jobset-controller.tmp.$$" "$out_dir/jobset-controller"
module_dir=$(cd "$mod_dir" && go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/jobset)
cp "$module_dir/config/components/crd/bases/$crd" "$out_dir/.$crd.tmp.$$"
chmod 0644 "$out_dir/.$crd.tmp.$$"
mv -f "$out_dir/.$crd.tmp.$$" "$out_dir/$crd"
echo "$prog: built in $(($(date +%s) - start))s  $(du -h "$out_dir/jobset-controller" | cut -f1)" >&2

{
    echo "$stamp_key"
    echo "# built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $(go version | cut -d' ' -f3-) by hack/build-jobset.sh"
} >"$stamp"
echo "$out_dir"
