//go:build !failpoint

package main

import "github.com/stipend-mcp/stipend/idempotency"

// failpoints is empty in the shipped binary: the crash test's failpoint
// exists only in the failpoint build (failpoint.go).
type failpoints struct{}

func readFailpoints(map[string]string) failpoints { return failpoints{} }

func (failpoints) arm(*Main, *idempotency.Options) {}
