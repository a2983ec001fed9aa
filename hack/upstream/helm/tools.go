//go:build tools

// Package helm pins the command hack/lib/build.sh builds, so go.sum covers its imports.
package helm

import _ "helm.sh/helm/v3/cmd/helm"
