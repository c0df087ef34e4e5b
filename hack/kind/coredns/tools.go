//go:build tools

// Package tools records what hack/build-kind-images.sh builds from github.com/coredns/coredns, so that go.mod/go.sum pin every
// module it needs.
package tools

import (
	_ "github.com/coredns/coredns"
)
