//go:build tools

// Package coredns pins the command hack/lib/build.sh builds, so go.sum covers its imports.
package coredns

import _ "github.com/coredns/coredns"
