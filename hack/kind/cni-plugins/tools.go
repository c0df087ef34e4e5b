//go:build tools

// Package tools records what hack/build-kind-images.sh builds from github.com/containernetworking/plugins, so that go.mod/go.sum pin every
// module it needs.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/main/ptp"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)
