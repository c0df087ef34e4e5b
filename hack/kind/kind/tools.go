//go:build tools

// Package tools records what hack/build-kind-images.sh builds from sigs.k8s.io/kind, so that go.mod/go.sum pin every
// module it needs.
package tools

import (
	_ "sigs.k8s.io/kind"
)
