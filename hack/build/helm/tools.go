//go:build tools

// Package tools pins the commands built from this wrapper module: Helm 3,
// and Helm 4 for the e2e suite's lifecycle specs.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "helm.sh/helm/v4/cmd/helm"
)
