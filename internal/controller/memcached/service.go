package memcached

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
)

func (r *Reconciler) reconcileService(ctx context.Context, s *scope) error {
	created, err := apply.IfChanged(ctx, r.applier(), s.memcached, "Service", &corev1.Service{}, desired.Service(s.memcached, s.spec), corev1ac.ExtractService)
	if created {
		s.markCreated("Service")
	}
	return err
}
