#!/usr/bin/env bash
# Build the upstream control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler) from the official Go modules pinned in hack/control-plane/go.mod and
# hack/etcd/go.mod, into a cache laid out like KUBEBUILDER_ASSETS:
#
#   ${MULTIQUEUE_CONTROL_PLANE_CACHE:-$HOME/.cache/multiqueue/control-plane}/<k8s version>/
#       etcd kube-apiserver kube-controller-manager kube-scheduler .stamp
#
# Arguments name more commands of the same release to build beside them: kubelet, kubeadm,
# kubectl, kube-proxy (hack/build-kind-images.sh asks for those of a kind node).
#
# The last line printed is that directory, so
#   export KUBEBUILDER_ASSETS="$(hack/build-control-plane.sh | tail -n1)"
# works. Progress goes to stderr.
#
# Idempotent: .stamp records the pinned versions and a hash of the go.mod/go.sum files
# and of the build recipe; when it matches and the binaries are there, nothing is built
# (go is not even invoked). Modules come through the Go module proxy (GOPROXY) into the
# default module cache and the default build cache, so CI can reuse both.
set -euo pipefail

prog=build-control-plane
hack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
k8s_mod_dir=$hack_dir/control-plane
etcd_mod_dir=$hack_dir/etcd

die() { echo "$prog: $*" >&2; exit 1; }

# Pinned versions, read from our go.mod files (no go invocation needed).
mod_version() { # <go.mod> <module path>
    sed -nE "s#^[[:space:]]*(require[[:space:]]+)?${2//./\\.}[[:space:]]+(v[^[:space:]]+).*#\2#p" "$1" | head -n1
}
k8s_version=$(mod_version "$k8s_mod_dir/go.mod" k8s.io/kubernetes)
etcd_version=$(mod_version "$etcd_mod_dir/go.mod" go.etcd.io/etcd/server/v3)
[[ $k8s_version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] ||
    die "cannot read a release version of k8s.io/kubernetes from $k8s_mod_dir/go.mod (got '${k8s_version}')"
k8s_minor=${BASH_REMATCH[1]}
staging_version=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
[[ -n $etcd_version ]] || die "cannot read the go.etcd.io/etcd/server/v3 version from $etcd_mod_dir/go.mod"

# Every staging module must be replaced by the one published for the same release.
stale=$(grep -E '^[[:space:]]*k8s\.io/[^[:space:]]+[[:space:]]+=>' "$k8s_mod_dir/go.mod" |
    awk -v want="$staging_version" '$4 != want {print $1 " => " $3 " " $4}')
[[ -z $stale ]] || die "replace lines in $k8s_mod_dir/go.mod not at $staging_version: $(echo $stale)"

# Build recipe, as upstream's release builds (kubernetes hack/lib/golang.sh and
# hack/lib/version.sh, etcd scripts/build_lib.sh): static, trimmed, stripped, version vars
# set. The module zip carries no commit hash, so gitCommit is left empty.
kube_tags=selinux,notest,grpcnotrace
kube_ldflags() { # <buildDate>
    local v=() pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        v+=("-X '$pkg.gitVersion=$k8s_version'" "-X '$pkg.gitMajor=1'" "-X '$pkg.gitMinor=$k8s_minor'"
            "-X '$pkg.gitCommit='" "-X '$pkg.gitTreeState=clean'" "-X '$pkg.buildDate=$1'")
    done
    echo "all=${v[*]} -s -w"
}
etcd_ldflags="-s -w -X 'go.etcd.io/etcd/api/v3/version.GitSHA=module:go.etcd.io/etcd/server/v3@$etcd_version'"
goflags=(-mod=readonly -trimpath -buildvcs=false)
# Changing any of this (or the pins) rebuilds.
recipe="CGO_ENABLED=0 ${goflags[*]} -tags=$kube_tags $(kube_ldflags BUILD_DATE) $etcd_ldflags"

cache_root=${MULTIQUEUE_CONTROL_PLANE_CACHE:-$HOME/.cache/multiqueue/control-plane}
out_dir=$cache_root/$k8s_version
stamp=$out_dir/.stamp
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler)
for extra in "$@"; do
    case $extra in
    kubelet | kubeadm | kubectl | kube-proxy) binaries+=("$extra") ;;
    *) echo "$prog: cannot build '$extra': the commands besides the control plane are kubelet, kubeadm, kubectl and kube-proxy" >&2
        exit 2 ;;
    esac
done

inputs_hash=$(cat "$k8s_mod_dir/go.mod" "$k8s_mod_dir/go.sum" "$etcd_mod_dir/go.mod" "$etcd_mod_dir/go.sum" \
    <(echo "$recipe") | sha256sum | cut -d' ' -f1)
stamp_key="kubernetes $k8s_version
etcd $etcd_version
inputs $inputs_hash"

have_stamp=false
if [[ -f $stamp && "$(head -n3 "$stamp")" == "$stamp_key" ]]; then
    have_stamp=true
fi
todo=()
for b in "${binaries[@]}"; do
    if ! $have_stamp || [[ ! -x $out_dir/$b ]]; then todo+=("$b"); fi
done
if ((${#todo[@]} == 0)); then
    echo "$prog: up to date (Kubernetes $k8s_version, etcd $etcd_version)" >&2
    echo "$out_dir"
    exit 0
fi

command -v go >/dev/null 2>&1 ||
    die "'go' not found on PATH: install Go (https://go.dev/dl/) to build the control plane"

mkdir -p "$out_dir"
rm -f "$stamp"
log=$(mktemp "${TMPDIR:-/tmp}/$prog.XXXXXX.log")
trap 'rm -f "$log" "$out_dir"/.*.tmp.$$' EXIT

export CGO_ENABLED=0 GOWORK=off

# buildDate is the release's commit time (from the proxy's .info): reproducible, and within
# minutes of what an official build of that tag reports.
build_date=
set_build_date() {
    build_date=$(cd "$k8s_mod_dir" && go list -mod=readonly -m \
        -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes) || return 1
    [[ -n $build_date ]] || build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
}

build() { # <binary>
    local b=$1 dir pkg ldflags tags=()
    case $b in
    etcd)
        # etcd's own build sets GitSHA; a module has none, so it says where it came from.
        dir=$etcd_mod_dir pkg=go.etcd.io/etcd/server/v3 ldflags=$etcd_ldflags
        ;;
    *)
        dir=$k8s_mod_dir pkg=k8s.io/kubernetes/cmd/$b tags=(-tags="$kube_tags")
        [[ -n $build_date ]] || set_build_date >"$log" 2>&1 || return 1
        ldflags=$(kube_ldflags "$build_date")
        ;;
    esac
    # (errexit is off in here: build runs as an `if` condition)
    (cd "$dir" && go build "${goflags[@]}" "${tags[@]}" -ldflags="$ldflags" -o "$out_dir/.$b.tmp.$$" "$pkg") >"$log" 2>&1 ||
        return 1
    mv -f "$out_dir/.$b.tmp.$$" "$out_dir/$b"
}

echo "$prog: building Kubernetes $k8s_version + etcd $etcd_version into $out_dir ($(go version | cut -d' ' -f3-))" >&2
total_start=$(date +%s)
for b in "${todo[@]}"; do
    printf '%s: %-24s ' "$prog" "$b" >&2
    start=$(date +%s)
    if ! build "$b"; then
        echo "FAILED" >&2
        tail -n 40 "$log" >&2
        die "building $b failed"
    fi
    echo "$(($(date +%s) - start))s  $(du -h "$out_dir/$b" | cut -f1)" >&2
done
echo "$prog: built ${#todo[@]} binaries in $(($(date +%s) - total_start))s" >&2

{
    echo "$stamp_key"
    echo "# built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $(go version | cut -d' ' -f3-) by hack/build-control-plane.sh"
} >"$stamp"
echo "$out_dir"
