package tarfile

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestExtractStaysInside: an entry that climbs out of the folder with ".."
// or an absolute name is written inside it, and regular files keep their
// content.
func TestExtractStaysInside(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "a.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"ok/file", "../../escape", "/abs"} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(name))}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := Extract(archive, out); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"ok/file": "ok/file", "escape": "../../escape", "abs": "/abs"} {
		got, err := os.ReadFile(filepath.Join(out, path))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "escape")); err == nil {
		t.Error("an entry was written outside the folder")
	}
}
