#!/usr/bin/env bash
# The kind clusters of clusters/ on this machine, with no registry needed:
#   bash hack/kind-up.sh          starts Docker when it is not running (hack/docker-up.sh), builds or reuses the
#                                 images (hack/build-kind-images.sh), creates management, worker-1 and worker-2,
#                                 installs the manager in management and registers both workers, with the admin
#                                 guide's own commands (docs/admin-guide.md)
#   bash hack/kind-up.sh --down   deletes those clusters; the images stay cached
# kind adds its contexts (kind-mq-management, ...) to your kubeconfig, as `kind create cluster` does (the first file
# of $KUBECONFIG, else ~/.kube/config), and ${MULTIQUEUE_KIND_WORKDIR:-$HOME/.kube/multiqueue-kind}/kubeconfig
# gets the same clusters with the contexts management, worker-1 and worker-2. With MULTIQUEUE_KIND_WORKDIR set,
# kind's contexts go to kind.kubeconfig there instead, and your kubeconfig is left alone (the tests do that).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -n "${MULTIQUEUE_KIND_WORKDIR:-}" ]; then
    workdir=$MULTIQUEUE_KIND_WORKDIR kind_config=$workdir/kind.kubeconfig
else
    workdir=$HOME/.kube/multiqueue-kind kind_config=${KUBECONFIG:-$HOME/.kube/config}
    kind_config=${kind_config%%:*}
fi
cd "$repo"
case "${1:-}" in
--down)
    exec python3 -m tests.e2e.kind down --workdir "$workdir" --kind-kubeconfig "$kind_config"
    ;;
"") ;;
*)
    echo "kind-up: unknown argument '$1': run 'bash hack/kind-up.sh' to make the clusters, '--down' to delete them" >&2
    exit 2
    ;;
esac
bash hack/docker-up.sh >/dev/null
MULTIQUEUE_KIND_ASSETS=$(bash hack/build-kind-images.sh | tail -n1)
export MULTIQUEUE_KIND_ASSETS
exec python3 -m tests.e2e.kind up --workdir "$workdir" --kind-kubeconfig "$kind_config"
