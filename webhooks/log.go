package webhooks

import (
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// RequestLogger names the request on every line its webhook logs (object,
// user, request ID), as controller-runtime's own constructor does, but hands
// those values to the logger only when a line is written. The default
// encodes them into a new logger several times a request, and nearly every
// request logs nothing, so that encoding was a large share of the garbage
// each admission made.
func RequestLogger(base logr.Logger, req *admission.Request) logr.Logger {
	if base.GetSink() == nil {
		return base
	}
	return base.WithSink(&deferredValues{sink: base.GetSink(), req: req})
}

// deferredValues is a logr.LogSink that keeps the request and the values
// given to WithValues, and passes them to the sink beneath with each line
// written.
type deferredValues struct {
	sink  logr.LogSink
	req   *admission.Request
	kv    []any
	depth int
}

var _ logr.CallDepthLogSink = &deferredValues{}

// Init does nothing: the sink beneath was initialized by its own logger,
// and RequestLogger does not call it again.
func (d *deferredValues) Init(logr.RuntimeInfo) {}

func (d *deferredValues) Enabled(level int) bool { return d.sink.Enabled(level) }

func (d *deferredValues) Info(level int, msg string, kv ...any) {
	d.line().Info(level, msg, kv...)
}

func (d *deferredValues) Error(err error, msg string, kv ...any) {
	d.line().Error(err, msg, kv...)
}

// line is the sink beneath with the request's values, and the frame this
// sink adds between the caller and it skipped.
func (d *deferredValues) line() logr.LogSink {
	s := d.sink
	if cd, ok := s.(logr.CallDepthLogSink); ok {
		s = cd.WithCallDepth(d.depth + 1)
	}
	kv := []any{"webhookGroup", cachev1alpha1.GroupVersion.Group, "webhookKind", "Memcached"}
	if r := d.req; r != nil {
		kv = append(kv,
			"Memcached", klog.KRef(r.Namespace, r.Name),
			"namespace", r.Namespace, "name", r.Name,
			"resource", r.Resource, "user", r.UserInfo.Username,
			"requestID", r.UID,
		)
	}
	return s.WithValues(append(kv, d.kv...)...)
}

func (d *deferredValues) WithValues(kv ...any) logr.LogSink {
	c := *d
	c.kv = append(slices.Clip(d.kv), kv...)
	return &c
}

func (d *deferredValues) WithName(name string) logr.LogSink {
	c := *d
	c.sink = d.sink.WithName(name)
	return &c
}

func (d *deferredValues) WithCallDepth(depth int) logr.LogSink {
	c := *d
	c.depth += depth
	return &c
}
