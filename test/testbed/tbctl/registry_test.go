package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/crypto/bcrypt"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
)

func TestHtpasswd(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	htpasswd, pwFile := filepath.Join(dir, "htpasswd"), filepath.Join(dir, "password")
	g.Expect(runHtpasswd([]string{"-out", htpasswd, "-user", "testbed", "-password-file", pwFile})).To(Succeed())
	line, err := os.ReadFile(htpasswd)
	g.Expect(err).NotTo(HaveOccurred())
	pw, err := os.ReadFile(pwFile)
	g.Expect(err).NotTo(HaveOccurred())
	user, hash, ok := strings.Cut(strings.TrimSpace(string(line)), ":")
	g.Expect(ok).To(BeTrue())
	g.Expect(user).To(Equal("testbed"))
	g.Expect(hash).To(HavePrefix("$2"), "bcrypt: the only hash distribution's htpasswd auth accepts")
	g.Expect(bcrypt.CompareHashAndPassword([]byte(hash), []byte(strings.TrimSpace(string(pw))))).To(Succeed())
	g.Expect(len(strings.TrimSpace(string(pw)))).To(BeNumerically(">=", 20))

	// A second cluster gets other credentials.
	g.Expect(runHtpasswd([]string{"-out", htpasswd, "-password-file", pwFile + "2"})).To(Succeed())
	pw2, _ := os.ReadFile(pwFile + "2")
	g.Expect(pw2).NotTo(Equal(pw))
	for _, f := range []string{htpasswd, pwFile} {
		st, err := os.Stat(f)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)), f)
	}
}

// TestPush pushes an archive of tbctl image to a TLS registry that requires
// basic auth: refused without credentials; with them, the image is stored
// distinct from the archive (other layer contents, so other diffIDs and
// digests: the archive's files plus the origin marker; the origin label),
// and push returns its digest.
func TestPush(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "hello")
	g.Expect(os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755)).To(Succeed())
	archive := filepath.Join(dir, "hello.tar")
	g.Expect(runImage([]string{"-out", archive, "-name", "localhost/hello:1", "-file", bin + ":/hello", "-entrypoint", "/hello"})).To(Succeed())

	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "testbed" || p != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ca := filepath.Join(dir, "ca.crt")
	g.Expect(os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)).To(Succeed())
	host := strings.TrimPrefix(srv.URL, "https://")

	_, err := push(archive, host+"/testbed/hello:1", ca, "", "")
	g.Expect(err).To(MatchError(ContainSubstring("credential")))
	_, err = push(archive, host+"/testbed/hello:1", ca, "testbed", "wrong")
	g.Expect(err).To(MatchError(ContainSubstring("401")))

	ref, err := push(archive, host+"/testbed/hello:1", ca, "testbed", "secret")
	g.Expect(err).NotTo(HaveOccurred())
	name, digest, ok := strings.Cut(ref, "@")
	g.Expect(ok).To(BeTrue(), ref)
	g.Expect(name).To(Equal(host + "/testbed/hello"))

	// What the archive holds.
	in := t.TempDir()
	orig, err := archiveImage(archive, in)
	g.Expect(err).NotTo(HaveOccurred())
	origDigest, _ := orig.Digest()
	origManifest, _ := orig.Manifest()
	origConfig, _ := orig.ConfigFile()
	g.Expect(digest).NotTo(Equal(origDigest.String()))

	// What the registry holds, read back with the pushed tag.
	repo, err := remote.NewRepository(name)
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := tlsTransport(ca)
	g.Expect(err).NotTo(HaveOccurred())
	repo.Client = &auth.Client{Client: &http.Client{Transport: tr},
		Credential: auth.StaticCredential(host, auth.Credential{Username: "testbed", Password: "secret"})}
	ctx := context.Background()
	desc, rc, err := repo.FetchReference(ctx, "1")
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := content.ReadAll(rc, desc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc.Digest.String()).To(Equal(digest))
	var m ocispec.Manifest
	g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
	g.Expect(m.MediaType).To(Equal(ocispec.MediaTypeImageManifest))
	g.Expect(m.Layers).To(HaveLen(len(origManifest.Layers)))
	for i, l := range m.Layers {
		g.Expect(l.Digest.String()).NotTo(Equal(origManifest.Layers[i].Digest.String()), "layer %d", i)
		g.Expect(l.MediaType).To(Equal(ocispec.MediaTypeImageLayerGzip))
		// The archive's files, then the marker.
		lrc, err := repo.Fetch(ctx, l)
		g.Expect(err).NotTo(HaveOccurred())
		zr, err := gzip.NewReader(lrc)
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			g.Expect(err).NotTo(HaveOccurred())
			names = append(names, h.Name)
		}
		_ = lrc.Close()
		g.Expect(names).To(Equal([]string{"hello", originMarker}))
	}
	cfgRC, err := repo.Fetch(ctx, m.Config)
	g.Expect(err).NotTo(HaveOccurred())
	cfgRaw, err := io.ReadAll(cfgRC)
	g.Expect(err).NotTo(HaveOccurred())
	var cfg v1.ConfigFile
	g.Expect(json.Unmarshal(cfgRaw, &cfg)).To(Succeed())
	g.Expect(cfg.RootFS.DiffIDs).To(HaveLen(len(origConfig.RootFS.DiffIDs)))
	for i, id := range cfg.RootFS.DiffIDs {
		g.Expect(id).NotTo(Equal(origConfig.RootFS.DiffIDs[i]), "an unpacked layer of the archive must not stand in for layer %d", i)
	}
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/hello"}))
	g.Expect(cfg.Config.Labels).To(HaveKeyWithValue(originLabel, "registry:hello.tar"))
}
