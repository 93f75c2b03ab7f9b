// Package memcachedbin is a test library: it finds Debian's memcached, the
// image's, for the tests that run the real one.
package memcachedbin

import (
	"os"
	"os/exec"
)

// TB is the part of testing.TB (and of Ginkgo's GinkgoT) that Path uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	Skip(args ...any)
}

// Path is memcached's path. Without it a test is skipped on a developer's
// machine and fails in CI (CI=true), where make cluster-deps installs it.
func Path(t TB) string {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("memcached is not installed: make cluster-deps installs it")
		}
		t.Skip("memcached is not installed (make cluster-deps installs it)")
	}
	return bin
}
