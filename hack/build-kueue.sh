#!/usr/bin/env bash
# Build Kueue's manager from the Go module pinned in hack/kueue/go.mod and copy the CRDs and webhook configurations
# the module carries beside it, into a cache outside the repository, for the MultiKueue bench
# (tests/bench/multikueue.py):
#
#   ${MULTIQUEUE_KUEUE_CACHE:-$HOME/.cache/multiqueue/kueue}/<kueue version>/
#       kueue              the manager (sigs.k8s.io/kueue/cmd/kueue), static
#       crds/*.yaml        the module's config/components/crd/bases, as they are (no conversion webhooks)
#       webhooks.yaml      the module's config/components/webhook/manifests.yaml, as it is
#       .stamp
#
# The last line printed is that directory (the bench finds it through MULTIQUEUE_KUEUE_ASSETS, else this default).
# Progress goes to stderr. Idempotent: the stamp records the pinned version and a hash of go.mod/go.sum and of the
# recipe; when they match, nothing is built again.
set -euo pipefail

prog=build-kueue
hack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod_dir=$hack_dir/kueue

die() { echo "$prog: $*" >&2; exit 1; }

version=$(sed -nE 's#^[[:space:]]*(require[[:space:]]+)?sigs\.k8s\.io/kueue[[:space:]]+(v[^[:space:]]+).*#\2#p' \
    "$mod_dir/go.mod" | head -n1)
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "cannot read the sigs.k8s.io/kueue version from $mod_dir/go.mod"

# Static and stripped; the version variables of the module's own Makefile, so the binary says what it is.
ldflags="-s -w -X 'sigs.k8s.io/kueue/pkg/version.GitVersion=$version' -X 'sigs.k8s.io/kueue/pkg/version.GitCommit=module'"
goflags=(-mod=readonly -trimpath -buildvcs=false)
recipe="CGO_ENABLED=0 ${goflags[*]} $ldflags; crds from config/components/crd/bases, webhooks.yaml from config/components/webhook/manifests.yaml"

cache_root=${MULTIQUEUE_KUEUE_CACHE:-$HOME/.cache/multiqueue/kueue}
out_dir=$cache_root/$version
stamp=$out_dir/.stamp
inputs_hash=$(cat "$mod_dir/go.mod" "$mod_dir/go.sum" <(echo "$recipe") | sha256sum | cut -d' ' -f1)
stamp_key="kueue $version
inputs $inputs_hash"

work=$(mktemp -d "${TMPDIR:-/tmp}/$prog.XXXXXX")
trap 'rm -rf "$work"; rm -rf "$out_dir"/.*.tmp.$$' EXIT
log=$work/log
export CGO_ENABLED=0 GOWORK=off

if [[ -f $stamp && "$(head -n2 "$stamp")" == "$stamp_key" && -x $out_dir/kueue && -d $out_dir/crds &&
    -f $out_dir/webhooks.yaml ]]; then
    echo "$prog: up to date (Kueue $version)" >&2
    echo "$out_dir"
    exit 0
fi

command -v go >/dev/null 2>&1 || die "'go' not found on PATH: install Go (https://go.dev/dl/) to build Kueue"
mkdir -p "$out_dir"
rm -f "$stamp"
echo "$prog: building Kueue $version into $out_dir ($(go version | cut -d' ' -f3-))" >&2
start=$(date +%s)
if ! (cd "$mod_dir" && go build "${goflags[@]}" -ldflags="$ldflags" -o "$out_dir/.kueue.tmp.$$" \
    sigs.k8s.io/kueue/cmd/kueue) >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "building Kueue's manager failed"
fi
mv -f "$out_dir/.kueue.tmp.$$" "$out_dir/kueue"

module_dir=$(cd "$mod_dir" && go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/kueue) ||
    die "cannot find the sigs.k8s.io/kueue module: run 'go mod download' in $mod_dir"
crd_dir=$module_dir/config/components/crd/bases
webhooks=$module_dir/config/components/webhook/manifests.yaml
[[ -d $crd_dir && -f $webhooks ]] || die "$module_dir lacks config/components/{crd/bases,webhook/manifests.yaml}"
mkdir -p "$out_dir/.crds.tmp.$$"
install -m 0644 "$crd_dir"/*.yaml "$out_dir/.crds.tmp.$$/"
rm -rf "$out_dir/crds"
mv -f "$out_dir/.crds.tmp.$$" "$out_dir/crds"
install -m 0644 "$webhooks" "$out_dir/.webhooks.yaml.tmp.$$"
mv -f "$out_dir/.webhooks.yaml.tmp.$$" "$out_dir/webhooks.yaml"
echo "$prog: built in $(($(date +%s) - start))s  $(du -h "$out_dir/kueue" | cut -f1), $(ls "$out_dir/crds" | wc -l) CRDs" >&2
{
    echo "$stamp_key"
    echo "# built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $(go version | cut -d' ' -f3-) by hack/build-kueue.sh"
} >"$stamp"
echo "$out_dir"
