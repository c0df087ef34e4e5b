//go:build tools

// Package tools records what hack/build-kind-images.sh builds from github.com/containerd/containerd/v2, so that go.mod/go.sum pin every
// module it needs.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
)
