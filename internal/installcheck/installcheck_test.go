package installcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

var gk = schema.GroupKind{Group: "cache.example.com", Kind: "Memcached"}

// apiServer stands in for the API server with the operator's webhooks, each
// of which a case can break.
type apiServer struct {
	noDefaulting  bool
	noValidation  bool
	schemaRejects bool
	// becomeAvailable sets the Available condition after this many reads.
	becomeAvailable int
	reads           atomic.Int32
	deleted         atomic.Bool
}

func (s *apiServer) client() client.WithWatch {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			mc := obj.(*unstructured.Unstructured)
			if s.schemaRejects {
				return apierrors.NewInvalid(gk, mc.GetName(), field.ErrorList{field.Invalid(field.NewPath("spec", "size"), 101, "schema")})
			}
			if !s.noDefaulting {
				if _, ok, _ := unstructured.NestedString(mc.Object, "spec", "image"); !ok {
					_ = unstructured.SetNestedField(mc.Object, "memcached:1.6", "spec", "image")
				}
				_ = unstructured.SetNestedField(mc.Object, int64(1024), "spec", "maxConnections")
			}
			size, _, _ := unstructured.NestedInt64(mc.Object, "spec", "size")
			spec, _ := json.Marshal(mc.Object["spec"])
			if !s.noValidation && (size > 100 || len(spec) > policy.MaxSpecBytes) {
				return fmt.Errorf(`admission webhook %q denied the request: Memcached.cache.example.com %q is invalid: spec.size: Invalid value`, ValidatingWebhookName, mc.GetName())
			}
			opt := &client.CreateOptions{}
			opt.ApplyOptions(opts)
			if len(opt.DryRun) > 0 {
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if int(s.reads.Add(1)) >= s.becomeAvailable {
				cond := map[string]any{"type": "Available", "status": "True", "reason": "AllReplicasReady", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(0)}
				_ = unstructured.SetNestedSlice(obj.(*unstructured.Unstructured).Object, []any{cond}, "status", "conditions")
			}
			return nil
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			s.deleted.Store(true)
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
}

func checker(s *apiServer, cfg Config, out *bytes.Buffer) *Checker {
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Name == "" {
		cfg.Name = "check"
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = 100
	}
	if cfg.DefaultImage == "" {
		cfg.DefaultImage = "memcached:1.6"
	}
	return &Checker{Client: s.client(), Config: cfg, Out: out, Poll: time.Millisecond}
}

func TestDryRunChecks(t *testing.T) {
	cases := []struct {
		name    string
		server  *apiServer
		wantErr string
		wantOut string
	}{
		{name: "working webhooks", server: &apiServer{}, wantOut: `"image":"memcached:1.6"`},
		{name: "no mutating webhook", server: &apiServer{noDefaulting: true}, wantErr: "is the mutating webhook registered?"},
		{name: "no validating webhook", server: &apiServer{noValidation: true}, wantErr: "was admitted: is the validating webhook registered?"},
		{name: "only the schema rejects", server: &apiServer{schemaRejects: true}, wantErr: "dry-run create was refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var out bytes.Buffer
			err := checker(tc.server, Config{}, &out).Run(context.Background())
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.String()).To(ContainSubstring(tc.wantOut))
			g.Expect(out.String()).To(ContainSubstring("rejected by the webhook"))
			g.Expect(out.String()).To(ContainSubstring("PASS"))
		})
	}
}

func TestInvalidRejectedOnlyByWebhook(t *testing.T) {
	g := NewWithT(t)
	s := &apiServer{}
	c := checker(s, Config{}, &bytes.Buffer{})
	c.Client = fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			return apierrors.NewInvalid(gk, obj.GetName(), field.ErrorList{field.Invalid(field.NewPath("spec", "size"), 101, "schema")})
		},
	}).Build()
	g.Expect(c.DryRunInvalid(context.Background())).To(MatchError(ContainSubstring("but not by webhook " + ValidatingWebhookName)))
}

func TestInvalidSpec(t *testing.T) {
	g := NewWithT(t)
	spec, reason := InvalidSpec()
	mc := &cachev1alpha1.Memcached{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"spec": spec}, mc)).To(Succeed())
	mc.Name = "check-invalid"
	errs := policy.Validate(mc)
	g.Expect(errs).To(HaveLen(1), "one rule broken: the one only the webhook holds")
	g.Expect(errs[0].Field).To(Equal("spec"))
	g.Expect(errs[0].Detail).To(ContainSubstring("more than 65536"))
	g.Expect(reason).To(ContainSubstring("64 KiB"))
}

// fakeMemcached serves set and get of one key like memcached's text protocol.
func fakeMemcached(t *testing.T, corrupt bool) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		buf := make([]byte, 4096)
		var stored string
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			req := string(buf[:n])
			switch {
			case strings.HasPrefix(req, "set "):
				lines := strings.Split(req, "\r\n")
				stored = lines[1]
				if corrupt {
					stored = strings.ToUpper(stored)
				}
				_, _ = conn.Write([]byte("STORED\r\n"))
			case strings.HasPrefix(req, "get "):
				key := strings.TrimSpace(strings.TrimPrefix(req, "get "))
				_, _ = fmt.Fprintf(conn, "VALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(stored), stored)
			}
		}
	}()
	return ln
}

func TestRealMemcached(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("corrupt=%v", corrupt), func(t *testing.T) {
			g := NewWithT(t)
			ln := fakeMemcached(t, corrupt)
			s := &apiServer{becomeAvailable: 3}
			var out bytes.Buffer
			c := checker(s, Config{Memcached: true, Timeout: 5 * time.Second}, &out)
			var dialed string
			c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dialed = addr
				return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
			}
			err := c.Run(context.Background())
			g.Expect(dialed).To(MatchRegexp(`^check-real-[a-z0-9]+\.default\.svc:11211$`), "through the Memcached's Service")
			g.Expect(s.deleted.Load()).To(BeTrue(), "the real Memcached is deleted")
			if corrupt {
				g.Expect(err).To(MatchError(ContainSubstring("get returned")))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.String()).To(ContainSubstring("is Available"))
		})
	}
}

func TestRealMemcachedNeverAvailable(t *testing.T) {
	g := NewWithT(t)
	s := &apiServer{becomeAvailable: 1 << 30}
	c := checker(s, Config{Memcached: true, Timeout: 50 * time.Millisecond}, &bytes.Buffer{})
	err := c.RealMemcached(context.Background())
	g.Expect(err).To(MatchError(ContainSubstring("waiting for Available")))
	g.Expect(s.deleted.Load()).To(BeTrue(), "deleted even when it failed")
}

func TestAvailableConditionNeedsCurrentGeneration(t *testing.T) {
	g := NewWithT(t)
	mc := &unstructured.Unstructured{Object: map[string]any{}}
	g.Expect(availableCondition(mc)).To(BeNil())
	_ = unstructured.SetNestedSlice(mc.Object, []any{map[string]any{
		"type": "Available", "status": "True", "reason": "x", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(2),
	}}, "status", "conditions")
	cond := availableCondition(mc)
	g.Expect(cond).NotTo(BeNil())
	g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(cond.ObservedGeneration).To(BeEquivalentTo(2))
}
