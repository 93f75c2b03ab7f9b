// Package webhooks admits Memcached objects: a mutating webhook that fills
// defaults and validating webhooks for the object and for its scale
// subresource. They are thin: the rules live in internal/policy as pure
// functions, so the admission code only decodes, calls and wraps.
package webhooks

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// Paths the webhook server serves; the chart's webhook configurations name the same.
const (
	MutatePath        = "/mutate-cache-example-com-v1alpha1-memcached"
	ValidatePath      = "/validate-cache-example-com-v1alpha1-memcached"
	ValidateScalePath = "/validate-cache-example-com-v1alpha1-memcached-scale"
)

// Options are the operator flags the webhooks enforce.
type Options struct {
	Defaults policy.Config
	Limits   policy.Limits
}

// SetupWithManager registers the three webhooks with the manager's webhook server.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &cachev1alpha1.Memcached{}).
		WithValidator(&Validator{Limits: opts.Limits, Defaults: opts.Defaults}).
		WithLogConstructor(RequestLogger).
		Complete(); err != nil {
		return err
	}
	srv := mgr.GetWebhookServer()
	srv.Register(MutatePath, Mutating(opts.Defaults))
	srv.Register(ValidateScalePath, &admission.Webhook{
		Handler:        &ScaleValidator{Limits: opts.Limits, Decoder: admission.NewDecoder(mgr.GetScheme())},
		LogConstructor: RequestLogger,
	})
	return nil
}

// Mutating is the defaulting webhook as the operator serves it.
func Mutating(defaults policy.Config) *admission.Webhook {
	return &admission.Webhook{Handler: &Defaulter{Config: defaults}, LogConstructor: RequestLogger}
}

// Validator rejects a Memcached that breaks a rule and warns about risky ones.
type Validator struct {
	Limits policy.Limits
	// Defaults complete the spec as the controller will, so admission
	// refuses what the controller could not build.
	Defaults policy.Config
}

var _ admission.Validator[*cachev1alpha1.Memcached] = &Validator{}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(_ context.Context, mc *cachev1alpha1.Memcached) (admission.Warnings, error) {
	errs, warnings := policy.ValidateCreate(mc, v.Limits)
	errs = append(errs, v.resolved(mc)...)
	return admission.Warnings(warnings), invalid(mc, errs)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator) ValidateUpdate(_ context.Context, oldMC, mc *cachev1alpha1.Memcached) (admission.Warnings, error) {
	errs, warnings := policy.ValidateUpdate(oldMC, mc, v.Limits)
	if mc.DeletionTimestamp == nil {
		errs = append(errs, policy.Ratchet(v.resolved(mc), v.resolved(oldMC))...)
	}
	return admission.Warnings(warnings), invalid(mc, errs)
}

// resolved are the errors of the spec as the controller completes it.
func (v *Validator) resolved(mc *cachev1alpha1.Memcached) field.ErrorList {
	return policy.ValidateResolved(policy.Resolve(&mc.Spec, v.Defaults))
}

// ValidateDelete implements admission.Validator; deletion is always allowed.
func (v *Validator) ValidateDelete(context.Context, *cachev1alpha1.Memcached) (admission.Warnings, error) {
	return nil, nil
}

func invalid(mc *cachev1alpha1.Memcached, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(cachev1alpha1.GroupVersion.WithKind("Memcached").GroupKind(), mc.Name, errs)
}
