//go:build tools

// Package tools records the JobSet controller (the main package at the module's root), so that go.mod/go.sum pin
// every module it needs.
package tools

import (
	_ "sigs.k8s.io/jobset"
)
