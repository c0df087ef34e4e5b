//go:build tools

// Package tools records the etcd command hack/build-control-plane.sh builds (the main
// package of go.etcd.io/etcd/server/v3), so that go.mod/go.sum pin every module it needs.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
