// Package installcheck proves an installed operator works through the API
// server, the way a user meets it: it is what `helm test` runs. A valid
// Memcached must be admitted with the webhook's defaults filled in, an invalid
// one must be rejected by the webhook itself (not only by the CRD schema), and,
// when asked, a real Memcached must become Available and store and return a
// key through its Service.
package installcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// ValidatingWebhookName is the name the chart gives the Memcached validating
// webhook; the API server quotes it when the webhook rejects a request.
const ValidatingWebhookName = "validate.memcached.cache.example.com"

// Config is what the check is told about the install.
type Config struct {
	// Namespace is where the check creates Memcacheds: one the operator
	// watches and its webhooks admit.
	Namespace string
	// Name prefixes the Memcacheds the check creates.
	Name string
	// MaxSize is the operator's --max-size.
	MaxSize int32
	// DefaultImage is the operator's --default-image, which the mutating
	// webhook must fill in.
	DefaultImage string
	// Memcached also runs a real Memcached through the operator.
	Memcached bool
	// Timeout bounds the wait for a real Memcached to become Available.
	Timeout time.Duration
}

// Checker runs the checks with a client that talks to the API server.
type Checker struct {
	Client client.Client
	Config Config
	// Out receives a line per step, read in `helm test --logs`.
	Out io.Writer
	// Dial reaches memcached; nil means a plain TCP dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Poll is how often the Available condition is read; 0 means 2s.
	Poll time.Duration
}

// Run runs every check and returns the first failure.
func (c *Checker) Run(ctx context.Context) error {
	if err := c.DryRunValid(ctx); err != nil {
		return fmt.Errorf("valid Memcached: %w", err)
	}
	if err := c.DryRunInvalid(ctx); err != nil {
		return fmt.Errorf("invalid Memcached: %w", err)
	}
	if c.Config.Memcached {
		if err := c.RealMemcached(ctx); err != nil {
			return fmt.Errorf("real Memcached: %w", err)
		}
	}
	c.logf("PASS: the operator's webhooks default and validate Memcacheds%s", map[bool]string{true: ", and a Memcached serves set/get"}[c.Config.Memcached])
	return nil
}

// DryRunValid creates an empty-spec Memcached with server-side dry run and
// requires the webhook's defaults in the answer.
func (c *Checker) DryRunValid(ctx context.Context) error {
	mc := c.memcached(c.Config.Name+"-valid", map[string]any{})
	if err := c.Client.Create(ctx, mc, client.DryRunAll); err != nil {
		return fmt.Errorf("dry-run create was refused: %w", err)
	}
	spec, _, _ := unstructured.NestedMap(mc.Object, "spec")
	out, _ := json.Marshal(spec)
	c.logf("dry-run create of %s/%s admitted; spec after defaulting: %s", c.Config.Namespace, mc.GetName(), out)

	image, _, _ := unstructured.NestedString(mc.Object, "spec", "image")
	if c.Config.DefaultImage != "" && image != c.Config.DefaultImage {
		return fmt.Errorf("spec.image is %q, want the operator's --default-image %q: is the mutating webhook registered?", image, c.Config.DefaultImage)
	}
	// The schema has no default for maxConnections: only the webhook sets it.
	if _, found, _ := unstructured.NestedFieldNoCopy(mc.Object, "spec", "maxConnections"); !found {
		return errors.New("spec.maxConnections was not defaulted: is the mutating webhook registered?")
	}
	return nil
}

// InvalidSpec is a spec that passes the CRD schema and the chart's
// admission policies and that only the validating webhook refuses, so a
// rejection proves the webhook is called: every other rule is also the
// rules policy's, which the API server applies first, but CEL cannot measure
// a spec's encoded size. A node affinity term with many values makes it
// larger than policy.MaxSpecBytes.
func InvalidSpec() (spec map[string]any, reason string) {
	values := make([]any, 1200)
	for i := range values {
		values[i] = fmt.Sprintf("zone-%055d", i)
	}
	affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": values}}}},
	}}}
	return map[string]any{"size": int64(1), "affinity": affinity}, "a spec above the webhook's 64 KiB bound"
}

// DryRunInvalid requires the validating webhook to reject an invalid Memcached.
func (c *Checker) DryRunInvalid(ctx context.Context) error {
	spec, reason := InvalidSpec()
	mc := c.memcached(c.Config.Name+"-invalid", spec)
	err := c.Client.Create(ctx, mc, client.DryRunAll)
	if err == nil {
		return fmt.Errorf("dry-run create with %s was admitted: is the validating webhook registered?", reason)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request", ValidatingWebhookName)) {
		return fmt.Errorf("dry-run create with %s failed, but not by webhook %s: %w", reason, ValidatingWebhookName, err)
	}
	c.logf("dry-run create with %s rejected by the webhook: %v", reason, err)
	return nil
}

// RealMemcached creates a Memcached, waits until it is Available, stores and
// reads a key through its Service, and deletes it whatever happened.
func (c *Checker) RealMemcached(ctx context.Context) (err error) {
	mc := c.memcached(c.Config.Name+"-real", map[string]any{"size": int64(1)})
	if err := c.Client.Create(ctx, mc); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	c.logf("created Memcached %s/%s", mc.GetNamespace(), mc.GetName())
	defer func() {
		// The caller's context may be what ran out; cleaning up must still happen.
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if delErr := c.Client.Delete(delCtx, mc); client.IgnoreNotFound(delErr) != nil {
			err = errors.Join(err, fmt.Errorf("delete: %w", delErr))
			return
		}
		c.logf("deleted Memcached %s/%s", mc.GetNamespace(), mc.GetName())
	}()

	if err := c.waitAvailable(ctx, mc); err != nil {
		return err
	}
	port, found, _ := unstructured.NestedInt64(mc.Object, "spec", "port")
	if !found {
		port = 11211
	}
	addr := net.JoinHostPort(fmt.Sprintf("%s.%s.svc", mc.GetName(), mc.GetNamespace()), fmt.Sprint(port))
	if err := c.setGet(ctx, addr); err != nil {
		return err
	}
	c.logf("set and got a key through %s", addr)
	return nil
}

func (c *Checker) waitAvailable(ctx context.Context, mc *unstructured.Unstructured) error {
	poll := c.Poll
	if poll == 0 {
		poll = 2 * time.Second
	}
	timeout := c.Config.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
			if apierrors.IsNotFound(err) {
				return false, err
			}
			last = err.Error()
			return false, nil
		}
		cond := availableCondition(mc)
		if cond == nil {
			last = "no Available condition yet"
			return false, nil
		}
		last = fmt.Sprintf("Available=%s (%s: %s)", cond.Status, cond.Reason, cond.Message)
		return cond.Status == metav1.ConditionTrue && cond.ObservedGeneration >= mc.GetGeneration(), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Available: %w; last seen: %s", err, last)
	}
	c.logf("Memcached %s/%s is Available", mc.GetNamespace(), mc.GetName())
	return nil
}

func availableCondition(mc *unstructured.Unstructured) *metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	data, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var conds []metav1.Condition
	if err := json.Unmarshal(data, &conds); err != nil {
		return nil
	}
	return meta.FindStatusCondition(conds, cachev1alpha1.ConditionAvailable)
}

func (c *Checker) setGet(ctx context.Context, addr string) error {
	dial := c.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dialing memcached: %w", err)
	}
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	} else {
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	value := fmt.Sprintf("memcached-operator-check-%d", time.Now().UnixNano())
	return SetGet(conn, "memcached-operator-check", value)
}

// memcached is a Memcached to create. Names are generated so that a rerun
// never collides with a user's object or one a killed run left behind.
func (c *Checker) memcached(prefix string, spec map[string]any) *unstructured.Unstructured {
	mc := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	mc.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind("Memcached"))
	mc.SetNamespace(c.Config.Namespace)
	mc.SetGenerateName(prefix + "-")
	mc.SetLabels(map[string]string{"app.kubernetes.io/created-by": "memcached-operator-check"})
	return mc
}

func (c *Checker) logf(format string, args ...any) {
	if c.Out != nil {
		_, _ = fmt.Fprintf(c.Out, format+"\n", args...)
	}
}
