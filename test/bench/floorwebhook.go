package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The cheapest webhook is what an admission request costs on this machine
// with nothing of the operator's in it: the same Go TLS and HTTP server and
// certificate, a handler that reads the review's UID and allows it. The
// operator's webhook latency is judged against it in the same run, since
// the machine's own wake-up and scheduling delays are most of a request
// at a few hundred a second.

// cmdFloorWebhook serves the cheapest webhook on 127.0.0.1 until it is
// signalled.
func cmdFloorWebhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("floor-webhook", flag.ExitOnError)
	port := fs.Int("port", 0, "Port on 127.0.0.1.")
	certDir := fs.String("cert-dir", "", "Folder with tls.crt and tls.key.")
	_ = fs.Parse(args)
	cert, err := tls.LoadX509KeyPair(filepath.Join(*certDir, "tls.crt"), filepath.Join(*certDir, "tls.key"))
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)),
		Handler:           http.HandlerFunc(allowReview),
		ReadHeaderTimeout: 10 * time.Second,
		// HTTP/1.1 only, as controller-runtime's webhook server by default.
		TLSConfig:    &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// allowReview answers an AdmissionReview with its UID, allowed.
func allowReview(w http.ResponseWriter, r *http.Request) {
	var review struct {
		Request struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	uid, _ := json.Marshal(review.Request.UID)
	_, _ = fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%s,"allowed":true}}`, uid)
}

// floorWebhook is the cheapest webhook, run as a process of its own as the
// operator is.
type floorWebhook struct {
	cmd  *exec.Cmd
	port int
}

func startFloorWebhook(ctx context.Context, hc *http.Client, certDir string, review []byte) (*floorWebhook, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "floor-webhook", "-port", strconv.Itoa(port), "-cert-dir", certDir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &floorWebhook{cmd: cmd, port: port}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := postReview(ctx, hc, f.url(), review)
		if err == nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			f.stop()
			return nil, fmt.Errorf("the cheapest webhook did not answer: %w", err)
		}
		select { // polling a condition: the server is up
		case <-ctx.Done():
			f.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (f *floorWebhook) url() string { return fmt.Sprintf("https://127.0.0.1:%d/", f.port) }

func (f *floorWebhook) stop() {
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	_ = f.cmd.Wait()
}
