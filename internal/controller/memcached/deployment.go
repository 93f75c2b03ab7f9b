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

func (r *Reconciler) reconcileDeployment(ctx context.Context, s *scope) error {
	if t := s.tls; t != nil && t.Wanted && (t.APIMissing || !t.Ready) {
		// Pods would wait for a Secret that does not exist yet, or start
		// with a certificate that is not valid: the fleet keeps the pods it
		// has until the Certificate is Ready, and status says why.
		s.deployment = s.current
		return nil
	}
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
	if len(s.kept) > 0 {
		keys := make([]string, 0, len(s.kept))
		for _, e := range s.kept {
			keys = append(keys, policy.RuleKey(e))
		}
		slices.Sort(keys)
		want.WithAnnotations(map[string]string{AcceptedRulesAnnotation: strings.Join(slices.Compact(keys), ",")})
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
