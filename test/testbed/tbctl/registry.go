package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/bcrypt"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/example/memcached-operator/test/tarfile"
)

// originLabel marks an image that tbctl push wrote to the testbed registry.
const originLabel = "dev.memcached-operator.testbed.origin"

// runHtpasswd makes the registry's credentials for one cluster: a random
// password, its bcrypt hash in an htpasswd file (the registry's htpasswd auth
// reads nothing else), and the password in a file of its own.
func runHtpasswd(args []string) error {
	fset := flag.NewFlagSet("htpasswd", flag.ExitOnError)
	out := fset.String("out", "", "htpasswd file to write")
	user := fset.String("user", "testbed", "user name")
	passwordFile := fset.String("password-file", "", "file to write the generated password to")
	_ = fset.Parse(args)
	if *out == "" || *passwordFile == "" {
		return errors.New("-out and -password-file are required")
	}
	password := rand.Text()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, []byte(*user+":"+string(hash)+"\n"), 0o600); err != nil {
		return err
	}
	return os.WriteFile(*passwordFile, []byte(password+"\n"), 0o600)
}

// runPush pushes the image of an OCI image archive (tbctl image's output) to
// a registry that uses TLS and basic auth, and prints the pushed reference
// with its digest (HOST/REPO@sha256:...).
//
// The pushed image is made distinct from the archive: every layer gets one
// more file (originMarker) and the config carries originLabel. The testbed
// imports the archives into every node, and containerd skips what it has: a
// blob whose digest is in its content store, and a layer whose unpacked
// snapshot (found by the layers' uncompressed digests, the diffIDs) exists.
// Even layers only compressed anew were never fetched: their diffIDs matched
// the imported image's. With other contents, the pull fetches the manifest,
// the config and every layer from the registry, and the pod's imageID names
// the pushed digest.
func runPush(args []string) error {
	fset := flag.NewFlagSet("push", flag.ExitOnError)
	archive := fset.String("archive", "", "OCI image archive (one image)")
	ref := fset.String("ref", "", "where to push: HOST[:PORT]/REPOSITORY:TAG")
	caFile := fset.String("ca", "", "PEM CA bundle the registry's certificate chains to")
	user := fset.String("user", "", "registry user")
	passwordFile := fset.String("password-file", "", "file holding the registry password")
	_ = fset.Parse(args)
	if *archive == "" || *ref == "" || *caFile == "" {
		return errors.New("-archive, -ref and -ca are required")
	}
	password := ""
	if *user != "" {
		pw, err := os.ReadFile(*passwordFile)
		if err != nil {
			return err
		}
		password = strings.TrimSpace(string(pw))
	}
	pushed, err := push(*archive, *ref, *caFile, *user, password)
	if err != nil {
		return err
	}
	fmt.Println(pushed)
	return nil
}

// push is runPush without the flags: it returns HOST/REPO@DIGEST.
func push(archive, ref, caFile, user, password string) (string, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("-ref %q: %w", ref, err)
	}
	in, err := os.MkdirTemp("", "tbctl-push-in-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(in) }()
	img, err := archiveImage(archive, in)
	if err != nil {
		return "", err
	}
	img, err = distinct(img, archive)
	if err != nil {
		return "", err
	}
	// The distinct image goes into an OCI layout of its own, from which
	// oras-go copies it to the registry (blobs first, then the manifest).
	dir, err := os.MkdirTemp("", "tbctl-push-out-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	if err := lp.AppendImage(img); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	src, err := oci.New(dir)
	if err != nil {
		return "", err
	}
	repo, err := remote.NewRepository(tag.Context().Name())
	if err != nil {
		return "", err
	}
	tr, err := tlsTransport(caFile)
	if err != nil {
		return "", err
	}
	client := &auth.Client{Client: &http.Client{Transport: tr}, Cache: auth.NewCache()}
	if user != "" {
		client.Credential = auth.StaticCredential(tag.RegistryStr(), auth.Credential{Username: user, Password: password})
	}
	repo.Client = client
	start := time.Now()
	if _, err := oras.Copy(context.Background(), src, d.String(), repo, tag.TagStr(), oras.DefaultCopyOptions); err != nil {
		return "", fmt.Errorf("pushing %s: %w", tag, err)
	}
	size, err := pushedSize(img)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "pushed %s (%s, %d bytes of blobs) in %v\n", tag, d, size, time.Since(start).Round(time.Millisecond))
	return tag.Context().Name() + "@" + d.String(), nil
}

// archiveImage reads the only image of an OCI image archive, extracted into
// dir (its blobs are read lazily: dir must outlive the image's use).
func archiveImage(archive, dir string) (v1.Image, error) {
	if err := tarfile.Extract(archive, dir); err != nil {
		return nil, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d manifests, want 1", archive, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// distinct is img with originMarker added to every layer and originLabel
// set: other layer contents (diffIDs), so other layers, config and manifest.
func distinct(img v1.Image, origin string) (v1.Image, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs = nil
	out := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	out = mutate.ConfigMediaType(out, types.OCIConfigJSON)
	for _, l := range layers {
		data, err := withMarker(l)
		if err != nil {
			return nil, err
		}
		nl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
			tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		if out, err = mutate.AppendLayers(out, nl); err != nil {
			return nil, err
		}
		id, err := nl.DiffID()
		if err != nil {
			return nil, err
		}
		cf.RootFS.DiffIDs = append(cf.RootFS.DiffIDs, id)
	}
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	cf.Config.Labels[originLabel] = "registry:" + filepath.Base(origin)
	return mutate.ConfigFile(out, cf)
}

// originMarker is the file distinct adds to every layer (at the end, so it
// takes nothing over from the layer's own files).
const originMarker = ".testbed-registry"

// withMarker is the uncompressed tar of l with originMarker appended.
func withMarker(l v1.Layer) ([]byte, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err = tarfile.Walk(rc, func(h *tar.Header, content io.Reader) error {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.Copy(tw, content)
		return err
	})
	if err != nil {
		return nil, err
	}
	body := []byte("pushed to the testbed registry by tbctl push\n")
	if err := tw.WriteHeader(&tar.Header{Name: originMarker, Typeflag: tar.TypeReg, Mode: 0o644,
		Size: int64(len(body)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(body); err != nil {
		return nil, err
	}
	err = tw.Close()
	return buf.Bytes(), err
}

// pushedSize is the size of the image's manifest, config and layers.
func pushedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

func tlsTransport(caFile string) (http.RoundTripper, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}
