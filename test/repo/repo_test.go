package repo

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRootFromAnyFolder: the top folder is found from this package's folder
// and from deeper ones, and it is the folder of the module's go.mod (not the
// nested go.mod of a build wrapper under hack/build).
func TestRootFromAnyFolder(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Clean(filepath.Join(wd, "..", ".."))
	if got := Root(); got != want {
		t.Fatalf("Root() from %s = %s, want %s", wd, got, want)
	}
	t.Chdir(filepath.Join(want, "hack", "build", "kubernetes"))
	if got := Root(); got != want {
		t.Fatalf("Root() from hack/build/kubernetes = %s, want %s", got, want)
	}
}
