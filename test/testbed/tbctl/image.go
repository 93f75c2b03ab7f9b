package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
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
// io.containerd.image.name annotation, so `ctr images import` names it. With
// two -arch or more, the archive holds one image per architecture under one
// image index (a multi-platform image); with one, a single image of that
// architecture; without, a single linux/amd64 image.
func runImage(args []string) error {
	fset := flag.NewFlagSet("image", flag.ExitOnError)
	out := fset.String("out", "", "archive to write")
	ref := fset.String("name", "", "image reference, e.g. localhost/pause:3.10")
	user := fset.String("user", "", "numeric user:group the image runs as")
	nonroot := fset.Bool("nonroot-base", false, "add /etc/passwd and /etc/group with nonroot (65532) and a world-writable /tmp")
	var files, dirs, archDirs, entrypoint, env multi
	fset.Var(&files, "file", "HOST[:IMAGE] file to add (IMAGE defaults to HOST; symlinks are resolved); repeatable")
	fset.Var(&dirs, "from-dir", "HOST:IMAGE every regular file of a host folder, non-recursively; repeatable")
	fset.Var(&archDirs, "arch", "ARCH=HOST:IMAGE a linux/ARCH image with the files of -file, -from-dir and this folder; repeatable: two or more make one image per ARCH under an image index")
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

	common := map[string]entry{}
	for _, f := range files {
		host, img, ok := strings.Cut(f, ":")
		if !ok {
			img = host
		}
		if err := addFile(common, host, img); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		if err := addDir(common, d); err != nil {
			return err
		}
	}
	if *nonroot {
		common["etc/passwd"] = entry{data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), mode: 0o644}
		common["etc/group"] = entry{data: []byte("root:x:0:\nnonroot:x:65532:\n"), mode: 0o644}
		common["tmp"] = entry{dir: true, mode: 0o1777}
		common["home/nonroot"] = entry{dir: true, mode: 0o700, uid: 65532}
	}
	cfg := imageConfig{entrypoint: entrypoint, user: *user, env: env}

	dir, err := os.MkdirTemp(filepath.Dir(*out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	named := layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          tag.Name(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	})
	if len(archDirs) <= 1 {
		arch := "amd64"
		if len(archDirs) == 1 {
			var d string
			var ok bool
			if arch, d, ok = strings.Cut(archDirs[0], "="); !ok || arch == "" {
				return fmt.Errorf("-arch %q: want ARCH=HOST:IMAGE", archDirs[0])
			}
			if err := addDir(common, d); err != nil {
				return err
			}
		}
		img, err := buildImage(common, arch, cfg)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}), named); err != nil {
			return err
		}
	} else {
		idx, err := buildIndex(common, archDirs, cfg)
		if err != nil {
			return err
		}
		if err := p.AppendIndex(idx, named); err != nil {
			return err
		}
	}
	// The archive is the layout folder as a tar, the form ctr imports.
	tmp := *out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, *out)
}

type imageConfig struct {
	entrypoint []string
	user       string
	env        []string
}

// buildIndex makes one image per -arch ARCH=HOST:IMAGE, each with the common
// files, under an OCI image index that names each one's platform.
func buildIndex(common map[string]entry, archDirs []string, cfg imageConfig) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, a := range archDirs {
		arch, d, ok := strings.Cut(a, "=")
		if !ok || arch == "" {
			return nil, fmt.Errorf("-arch %q: want ARCH=HOST:IMAGE", a)
		}
		if seen[arch] {
			return nil, fmt.Errorf("-arch %s given twice", arch)
		}
		seen[arch] = true
		entries := maps.Clone(common)
		if err := addDir(entries, d); err != nil {
			return nil, err
		}
		img, err := buildImage(entries, arch, cfg)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	return idx, nil
}

// buildImage makes a linux/arch image of one layer holding entries.
func buildImage(entries map[string]entry, arch string, cfg imageConfig) (v1.Image, error) {
	layerTar, err := tarOf(entries)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = cfg.entrypoint
	cf.Config.User = cfg.user
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, cfg.env...)
	return mutate.ConfigFile(img, cf)
}

// addDir adds every regular file of a host folder (HOST:IMAGE), non-recursively.
func addDir(entries map[string]entry, spec string) error {
	host, img, ok := strings.Cut(spec, ":")
	if !ok {
		return fmt.Errorf("folder %q: want HOST:IMAGE", spec)
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
	return nil
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
