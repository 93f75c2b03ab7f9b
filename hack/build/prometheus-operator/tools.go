//go:build tools

// The mains this module builds (hack/tool.sh prometheus-operator,
// prometheus-config-reloader); the import keeps them in go.mod.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
	_ "github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader"
)
