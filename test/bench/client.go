package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// scheme knows the built-in kinds and Memcached.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := cachev1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// restConfig is user's configuration. Client-side rate limiting is off
// (QPS -1), as in the operator: controller-runtime leaves throttling to the
// API server's priority and fairness, and the reference must not be slower
// for a limit the operator does not have.
func restConfig(s *clusterState, user string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig(user))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = user
	return cfg, nil
}

// adminGet GETs path from the API server as the bench's admin and returns
// the body of a 200 answer, for the caller to close.
func adminGet(ctx context.Context, s *clusterState, path string) (io.ReadCloser, error) {
	cfg, err := restConfig(s, userAdmin)
	if err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return resp.Body, nil
}

// newClient is an uncached client of user; qps > 0 turns client-side rate
// limiting on (the bench's own bulk requests, to keep load bounded).
func newClient(s *clusterState, user string, qps float32) (client.Client, error) {
	cfg, err := restConfig(s, user)
	if err != nil {
		return nil, err
	}
	if qps > 0 {
		cfg.QPS, cfg.Burst = qps, int(qps)
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// pollFor waits for a condition, checking every 100 ms.
func pollFor(ctx context.Context, what string, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
