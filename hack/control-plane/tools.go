//go:build tools

// Package tools records the upstream commands hack/build-control-plane.sh builds,
// so that go.mod/go.sum pin every module they need.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
