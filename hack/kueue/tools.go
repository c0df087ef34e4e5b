//go:build tools

// Package tools records Kueue's manager (sigs.k8s.io/kueue/cmd/kueue), so that go.mod/go.sum pin every module it
// needs.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
