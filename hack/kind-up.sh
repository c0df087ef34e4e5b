#!/usr/bin/env bash
# The kind clusters of clusters/ on this machine, with no registry needed:
#   bash hack/kind-up.sh          starts Docker when it is not running (hack/docker-up.sh), builds or reuses the
#                                 images (hack/build-kind-images.sh), creates management, worker-1 and worker-2,
#                                 installs the manager in management and registers both workers, with the admin
#                                 guide's own commands (docs/admin-guide.md)
#   bash hack/kind-up.sh --down   deletes those clusters; the images stay cached
# The kubeconfigs go to ${MULTIQUEUE_KIND_WORKDIR:-$HOME/.kube/multiqueue-kind}: kubeconfig, with the contexts
# management, worker-1 and worker-2, and kind.kubeconfig, with kind's contexts (kind-mq-management, ...).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
workdir=${MULTIQUEUE_KIND_WORKDIR:-$HOME/.kube/multiqueue-kind}
cd "$repo"
case "${1:-}" in
--down)
    exec python3 -m tests.e2e.kind down --workdir "$workdir"
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
exec python3 -m tests.e2e.kind up --workdir "$workdir"
