//go:build tools

// Package tools pins the command built from this wrapper module.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
