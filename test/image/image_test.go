// Package image tests the operator image that `make image` builds: one OCI
// image index with a linux/amd64 and a linux/arm64 image, each holding every
// binary of ./cmd built for its own architecture.
package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/example/memcached-operator/test/repo"
	"github.com/example/memcached-operator/test/tarfile"
)

const ref = "example.com/memcached-operator:image-test"

// machines is the ELF machine each platform's binaries must be built for.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// TestOperatorImageIndex builds the image as `make image` does and reads it
// back: an index named for ctr import, one image per platform, each with the
// Dockerfile's user and entrypoint and every command of ./cmd as a static
// executable of its platform; the one for this machine runs.
func TestOperatorImageIndex(t *testing.T) {
	root := repo.Root()
	dir := t.TempDir()
	archive := filepath.Join(dir, "operator.tar")
	cmd := exec.Command(filepath.Join(root, "hack", "image.sh"), archive)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "IMG="+ref, "IMAGE_PLATFORMS=linux/amd64 linux/arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/image.sh: %v\n%s", err, out)
	}
	layoutDir := filepath.Join(dir, "layout")
	if err := tarfile.Extract(archive, layoutDir); err != nil {
		t.Fatal(err)
	}

	top, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	tm := manifestOf(t, top)
	if len(tm.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want the image index alone", len(tm.Manifests))
	}
	d := tm.Manifests[0]
	if d.MediaType != types.OCIImageIndex {
		t.Fatalf("index.json's entry is a %s, want an OCI image index", d.MediaType)
	}
	if got := d.Annotations["io.containerd.image.name"]; got != ref {
		t.Fatalf("the index is named %q for ctr import, want %q", got, ref)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im := manifestOf(t, idx)

	commands := commandNames(t, root)
	var platforms []string
	for _, m := range im.Manifests {
		if m.Platform == nil {
			t.Fatalf("image %s has no platform in the index", m.Digest)
		}
		p := m.Platform
		platforms = append(platforms, p.OS+"/"+p.Architecture)
		img, cf := imageOf(t, idx, m.Digest)
		if cf.OS != p.OS || cf.Architecture != p.Architecture {
			t.Errorf("%s: the image's config says %s/%s", p.Architecture, cf.OS, cf.Architecture)
		}
		if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{"/memcached-operator"}) {
			t.Errorf("%s: user %q, entrypoint %q; want 65532:65532 and /memcached-operator", p.Architecture, cf.Config.User, cf.Config.Entrypoint)
		}
		files := layerFiles(t, img)
		for _, c := range commands {
			bin, ok := files[c]
			if !ok {
				t.Errorf("%s: /%s is missing", p.Architecture, c)
				continue
			}
			if err := checkExecutable(bin, machines[p.Architecture]); err != nil {
				t.Errorf("%s: /%s: %v", p.Architecture, c, err)
			}
		}
		if !strings.Contains(string(files["etc/passwd"]), ":65532:65532:") {
			t.Errorf("%s: /etc/passwd has no entry for 65532", p.Architecture)
		}
		if p.Architecture == runtime.GOARCH {
			runsHere(t, files["memcached-operator"])
		}
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("the index holds %v, want linux/amd64 and linux/arm64", platforms)
	}
}

func manifestOf(t *testing.T, idx v1.ImageIndex) *v1.IndexManifest {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// imageOf is the image of the index with that digest, and its config.
func imageOf(t *testing.T, idx v1.ImageIndex, digest v1.Hash) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	img, err := idx.Image(digest)
	if err == nil {
		var cf *v1.ConfigFile
		if cf, err = img.ConfigFile(); err == nil {
			return img, cf
		}
	}
	t.Fatal(err)
	return nil, nil
}

// commandNames are the binaries ./cmd builds: one per folder.
func commandNames(t *testing.T, root string) []string {
	des, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if de.IsDir() {
			names = append(names, de.Name())
		}
	}
	if !slices.Contains(names, "memcached-operator") {
		t.Fatalf("cmd/ has no memcached-operator: %v", names)
	}
	return names
}

// checkExecutable: a 64-bit ELF executable for machine, statically linked
// (no interpreter: the image has no dynamic loader).
func checkExecutable(bin []byte, machine elf.Machine) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if f.Machine != machine || f.Class != elf.ELFCLASS64 || f.Type != elf.ET_EXEC {
		return errors.New("built as " + f.Machine.String() + " " + f.Class.String() + " " + f.Type.String() + ", want " + machine.String() + " ELFCLASS64 ET_EXEC")
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked")
		}
	}
	return nil
}

// runsHere runs this machine's operator binary from the image: its flags'
// help proves it starts.
func runsHere(t *testing.T, bin []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "memcached-operator")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(path, "-h").CombinedOutput()
	if !strings.Contains(string(out), "-leader-elect") {
		t.Errorf("the image's memcached-operator -h printed no flag help:\n%s", out)
	}
}

func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		err = tarfile.Walk(rc, func(h *tar.Header, content io.Reader) error {
			if h.Typeflag != tar.TypeReg {
				return nil
			}
			b, err := io.ReadAll(content)
			files[strings.TrimPrefix(h.Name, "/")] = b
			return err
		})
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}
