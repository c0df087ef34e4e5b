#!/usr/bin/env bash
# Build the JobSet controller from the Go module pinned in hack/jobset/go.mod, copy the JobSet CRD the module
# carries beside it, and render the module's own install manifest (its config/default), into a cache outside the
# repository:
#
#   ${MULTIQUEUE_JOBSET_CACHE:-$HOME/.cache/multiqueue/jobset}/<jobset version>/
#       jobset-controller              the controller, static
#       jobset.x-k8s.io_jobsets.yaml   the CRD alone: all a management cluster needs
#       manifests.yaml                 the upstream install manifest, as `kubectl kustomize config/default` renders it
#       manifests-local.yaml           the same, the controller's image replaced by the one built here
#       .stamp .manifests.stamp
#
# When a Docker engine answers, the controller also becomes an image, multiqueue.local/jobset:<jobset version>
# (the binary as /manager, a writable /tmp, a numeric non-root user; no base image), for clusters that reach no
# registry:
#   kind load docker-image multiqueue.local/jobset:<jobset version> --name <cluster>
#   kubectl apply --server-side -f <that directory>/manifests-local.yaml
# Without Docker the image is left out: run this again once Docker runs (the rest is reused).
#
# The last line printed is that directory (tests find it through MULTIQUEUE_JOBSET_ASSETS, else this default).
# Progress goes to stderr. Idempotent: the stamps record the pinned version and a hash of go.mod/go.sum and of each
# recipe, and the image carries a hash of its inputs as a label; what matches is not made again.
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

image=multiqueue.local/jobset:$version
label=dev.multiqueue.inputs
deployment=jobset-controller-manager
manifests_recipe="kubectl kustomize config/default; $deployment container 0: image $image, imagePullPolicy IfNotPresent"
manifests_stamp=$out_dir/.manifests.stamp
manifests_key="jobset $version
inputs $(cat "$mod_dir/go.mod" "$mod_dir/go.sum" <(echo "$manifests_recipe") | sha256sum | cut -d' ' -f1)"
image_recipe='/manager 0755, /tmp 1777, USER 65532:65532, ENTRYPOINT ["/manager"]'

work=$(mktemp -d "${TMPDIR:-/tmp}/$prog.XXXXXX")
trap 'rm -rf "$work"; rm -f "$out_dir"/.*.tmp.$$' EXIT
log=$work/log
export CGO_ENABLED=0 GOWORK=off

need_go() {
    command -v go >/dev/null 2>&1 ||
        die "'go' not found on PATH: install Go (https://go.dev/dl/) to build the JobSet controller"
}
module_dir() { (cd "$mod_dir" && go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/jobset); }

# --- the controller and its CRD ------------------------------------------------------------------------------------
if [[ -f $stamp && "$(head -n2 "$stamp")" == "$stamp_key" && -x $out_dir/jobset-controller && -f $out_dir/$crd ]]; then
    echo "$prog: controller up to date (JobSet $version)" >&2
else
    need_go
    mkdir -p "$out_dir"
    rm -f "$stamp"
    echo "$prog: building JobSet $version into $out_dir ($(go version | cut -d' ' -f3-))" >&2
    start=$(date +%s)
    if ! (cd "$mod_dir" && go build "${goflags[@]}" -ldflags="$ldflags" -o "$out_dir/.jobset-controller.tmp.$$" \
        sigs.k8s.io/jobset) >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        die "building the JobSet controller failed"
    fi
    mv -f "$out_dir/.jobset-controller.tmp.$$" "$out_dir/jobset-controller"
    module_dir=$(module_dir)
    cp "$module_dir/config/components/crd/bases/$crd" "$out_dir/.$crd.tmp.$$"
    chmod 0644 "$out_dir/.$crd.tmp.$$"
    mv -f "$out_dir/.$crd.tmp.$$" "$out_dir/$crd"
    echo "$prog: built in $(($(date +%s) - start))s  $(du -h "$out_dir/jobset-controller" | cut -f1)" >&2
    {
        echo "$stamp_key"
        echo "# built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $(go version | cut -d' ' -f3-) by hack/build-jobset.sh"
    } >"$stamp"
fi

# --- the install manifest, from the module's own kustomize tree ----------------------------------------------------
if [[ -f $manifests_stamp && "$(head -n2 "$manifests_stamp")" == "$manifests_key" && -f $out_dir/manifests.yaml &&
    -f $out_dir/manifests-local.yaml ]]; then
    echo "$prog: manifests up to date" >&2
else
    need_go
    command -v kubectl >/dev/null 2>&1 ||
        die "'kubectl' not found on PATH: install kubectl (its built-in kustomize renders the JobSet manifest)"
    module_dir=$(module_dir) || die "cannot find the sigs.k8s.io/jobset module: run 'go mod download' in $mod_dir"
    [[ -f $module_dir/config/default/kustomization.yaml ]] ||
        die "$module_dir/config/default has no kustomization.yaml: JobSet $version lacks the install tree this reads"
    rm -f "$manifests_stamp"
    mkdir -p "$work/local"
    kubectl kustomize "$module_dir/config/default" >"$work/local/manifests.yaml" 2>"$log" ||
        die "kubectl kustomize $module_dir/config/default failed: $(tail -n 3 "$log")"
    # The same objects with the controller's image replaced by the local one, which kind load puts on the nodes.
    cat >"$work/local/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - manifests.yaml
patches:
  - target: {group: apps, version: v1, kind: Deployment, name: $deployment}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/image
        value: $image
      - op: add
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: IfNotPresent
EOF
    kubectl kustomize "$work/local" >"$work/manifests-local.yaml" 2>"$log" ||
        die "replacing the controller's image in the JobSet manifest failed: $(tail -n 3 "$log")"
    grep -qF "image: $image" "$work/manifests-local.yaml" ||
        die "the rendered JobSet manifest has no Deployment $deployment to give the local image: see $module_dir/config/default"
    for name in manifests.yaml manifests-local.yaml; do
        source_file=$work/$name
        [[ $name != manifests.yaml ]] || source_file=$work/local/$name
        install -m 0644 "$source_file" "$out_dir/.$name.tmp.$$"
        mv -f "$out_dir/.$name.tmp.$$" "$out_dir/$name"
    done
    {
        echo "$manifests_key"
        echo "# rendered $(date -u +%Y-%m-%dT%H:%M:%SZ) from $module_dir/config/default by hack/build-jobset.sh"
    } >"$manifests_stamp"
    echo "$prog: rendered manifests.yaml and manifests-local.yaml from $module_dir/config/default" >&2
fi

# --- the controller's image, with no registry ----------------------------------------------------------------------
# A root filesystem of two entries, imported: /manager (the command the upstream Deployment runs) and an empty /tmp
# anyone may write (the controller's certificate manager works under /tmp/k8s-webhook-server), run by a numeric
# non-root user (the Deployment sets runAsNonRoot, which the kubelet can only check on a number).
if ! docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; then
    echo "$prog: no Docker engine answers, so $image is not built: start one (bash hack/docker-up.sh) and run this again" >&2
else
    image_key=$(cat "$out_dir/jobset-controller" <(echo "$image_recipe") | sha256sum | cut -c1-16)
    if [[ "$(docker image inspect --format "{{index .Config.Labels \"$label\"}}" "$image" 2>/dev/null)" == "$image_key" ]]; then
        echo "$prog: $image up to date" >&2
    else
        mkdir -p "$work/root"
        install -m 0755 "$out_dir/jobset-controller" "$work/root/manager"
        mkdir -m 1777 "$work/root/tmp"
        tar -C "$work/root" --owner=0 --group=0 --numeric-owner -cf "$work/root.tar" manager tmp
        docker import --change 'USER 65532:65532' --change 'ENTRYPOINT ["/manager"]' \
            --change "LABEL $label=$image_key" "$work/root.tar" "$image" >"$log" 2>&1 ||
            die "docker import of $image failed: $(tail -n 3 "$log")"
        # The image this one replaced, if any.
        docker image prune --force --filter "label=$label" >/dev/null 2>&1 || true
        echo "$prog: built $image" >&2
    fi
fi
echo "$out_dir"
