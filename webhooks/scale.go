package webhooks

import (
	"context"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// ScaleValidator bounds spec.replicas of memcacheds/scale. `kubectl scale` and
// autoscalers write size through the scale subresource, whose admission
// request carries an autoscaling/v1 Scale, not the Memcached, so the object's
// validator never sees it.
type ScaleValidator struct {
	Limits  policy.Limits
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (v *ScaleValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update || req.SubResource != "scale" {
		return admission.Allowed("")
	}
	scale, oldScale := &autoscalingv1.Scale{}, &autoscalingv1.Scale{}
	if err := v.Decoder.DecodeRaw(req.Object, scale); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if err := v.Decoder.DecodeRaw(req.OldObject, oldScale); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	errs := policy.ValidateSize(field.NewPath("spec", "replicas"), &scale.Spec.Replicas, &oldScale.Spec.Replicas, v.Limits)
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	// The full Status keeps the field paths, as kubectl shows them for the object's own webhook.
	gk := cachev1alpha1.GroupVersion.WithKind("Memcached").GroupKind()
	status := apierrors.NewInvalid(gk, req.Name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}
