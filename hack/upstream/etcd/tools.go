//go:build tools

// Package etcd pins the command hack/lib/build.sh builds, so go.sum covers its imports.
package etcd

import _ "go.etcd.io/etcd/server/v3"
