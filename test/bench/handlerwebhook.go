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
// from what the rest of the operator's process adds.
func cmdHandlerWebhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("handler-webhook", flag.ExitOnError)
	port := fs.Int("port", 0, "Port on 127.0.0.1.")
	certDir := fs.String("cert-dir", "", "Folder with tls.crt and tls.key.")
	_ = fs.Parse(args)
	mutate, validate, err := handlerWebhooks()
	if err != nil {
		return err
	}
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: *port, CertDir: *certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}})
	srv.Register(webhooks.MutatePath, mutate)
	srv.Register(webhooks.ValidatePath, validate)
	return srv.Start(ctx)
}

// handlerWebhooks are the operator's two webhooks as its webhook builder
// makes them, with its log constructor too.
func handlerWebhooks() (mutate, validate *admission.Webhook, err error) {
	s := runtime.NewScheme()
	if err := cachev1alpha1.AddToScheme(s); err != nil {
		return nil, nil, err
	}
	mutate = webhooks.Mutating(operatorDefaults)
	validate = admission.WithValidator[*cachev1alpha1.Memcached](s,
		&webhooks.Validator{Limits: policy.Limits{MaxSize: operatorMaxSize}, Defaults: operatorDefaults})
	validate.LogConstructor = webhooks.RequestLogger
	return mutate, validate, nil
}
