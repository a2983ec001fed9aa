//go:build tools

// Package crictl pins the command hack/lib/build.sh builds, so go.sum covers its imports.
package crictl

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
