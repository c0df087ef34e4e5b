#!/usr/bin/env bash
# Build everything kind clusters need on a machine that reaches no container registry, from Go modules and Debian
# packages only, into Docker and a cache outside the repository:
#
#   multiqueue.local/kind/node:<k8s version>   the node image: `kind create cluster --image ...`
#   multiqueue.local/kind/base:bookworm        kind's base image, which the node image is made from
#   multiqueue.local/python:3.11-bookworm      Debian's python3: the manager image's base here
#                                              (docker build --build-arg BASE=... -f deploy/Dockerfile .)
#   busybox:1.35                               Debian's busybox-static: the image the scenarios' Jobs run
#   ${MULTIQUEUE_KIND_CACHE:-$HOME/.cache/multiqueue/kind}/<k8s version>/
#       kind                                   the kind command (sigs.k8s.io/kind, hack/kind/kind/go.mod)
#       node-image                             the node image's name, for --image
#
# The last line printed is that directory; progress goes to stderr:
#   assets=$(bash hack/build-kind-images.sh | tail -n1)
#   "$assets/kind" create cluster --image "$(cat "$assets/node-image")" --config clusters/kind-management.yaml
#
# Where each piece comes from:
#   - kubelet, kubeadm, kubectl and the control plane: hack/build-control-plane.sh (hack/control-plane/go.mod);
#   - containerd, runc, crictl, the CNI plugins, CoreDNS and kind: hack/kind/<name>/go.mod, one module each, so
#     each builds with its own release's dependencies;
#   - pause: build/pause/linux/pause.c of the k8s.io/kubernetes module, compiled statically with Debian's gcc;
#   - root filesystems: mmdebstrap from Debian bookworm's packages; busybox: Debian's busybox-static;
#   - kind's entrypoint, systemd units and configs: images/base/files of the kind module.
# Recipes are in hack/kind/images/. Nothing is pulled: the node image is assembled here the way
# `kind build node-image` assembles one (that command fetches kindnetd, local-path-provisioner, etcd, CoreDNS and
# pause from registries and has no way to skip those), with our pod network (hack/kind/images/node/default-cni.yaml).
#
# Each piece is rebuilt only when its inputs change (pins, recipes, this script): a stamp beside each file in the
# cache, a label on each image. A second run with nothing changed does no work.
set -euo pipefail

prog=build-kind-images
hack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kind_dir=$hack_dir/kind
images_dir=$kind_dir/images
cache_root=${MULTIQUEUE_KIND_CACHE:-$HOME/.cache/multiqueue/kind}
suite=bookworm
label=dev.multiqueue.inputs

say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 1; }

mod_version() { # <go.mod> <module path>
    sed -nE "s#^[[:space:]]*(require[[:space:]]+)?${2//./\\.}[[:space:]]+(v[^[:space:]]+).*#\2#p" "$1" | head -n1
}
k8s_version=$(mod_version "$hack_dir/control-plane/go.mod" k8s.io/kubernetes)
[[ -n $k8s_version ]] || die "cannot read the k8s.io/kubernetes version from hack/control-plane/go.mod"

node_image=multiqueue.local/kind/node:$k8s_version
base_image=multiqueue.local/kind/base:$suite
python_image=multiqueue.local/python:3.11-$suite
busybox_image=busybox:1.35
out_dir=$cache_root/$k8s_version

# --- what this machine needs ------------------------------------------------------------------------------------
docker info --format '{{.ServerVersion}}' >/dev/null 2>&1 ||
    die "no Docker engine answers: start one (bash hack/docker-up.sh installs and starts Debian's) and run this again"
command -v go >/dev/null 2>&1 || die "'go' not found on PATH: install Go (https://go.dev/dl/) to build the images"
missing=()
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
[[ -e /usr/include/seccomp.h ]] || missing+=(libseccomp-dev)
command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
if ((${#missing[@]})); then
    say "installing Debian's ${missing[*]}"
    root=""
    [ "$(id -u)" -eq 0 ] || root="sudo -n"
    { $root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" ||
        { $root apt-get update -q && $root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"; }
    } >&2 || die "could not install ${missing[*]} with apt-get; install them and run this again"
fi

export GOWORK=off GOFLAGS=-mod=readonly
mkdir -p "$cache_root/bin" "$cache_root/rootfs" "$cache_root/images" "$out_dir"
work=$(mktemp -d "${TMPDIR:-/tmp}/$prog.XXXXXX")
log=$work/log
container=""
cleanup() {
    [[ -z $container ]] || docker rm -f "$container" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# --- stamps -----------------------------------------------------------------------------------------------------
key_of() { # <files and strings...>: a hash of what they hold (a file's content, else the string itself)
    local item
    for item in "$@"; do
        if [[ -f $item ]]; then cat "$item"; else printf '%s\n' "$item"; fi
    done | sha256sum | cut -c1-16
}
fresh_file() { [[ -f $1 && -f $1.stamp && "$(cat "$1.stamp")" == "$2" ]]; }
stamp_file() { echo "$2" >"$1.stamp"; }
image_key() { docker image inspect --format "{{index .Config.Labels \"$label\"}}" "$1" 2>/dev/null || true; }
fresh_image() { [[ "$(image_key "$1")" == "$2" ]]; }
files_key() { (cd "$1" && find . -type f | sort | xargs sha256sum); } # <dir>: what every file of it holds

step() { # <what>: one line per piece built, with its time
    step_name=$1 step_start=$(date +%s)
    printf '%s: %-44s ' "$prog" "$step_name" >&2
}
done_step() { echo "$(($(date +%s) - step_start))s${1:+  $1}" >&2; }
fail_step() {
    echo "FAILED" >&2
    tail -n 40 "$log" >&2
    die "$step_name failed (the lines above are the end of its output)"
}
run() { "$@" >>"$log" 2>&1 || fail_step; }

# --- Go binaries ------------------------------------------------------------------------------------------------
go_build() { # <module dir> <output> <cgo 0|1> <tags> <ldflags> <package>
    local dir=$1 output=$2 cgo=$3 tags=$4 ldflags=$5 pkg=$6
    (cd "$dir" && CGO_ENABLED=$cgo go build -trimpath -buildvcs=false ${tags:+-tags="$tags"} \
        -ldflags="$ldflags" -o "$output.tmp" "$pkg") >>"$log" 2>&1 || return 1
    mv -f "$output.tmp" "$output"
}

# name | module dir | package | cgo | tags | ldflags (%V: the module's version)
components="
kind|kind|sigs.k8s.io/kind|0||-s -w
containerd|containerd|github.com/containerd/containerd/v2/cmd/containerd|0|no_aufs no_zfs no_btrfs no_devmapper|-s -w -X github.com/containerd/containerd/v2/version.Version=%V -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2
ctr|containerd|github.com/containerd/containerd/v2/cmd/ctr|0|no_aufs no_zfs no_btrfs no_devmapper|-s -w -X github.com/containerd/containerd/v2/version.Version=%V -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2
containerd-shim-runc-v2|containerd|github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2|0|no_aufs no_zfs no_btrfs no_devmapper|-s -w -X github.com/containerd/containerd/v2/version.Version=%V -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2
runc|runc|github.com/opencontainers/runc|1|seccomp urfave_cli_no_docs|-s -w
crictl|cri-tools|sigs.k8s.io/cri-tools/cmd/crictl|0||-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=%V
host-local|cni-plugins|github.com/containernetworking/plugins/plugins/ipam/host-local|0||-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=%V
loopback|cni-plugins|github.com/containernetworking/plugins/plugins/main/loopback|0||-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=%V
ptp|cni-plugins|github.com/containernetworking/plugins/plugins/main/ptp|0||-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=%V
portmap|cni-plugins|github.com/containernetworking/plugins/plugins/meta/portmap|0||-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=%V
coredns|coredns|github.com/coredns/coredns|0||-s -w
"
declare -A bin_key
while IFS='|' read -r name dir pkg cgo tags ldflags; do
    [[ -n $name ]] || continue
    mod_dir=$kind_dir/$dir
    root_module=$(sed -nE 's/^require[[:space:]]+([^[:space:]]+)[[:space:]]+v.*/\1/p' "$mod_dir/go.mod" | head -n1)
    version=$(mod_version "$mod_dir/go.mod" "$root_module")
    ldflags=${ldflags//%V/$version}
    key=$(key_of "$mod_dir/go.mod" "$mod_dir/go.sum" "$pkg $cgo $tags $ldflags")
    bin_key[$name]=$key
    output=$cache_root/bin/$name
    fresh_file "$output" "$key" && continue
    step "$name $version"
    go_build "$mod_dir" "$output" "$cgo" "$tags" "$ldflags" "$pkg" || fail_step
    stamp_file "$output" "$key"
    done_step "$(du -h "$output" | cut -f1)"
done <<<"$components"

# kubelet, kubeadm, kubectl, kube-proxy and the control plane, from the same pins as the upstream control plane.
step "Kubernetes $k8s_version (hack/build-control-plane.sh)"
k8s_bin=$(bash "$hack_dir/build-control-plane.sh" kubelet kubeadm kubectl kube-proxy 2>>"$log" | tail -n1) || fail_step
k8s_key=$(key_of "$k8s_bin/.stamp")
done_step

# pause, from the C source in the Kubernetes module (its Makefile's flags).
k8s_src=$(cd "$hack_dir/control-plane" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
pause_tag=$(sed -nE 's/^TAG \?= (.*)/\1/p' "$k8s_src/build/pause/Makefile")
pause_cflags="-Os -Wall -Werror -static -DVERSION=v$pause_tag-module-$k8s_version"
pause_key=$(key_of "$k8s_src/build/pause/linux/pause.c" "$pause_cflags")
if ! fresh_file "$cache_root/bin/pause" "$pause_key"; then
    step "pause $pause_tag (gcc -static)"
    run gcc $pause_cflags -o "$cache_root/bin/pause" "$k8s_src/build/pause/linux/pause.c"
    stamp_file "$cache_root/bin/pause" "$pause_key"
    done_step
fi

# --- root filesystems from Debian's packages ---------------------------------------------------------------------
# name | variant | packages
rootfs_recipes="
node|minbase|systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,nfs-common,open-iscsi,e2fsprogs,bash,ca-certificates,curl,jq,procps
kube-proxy|essential|iptables,nftables,conntrack,coreutils
python|essential|python3,python3-venv,passwd,ca-certificates
"
# Documentation, manual pages and translations stay out; licences stay in.
trim_opts=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-exclude=/usr/share/info/*')
declare -A rootfs_key
while IFS='|' read -r name variant packages; do
    [[ -n $name ]] || continue
    tar=$cache_root/rootfs/$name.tar
    hooks=()
    if [[ $name == python ]]; then
        # The certificate authorities this machine adds to Debian's (/usr/local/share/ca-certificates), and pip
        # told to use the system's store, so pip in an image build reaches PyPI wherever this machine does.
        hooks=(--customize-hook='cp -L /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/" 2>/dev/null || true'
            --customize-hook='chroot "$1" update-ca-certificates'
            --customize-hook='printf "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n" > "$1/etc/pip.conf"')
    fi
    key=$(key_of "$suite $variant $packages ${trim_opts[*]} ${hooks[*]}")
    # shellcheck disable=SC2086 # the hooks copy these
    [[ $name != python ]] || key=$(key_of "$key" /usr/local/share/ca-certificates/*.crt)
    rootfs_key[$name]=$key
    fresh_file "$tar" "$key" && continue
    step "$name root filesystem (mmdebstrap $suite)"
    run mmdebstrap --format=tar --variant="$variant" --include="$packages" "${trim_opts[@]}" "${hooks[@]}" \
        "$suite" "$tar.tmp"
    mv -f "$tar.tmp" "$tar"
    stamp_file "$tar" "$key"
    done_step "$(du -h "$tar" | cut -f1)"
done <<<"$rootfs_recipes"

import_rootfs() { # <rootfs name> <image>: the tar as an image, with a PATH
    local name=$1 image=$2 key=${rootfs_key[$1]}
    fresh_image "$image" "$key" && return 0
    run docker import --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change "ENV LANG=C.UTF-8" --change "LABEL $label=$key" "$cache_root/rootfs/$name.tar" "$image"
}

build_image() { # <image> <key> <context dir> [docker build arguments...]
    local image=$1 key=$2 context=$3
    shift 3
    run docker build --quiet --label "$label=$key" -t "$image" "$@" "$context"
}

context_with() { # <recipe dir> <files to add...>: a fresh build context holding the recipe and the files
    local recipe=$1 context
    shift
    context=$(mktemp -d "$work/context.XXXXXX")
    cp -r "$recipe"/. "$context"/
    [[ $# -eq 0 ]] || cp "$@" "$context"/
    echo "$context"
}

# --- images ------------------------------------------------------------------------------------------------------
busybox_key=$(key_of "$(files_key "$images_dir/busybox")" \
    "$(apt-cache policy busybox-static | sed -n 's/ *Candidate: //p')")
if ! fresh_image "$busybox_image" "$busybox_key"; then
    step "$busybox_image (Debian's busybox-static)"
    mkdir -p "$work/busybox"
    (cd "$work/busybox" && apt-get download busybox-static) >>"$log" 2>&1 || fail_step
    run dpkg-deb -x "$work"/busybox/busybox-static_*.deb "$work/busybox/root"
    build_image "$busybox_image" "$busybox_key" \
        "$(context_with "$images_dir/busybox" "$work/busybox/root/bin/busybox")"
    done_step
fi

python_key=${rootfs_key[python]}
if ! fresh_image "$python_image" "$python_key"; then
    step "$python_image (Debian's python3)"
    import_rootfs python "$python_image"
    done_step
fi

step "$base_image"
base_rootfs=multiqueue.local/kind/rootfs:$suite
import_rootfs node "$base_rootfs"
kind_src=$(cd "$kind_dir/kind" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
base_key=$(key_of "${rootfs_key[node]}" "$(files_key "$images_dir/base")" "$(files_key "$kind_src/images/base/files")" \
    "${bin_key[containerd]} ${bin_key[ctr]} ${bin_key[containerd-shim-runc-v2]} ${bin_key[runc]} ${bin_key[crictl]}" \
    "${bin_key[host-local]} ${bin_key[loopback]} ${bin_key[ptp]} ${bin_key[portmap]}")
if fresh_image "$base_image" "$base_key"; then
    done_step "up to date"
else
    context=$(context_with "$images_dir/base")
    # Module files are read-only; scripts become 0755, the rest 0644, as kind's Dockerfile sets them.
    (cd "$kind_src/images/base/files" && find . -type f | while read -r file; do
        mode=0644
        case $file in ./usr/local/bin/* | ./kind/bin/*) mode=0755 ;; esac
        install -D -m "$mode" "$file" "$context/files/$file"
    done)
    mkdir -p "$context/bin" "$context/cni"
    cp "$cache_root"/bin/{containerd,ctr,containerd-shim-runc-v2,crictl,runc} "$context/bin/"
    cp "$cache_root"/bin/{host-local,loopback,ptp,portmap} "$context/cni/"
    build_image "$base_image" "$base_key" "$context" --build-arg ROOTFS="$base_rootfs"
    done_step
fi

# The images kubeadm starts, as its own `config images list` names them, saved for the node's containerd.
kind_src_pause=$(sed -nE 's/^[[:space:]]*sandbox_image = "(.*)"/\1/p' "$kind_src/images/base/files/etc/containerd/config.toml")
kubeadm_images=$("$k8s_bin/kubeadm" config images list --kubernetes-version "$k8s_version" 2>>"$log") ||
    die "kubeadm config images list failed: $(tail -n 3 "$log")"
component_keys=""
for image in $kubeadm_images; do
    name=${image%:*} tag=${image##*:}
    name=${name##*/}
    args=() tags=("$image")
    case $name in
    kube-apiserver | kube-controller-manager | kube-scheduler | etcd)
        recipe=static files=("$k8s_bin/$name") args=(--build-arg BINARY="$name")
        if [[ $name == etcd && $tag != "$(mod_version "$hack_dir/etcd/go.mod" go.etcd.io/etcd/server/v3 | tr -d v)-"* ]]; then
            die "kubeadm $k8s_version runs $image, but hack/etcd/go.mod pins another etcd"
        fi
        ;;
    kube-proxy)
        recipe=kube-proxy files=("$k8s_bin/kube-proxy" "$images_dir/kube-proxy/iptables-backend")
        import_rootfs kube-proxy "multiqueue.local/kind/kube-proxy-rootfs:$suite"
        args=(--build-arg ROOTFS="multiqueue.local/kind/kube-proxy-rootfs:$suite")
        ;;
    coredns)
        recipe=coredns files=("$cache_root/bin/coredns")
        [[ $tag == "$(mod_version "$kind_dir/coredns/go.mod" github.com/coredns/coredns)" ]] ||
            die "kubeadm $k8s_version runs $image, but hack/kind/coredns/go.mod pins another CoreDNS"
        ;;
    pause)
        recipe=pause files=("$cache_root/bin/pause")
        # kind's containerd config names its own pause tag as the sandbox image: the node gets both.
        [[ $kind_src_pause == "$image" ]] || tags+=("$kind_src_pause")
        ;;
    *) die "kubeadm $k8s_version asks for $image, which this script does not know how to build" ;;
    esac
    tar=$cache_root/images/$name.tar
    key=$(key_of "${tags[*]} ${args[*]}" "$(files_key "$images_dir/$recipe")" "${files[@]}")
    [[ $recipe != kube-proxy ]] || key=$(key_of "$key" "${rootfs_key[kube-proxy]}")
    component_keys+="$name=$key "
    fresh_file "$tar" "$key" && continue
    step "$image"
    run docker build --quiet -t "$image" "${args[@]}" "$(context_with "$images_dir/$recipe" "${files[@]}")"
    for extra in "${tags[@]:1}"; do run docker tag "$image" "$extra"; done
    run docker save -o "$tar.tmp" "${tags[@]}"
    mv -f "$tar.tmp" "$tar"
    # Only the node's containerd needs them under these names; in Docker they would pass for registry images.
    run docker rmi "${tags[@]}"
    stamp_file "$tar" "$key"
    done_step "$(du -h "$tar" | cut -f1)"
done
if ! fresh_file "$cache_root/images/busybox.tar" "$busybox_key"; then
    run docker save -o "$cache_root/images/busybox.tar" "$busybox_image"
    stamp_file "$cache_root/images/busybox.tar" "$busybox_key"
fi

# --- the node image -----------------------------------------------------------------------------------------------
node_key=$(key_of "$base_key" "$k8s_key" "$component_keys" "$busybox_key" "$(files_key "$images_dir/node")" "$0")
step "$node_image"
if fresh_image "$node_image" "$node_key"; then
    done_step "up to date"
else
    # The steps of `kind build node-image`: a container of the base image, the node binaries in /usr/bin, the
    # version, the manifests kind applies at create, and every image loaded into its containerd, pinned so the
    # kubelet's image garbage collection never removes them; then committed with the base's entrypoint.
    container=$(docker run -d --entrypoint=sleep --security-opt seccomp=unconfined "$base_image" infinity 2>>"$log") ||
        fail_step
    for binary in kubelet kubeadm kubectl; do run docker cp "$k8s_bin/$binary" "$container:/usr/bin/$binary"; done
    run docker exec "$container" mkdir -p /kind/manifests
    run docker cp "$images_dir/node/default-cni.yaml" "$container:/kind/manifests/default-cni.yaml"
    run docker cp "$images_dir/node/default-storage.yaml" "$container:/kind/manifests/default-storage.yaml"
    run docker exec "$container" sh -c "echo $k8s_version > /kind/version"
    run docker exec "$container" bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &
        for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done
        cat /tmp/containerd.log; exit 1'
    for tar in "$cache_root"/images/*.tar; do
        docker exec -i "$container" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
            --all-platforms --no-unpack --digests - <"$tar" >>"$log" 2>&1 || fail_step
    done
    # Every image kubeadm will ask for must be there: nothing can be pulled later.
    needed=$(docker exec "$container" kubeadm config images list --kubernetes-version "$k8s_version" 2>>"$log") ||
        fail_step
    have=$(docker exec "$container" ctr --namespace=k8s.io images list -q 2>>"$log") || fail_step
    for image in $needed "$kind_src_pause" docker.io/library/$busybox_image; do
        grep -qxF "$image" <<<"$have" || { echo "the node image lacks $image; it has: $have" >>"$log"; fail_step; }
    done
    run docker exec "$container" pkill containerd
    run docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
        --change "LABEL $label=$node_key" "$container" "$node_image"
    docker rm -f "$container" >/dev/null 2>&1 || true
    container=""
    done_step "$(docker image inspect --format '{{.Size}}' "$node_image" | awk '{printf "%.0fM", $1 / 1048576}')"
fi

# Images this script made before and has now replaced (the old node image is a gigabyte).
docker image prune --force --filter "label=$label" >/dev/null 2>&1 || true

cp -f "$cache_root/bin/kind" "$out_dir/kind"
echo "$node_image" >"$out_dir/node-image"
say "ready: $node_image, $base_image, $python_image, $busybox_image; kind $(mod_version "$kind_dir/kind/go.mod" sigs.k8s.io/kind) in $out_dir"
echo "$out_dir"
