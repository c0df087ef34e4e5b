#!/usr/bin/env bash
# Registers a worker cluster with the multiqueue manager.
#
# On the worker (--worker-context): applies the multiqueue-worker ClusterRole (deploy/worker/), creates the
# namespace NAMESPACE with a ServiceAccount multiqueue-manager, binds the role to it, and creates a long-lived token
# for it (a kubernetes.io/service-account-token Secret that the cluster's token controller fills in; delete that
# Secret on the worker to revoke the token). A real cluster's kube-controller-manager and a local cluster of
# `multiqueue local up` (either control plane) both run that controller.
# On the management cluster (--management-context): writes the Secret multiqueue-worker-NAME in NAMESPACE, labelled
# multiqueue.dev/cluster=NAME, whose key "kubeconfig" holds the worker's server, its CA and the token, embedded
# (no file paths, no credential plugins). The manager picks the worker up from that Secret while it runs.
#
# Each step prints one line to stderr. If a step fails, what this run created on the worker (and only that: what
# was there before stays) is deleted again, newest first, each removal printed; the management Secret is written
# last, in one request, so a failed run leaves none. Exit codes: 0 registered, 1 a step failed, 2 bad usage.
#
# --server overrides the worker's API server address as the manager must reach it (for example the address on a
# network the management cluster's pods share with the worker). kubectl is $KUBECTL (default: kubectl); it reads
# $KUBECONFIG as usual.
set -euo pipefail

readonly PROGRAM=register-worker.sh
readonly USAGE="usage: $PROGRAM --name NAME --worker-context CONTEXT --management-context CONTEXT [--server URL] [--labels JSON] [--capacity JSON] [--namespace NAMESPACE]"
KUBECTL="${KUBECTL:-kubectl}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

bad_usage() {
  echo "$PROGRAM: $1" >&2
  echo "$USAGE" >&2
  exit 2
}

name="" worker_context="" management_context="" server="" labels="" capacity="" namespace="multiqueue-system"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h | --help)
      echo "$USAGE"
      exit 0
      ;;
    --name | --worker-context | --management-context | --server | --labels | --capacity | --namespace)
      [[ $# -ge 2 && -n "$2" ]] || bad_usage "$1 needs a value"
      case "$1" in
        --name) name="$2" ;;
        --worker-context) worker_context="$2" ;;
        --management-context) management_context="$2" ;;
        --server) server="$2" ;;
        --labels) labels="$2" ;;
        --capacity) capacity="$2" ;;
        --namespace) namespace="$2" ;;
      esac
      shift 2
      ;;
    *) bad_usage "unknown argument: $1" ;;
  esac
done
[[ -n "$name" ]] || bad_usage "--name is required"
[[ -n "$worker_context" ]] || bad_usage "--worker-context is required"
[[ -n "$management_context" ]] || bad_usage "--management-context is required"
# The name becomes a label value, a Secret name suffix and the manager's worker name: a DNS-1123 label.
if [[ ${#name} -gt 50 || ! "$name" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
  bad_usage "--name must be a DNS-1123 label of at most 50 characters: $name"
fi
for json in "$labels" "$capacity"; do
  [[ -z "$json" || "$json" =~ ^[[:space:]]*\{.*\}[[:space:]]*$ ]] || bad_usage "--labels and --capacity take a JSON object: $json"
done

readonly SA=multiqueue-manager TOKEN_SECRET=multiqueue-manager-token TOKEN_WAIT=60s
worker() { "$KUBECTL" --context "$worker_context" "$@"; }
management() { "$KUBECTL" --context "$management_context" "$@"; }
# A YAML single-quoted scalar: quotes inside are doubled.
quoted() { printf "'%s'" "${1//\'/\'\'}"; }
say() { echo "worker $name: $*" >&2; }
fail() {
  echo "$PROGRAM: $*" >&2
  exit 1
}

# What this run created on the worker, in order ("kind/name" as kubectl apply reports it), and whether it finished.
created=()
registered=false

# On the way out of a failed run: delete what this run created on the worker, newest first.
clean_up() {
  local status=$? i
  trap - EXIT INT TERM
  if [[ "$registered" != true && ${#created[@]} -gt 0 ]]; then
    say "failed; removing what this run created on context $worker_context"
    for ((i = ${#created[@]} - 1; i >= 0; i--)); do
      if worker -n "$namespace" delete "${created[i]}" --ignore-not-found --wait=true --timeout=60s >/dev/null; then
        say "removed ${created[i]}"
      else
        say "could not remove ${created[i]}: delete it by hand"
      fi
    done
  fi
  exit "$status"
}
trap clean_up EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# kubectl apply on the worker; its report goes to stdout as usual, and each object it created is remembered.
apply_on_worker() {
  local output status=0 what verb
  output="$(worker apply "$@")" || status=$?
  if [[ -n "$output" ]]; then
    printf '%s\n' "$output"
    while read -r what verb _; do
      [[ "$verb" != created ]] || created+=("$what")
    done <<<"$output"
  fi
  return "$status"
}

say "ClusterRole multiqueue-worker on context $worker_context"
apply_on_worker -f "$HERE/worker/clusterrole.yaml"

say "namespace $namespace, ServiceAccount $SA, its ClusterRoleBinding and token Secret on context $worker_context"
apply_on_worker -f - <<MANIFESTS
apiVersion: v1
kind: Namespace
metadata:
  name: $namespace
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: $SA
  namespace: $namespace
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: multiqueue-worker
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: multiqueue-worker
subjects:
  - kind: ServiceAccount
    name: $SA
    namespace: $namespace
---
apiVersion: v1
kind: Secret
metadata:
  name: $TOKEN_SECRET
  namespace: $namespace
  annotations:
    kubernetes.io/service-account.name: $SA
type: kubernetes.io/service-account-token
MANIFESTS

say "waiting up to $TOKEN_WAIT for the token controller to fill in Secret $TOKEN_SECRET"
worker -n "$namespace" wait --for=jsonpath='{.data.token}' "secret/$TOKEN_SECRET" --timeout="$TOKEN_WAIT" >/dev/null ||
  fail "Secret $TOKEN_SECRET got no token within $TOKEN_WAIT on context $worker_context (does the cluster run the service-account token controller?)"

say "reading the token, the CA and the API server address"
token="$(worker -n "$namespace" get secret "$TOKEN_SECRET" -o go-template='{{.data.token | base64decode}}')"
ca_data="$(worker -n "$namespace" get secret "$TOKEN_SECRET" -o jsonpath='{.data.ca\.crt}')"
if [[ -z "$server" ]]; then
  server="$(worker config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')"
fi
[[ -n "$token" && -n "$ca_data" && -n "$server" ]] || fail "could not read the token, CA or server of context $worker_context"

annotations=""
if [[ -n "$labels$capacity" ]]; then
  annotations="  annotations:"
  [[ -z "$labels" ]] || annotations+=$'\n'"    multiqueue.dev/labels: $(quoted "$labels")"
  [[ -z "$capacity" ]] || annotations+=$'\n'"    multiqueue.dev/capacity: $(quoted "$capacity")"
fi

say "Secret multiqueue-worker-$name in $namespace on context $management_context"
management apply -f - <<SECRET
apiVersion: v1
kind: Secret
metadata:
  name: multiqueue-worker-$name
  namespace: $namespace
  labels:
    multiqueue.dev/cluster: $name
$annotations
type: Opaque
stringData:
  kubeconfig: |
    apiVersion: v1
    kind: Config
    clusters:
      - name: $name
        cluster:
          server: $(quoted "$server")
          certificate-authority-data: $ca_data
    users:
      - name: $SA
        user:
          token: $(quoted "$token")
    contexts:
      - name: $name
        context:
          cluster: $name
          user: $SA
    current-context: $name
SECRET
registered=true
say "registered: the manager adds it from that Secret while it runs"
