//go:build tools

// Package main pins crane, which pushes images to the registry (hack/registry.py), so go.sum covers it.
package main

import _ "github.com/google/go-containerregistry/cmd/crane"
