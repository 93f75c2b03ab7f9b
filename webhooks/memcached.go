// Package webhooks admits Memcached objects: a mutating webhook that fills
// defaults and validating webhooks for the object and for its scale
// subresource. They are thin: the rules live in internal/policy as pure
// functions, so the admission code only decodes, calls and wraps.
package webhooks

import (
	"context"
	"errors"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

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
	srv := mgr.GetWebhookServer()
	for path, h := range Handlers(opts, mgr.GetScheme()) {
		srv.Register(path, h)
	}
	return nil
}

// Handlers are the operator's webhooks by the path each is served on.
func Handlers(opts Options, scheme *runtime.Scheme) map[string]http.Handler {
	return map[string]http.Handler{
		MutatePath:   Serve(Mutating(opts.Defaults)),
		ValidatePath: Serve(Validating(&Validator{Limits: opts.Limits, Defaults: opts.Defaults})),
		ValidateScalePath: Serve(&admission.Webhook{
			Handler:        &ScaleValidator{Limits: opts.Limits, Decoder: admission.NewDecoder(scheme)},
			LogConstructor: RequestLogger,
		}),
	}
}

// Mutating is the defaulting webhook as the operator serves it.
func Mutating(defaults policy.Config) *admission.Webhook {
	return &admission.Webhook{Handler: &Defaulter{Config: defaults}, LogConstructor: RequestLogger}
}

// Validating is the object's validating webhook as the operator serves it.
func Validating(v *Validator) *admission.Webhook {
	return &admission.Webhook{Handler: v, LogConstructor: RequestLogger}
}

// Validator rejects a Memcached that breaks a rule and warns about risky ones.
type Validator struct {
	Limits policy.Limits
	// Defaults complete the spec as the controller will, so admission
	// refuses what the controller could not build.
	Defaults policy.Config
}

var _ admission.Handler = &Validator{}

// Handle implements admission.Handler. It decodes the objects straight into
// the Go type, as the Defaulter does; a generic validator decodes each
// twice (once to find its kind).
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	var warnings admission.Warnings
	var err error
	switch req.Operation {
	case admissionv1.Create:
		mc, derr := memcachedFrom(req.Object.Raw)
		if derr != nil {
			return admission.Errored(http.StatusBadRequest, derr)
		}
		warnings, err = v.ValidateCreate(ctx, mc)
	case admissionv1.Update:
		mc, derr := memcachedFrom(req.Object.Raw)
		if derr != nil {
			return admission.Errored(http.StatusBadRequest, derr)
		}
		old, derr := memcachedFrom(req.OldObject.Raw)
		if derr != nil {
			return admission.Errored(http.StatusBadRequest, derr)
		}
		warnings, err = v.ValidateUpdate(ctx, old, mc)
	default: // deletion and connection are always allowed
		return admission.Allowed("")
	}
	if err != nil {
		// The full Status keeps the field paths, as kubectl shows them.
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
				Allowed: false, Result: new(status.Status()), Warnings: warnings,
			}}
		}
		return admission.Denied(err.Error()).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

func memcachedFrom(raw []byte) (*cachev1alpha1.Memcached, error) {
	if len(raw) == 0 {
		return nil, errors.New("there is no content to decode")
	}
	mc := &cachev1alpha1.Memcached{}
	return mc, kjson.UnmarshalCaseSensitivePreserveInts(raw, mc)
}

// ValidateCreate is the review of a new Memcached.
func (v *Validator) ValidateCreate(_ context.Context, mc *cachev1alpha1.Memcached) (admission.Warnings, error) {
	errs, warnings := policy.ValidateCreate(mc, v.Limits)
	errs = append(errs, v.resolved(mc)...)
	return admission.Warnings(warnings), invalid(mc, errs)
}

// ValidateUpdate is the review of a changed Memcached.
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

func invalid(mc *cachev1alpha1.Memcached, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(cachev1alpha1.GroupVersion.WithKind("Memcached").GroupKind(), mc.Name, errs)
}
