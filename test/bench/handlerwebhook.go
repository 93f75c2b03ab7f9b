package main

import (
	"context"
	"crypto/tls"
	"flag"

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
	mutate, validate, err := handlerWebhooks(*fixed)
	if err != nil {
		return err
	}
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: *port, CertDir: *certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}})
	srv.Register(webhooks.MutatePath, mutate)
	srv.Register(webhooks.ValidatePath, validate)
	return srv.Start(ctx)
}

// allowAll answers every review allowed, as the cheapest webhook does.
var allowAll = admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
})

// handlerWebhooks are the operator's two webhooks as its webhook builder
// makes them, with its log constructor too; fixed, they allow every review.
func handlerWebhooks(fixed bool) (mutate, validate *admission.Webhook, err error) {
	s := runtime.NewScheme()
	if err := cachev1alpha1.AddToScheme(s); err != nil {
		return nil, nil, err
	}
	mutate = webhooks.Mutating(operatorDefaults)
	validate = admission.WithValidator[*cachev1alpha1.Memcached](s,
		&webhooks.Validator{Limits: policy.Limits{MaxSize: operatorMaxSize}, Defaults: operatorDefaults})
	validate.LogConstructor = webhooks.RequestLogger
	if fixed {
		mutate.Handler, validate.Handler = allowAll, allowAll
	}
	return mutate, validate, nil
}
