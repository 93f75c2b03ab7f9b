//go:build tools

// Package tools pins the command built from this wrapper module.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
