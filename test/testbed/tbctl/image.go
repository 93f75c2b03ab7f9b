package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// epoch is the timestamp of every file and of the image: the same inputs give
// the same digests.
var epoch = time.Unix(0, 0).UTC()

// runImage builds a single-layer OCI image from host files and writes it as an
// OCI image archive (oci-layout, index.json, blobs) whose index carries the
// io.containerd.image.name annotation, so `ctr images import` names it.
func runImage(args []string) error {
	fset := flag.NewFlagSet("image", flag.ExitOnError)
	out := fset.String("out", "", "archive to write")
	ref := fset.String("name", "", "image reference, e.g. localhost/pause:3.10")
	user := fset.String("user", "", "numeric user:group the image runs as")
	nonroot := fset.Bool("nonroot-base", false, "add /etc/passwd and /etc/group with nonroot (65532) and a world-writable /tmp")
	var files, dirs, entrypoint, env multi
	fset.Var(&files, "file", "HOST[:IMAGE] file to add (IMAGE defaults to HOST; symlinks are resolved); repeatable")
	fset.Var(&dirs, "from-dir", "HOST:IMAGE every regular file of a host folder, non-recursively; repeatable")
	fset.Var(&entrypoint, "entrypoint", "entrypoint word; repeatable")
	fset.Var(&env, "env", "KEY=VALUE; repeatable")
	_ = fset.Parse(args)
	if *out == "" || *ref == "" {
		return errors.New("-out and -name are required")
	}
	tag, err := name.NewTag(*ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image name %q: %w", *ref, err)
	}

	entries := map[string]entry{}
	for _, f := range files {
		host, img, ok := strings.Cut(f, ":")
		if !ok {
			img = host
		}
		if err := addFile(entries, host, img); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		host, img, ok := strings.Cut(d, ":")
		if !ok {
			return fmt.Errorf("-from-dir %q: want HOST:IMAGE", d)
		}
		des, err := os.ReadDir(host)
		if err != nil {
			return err
		}
		for _, de := range des {
			if de.Type().IsRegular() {
				if err := addFile(entries, filepath.Join(host, de.Name()), filepath.Join(img, de.Name())); err != nil {
					return err
				}
			}
		}
	}
	if *nonroot {
		entries["etc/passwd"] = entry{data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), mode: 0o644}
		entries["etc/group"] = entry{data: []byte("root:x:0:\nnonroot:x:65532:\n"), mode: 0o644}
		entries["tmp"] = entry{dir: true, mode: 0o1777}
		entries["home/nonroot"] = entry{dir: true, mode: 0o700, uid: 65532}
	}
	layerTar, err := tarOf(entries)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = entrypoint
	cf.Config.User = *user
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp(filepath.Dir(*out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img,
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}),
		layout.WithAnnotations(map[string]string{
			"io.containerd.image.name":          tag.Name(),
			"org.opencontainers.image.ref.name": tag.TagStr(),
		})); err != nil {
		return err
	}
	// The archive is the layout folder as a tar, the form ctr imports.
	tmp := *out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, *out)
}

type entry struct {
	data []byte
	mode int64
	dir  bool
	uid  int
}

func addFile(entries map[string]entry, host, img string) error {
	real, err := filepath.EvalSymlinks(host)
	if err != nil {
		return err
	}
	st, err := os.Stat(real)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(real)
	if err != nil {
		return err
	}
	entries[strings.TrimPrefix(filepath.Clean(img), "/")] = entry{data: data, mode: int64(st.Mode().Perm())}
	return nil
}

// tarOf writes the layer: every parent folder first, then the entries, sorted.
func tarOf(entries map[string]entry) ([]byte, error) {
	all := map[string]entry{}
	for p, e := range entries {
		all[p] = e
		for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
			if _, ok := all[d]; !ok {
				if _, ok := entries[d]; !ok {
					all[d] = entry{dir: true, mode: 0o755}
				}
			}
		}
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := all[p]
		h := &tar.Header{Name: p, Mode: e.mode, ModTime: epoch, Uid: e.uid, Gid: e.uid, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, p+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	err := tw.Close()
	return buf.Bytes(), err
}

func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime = filepath.ToSlash(rel), epoch
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		_ = f.Close()
		return err
	}
	if err := tw.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
