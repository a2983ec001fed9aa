//go:build tools

// Package kind pins the command hack/lib/build.sh builds, so go.sum covers its imports.
package kind

import _ "sigs.k8s.io/kind"
