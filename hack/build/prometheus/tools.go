//go:build tools

// The mains this module builds (hack/tool.sh prometheus, promtool); the
// import keeps them in go.mod for `go mod tidy`.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
