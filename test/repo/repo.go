// Package repo finds the repository's top folder for the tests of any
// package, whether or not they were built with -trimpath (which the Makefile
// sets, so that tests, tools and images share one build cache; a source
// file's path then no longer tells where the checkout is).
package repo

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// Module is the path the top folder's go.mod declares.
const Module = "github.com/example/memcached-operator"

// Root is the nearest folder, from the working directory up (go test runs a
// package's tests in its folder), whose go.mod declares Module; it panics
// when there is none, since no test can find its files then.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if declares(filepath.Join(dir, "go.mod")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("no go.mod of " + Module + " above the working directory")
		}
		dir = parent
	}
}

func declares(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.TrimSpace(m) == Module
		}
	}
	return false
}
