// Command registry is the CNCF distribution (v3) registry, trimmed for the
// testbed: the filesystem storage driver and htpasswd authentication only.
// Upstream's main also links the S3, GCS and Azure drivers, the pull-through
// proxy and token auth, whose SDKs were most of its build; none is used here.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
