// Package tarfile reads tar streams for the testbed's image tools and the
// tests that open their archives: OCI layouts and layers are tars.
package tarfile

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
)

// Walk calls fn for each entry of the tar stream r, with a reader of the
// entry's content, and stops at the first error fn returns.
func Walk(r io.Reader, fn func(h *tar.Header, content io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// Extract writes the folders and regular files of the tar archive into dir.
// Entry names are cleaned as absolute paths first, so none lands outside dir.
func Extract(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	return Walk(f, func(h *tar.Header, content io.Reader) error {
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			return os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			b, err := io.ReadAll(content)
			if err != nil {
				return err
			}
			return os.WriteFile(p, b, 0o644)
		}
		return nil
	})
}
