//go:build tools

// Package certmanager pins cert-manager's module, so go.sum covers it.
package certmanager

import _ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
