package memcached

import (
	"context"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"

	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/policy"
)

// reconcileWorkload applies the fleet's Deployment, or its StatefulSet when
// the spec asks for stable pods.
func (r *Reconciler) reconcileWorkload(ctx context.Context, s *scope) error {
	if t := s.tls; t != nil && t.Wanted && (t.APIMissing || !t.Ready) {
		// Pods would wait for a Secret that does not exist yet, or start
		// with a certificate that is not valid: the fleet keeps the pods it
		// has until the Certificate is Ready, and status says why.
		s.deployment, s.statefulSet = s.current, s.currentSet
		return nil
	}
	if s.stable() {
		return r.reconcileStatefulSet(ctx, s)
	}
	return r.reconcileDeployment(ctx, s)
}

func (r *Reconciler) reconcileDeployment(ctx context.Context, s *scope) error {
	spec := s.spec
	switch size, err := r.markScaleDown(ctx, s); {
	case err != nil:
		return err
	case size != *spec.Size:
		held := *spec
		held.Size = &size
		spec = &held
	}
	dep := &appsv1.Deployment{}
	want := desired.Deployment(s.memcached, spec)
	if a := acceptedAnnotation(s); a != nil {
		want.WithAnnotations(a)
	}
	created, err := apply.IfChanged(ctx, r.applier(), s.memcached, "Deployment", dep, want, appsv1ac.ExtractDeployment)
	if err != nil {
		return err
	}
	if created {
		s.markCreated("Deployment")
	}
	s.deployment = dep
	return nil
}

// reconcileStatefulSet applies the StatefulSet of a fleet with stable pods.
// It scales down from the highest ordinal, as a StatefulSet does: a
// client's server list keeps its first entries.
func (r *Reconciler) reconcileStatefulSet(ctx context.Context, s *scope) error {
	set := &appsv1.StatefulSet{}
	want := desired.StatefulSet(s.memcached, s.spec)
	if a := acceptedAnnotation(s); a != nil {
		want.WithAnnotations(a)
	}
	created, err := apply.IfChanged(ctx, r.applier(), s.memcached, "StatefulSet", set, want, appsv1ac.ExtractStatefulSet)
	if err != nil {
		return err
	}
	if created {
		s.markCreated("StatefulSet")
	}
	s.statefulSet = set
	if policy.WarmRestartEnabled(s.spec) && !created {
		return r.rollWarm(ctx, s, set)
	}
	return nil
}

// acceptedAnnotation records on the workload the rules the spec breaks as
// it did when it was last built (acceptedRules); nil when there are none.
func acceptedAnnotation(s *scope) map[string]string {
	if len(s.kept) == 0 {
		return nil
	}
	keys := make([]string, 0, len(s.kept))
	for _, e := range s.kept {
		keys = append(keys, policy.RuleKey(e))
	}
	slices.Sort(keys)
	return map[string]string{AcceptedRulesAnnotation: strings.Join(slices.Compact(keys), ",")}
}
