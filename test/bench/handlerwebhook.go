package main

import (
	"context"
	"crypto/tls"
	"flag"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/webhooks"
)

// cmdHandlerWebhook serves the operator's mutating and validating handlers
// on controller-runtime's webhook server in a process with nothing else in
// it (no manager, caches or controllers): what the handlers cost, apart
// from what the rest of the operator's process adds. With -fixed, the same
// server allows every review without the operator's handlers: what the
// server and its review decoding and encoding cost.
func cmdHandlerWebhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("handler-webhook", flag.ExitOnError)
	port := fs.Int("port", 0, "Port on 127.0.0.1.")
	certDir := fs.String("cert-dir", "", "Folder with tls.crt and tls.key.")
	fixed := fs.Bool("fixed", false, "Allow every review instead of running the operator's handlers.")
	_ = fs.Parse(args)
	hs, err := handlerWebhooks(*fixed)
	if err != nil {
		return err
	}
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: *port, CertDir: *certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}})
	for path, h := range hs {
		srv.Register(path, h)
	}
	return srv.Start(ctx)
}

// allowAll answers every review allowed, as the cheapest webhook does.
var allowAll = admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
})

// handlerWebhooks are the operator's webhooks by path, as it serves them;
// fixed, they allow every review.
func handlerWebhooks(fixed bool) (map[string]http.Handler, error) {
	s := runtime.NewScheme()
	if err := cachev1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	hs := webhooks.Handlers(webhooks.Options{Defaults: operatorDefaults, Limits: policy.Limits{MaxSize: operatorMaxSize}}, s)
	if fixed {
		for path := range hs {
			hs[path] = webhooks.Serve(&admission.Webhook{Handler: allowAll})
		}
	}
	return hs, nil
}
