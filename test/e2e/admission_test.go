//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// admissionCount is what an admission loop saw.
type admissionCount struct {
	attempts, failed int
	first            error
}

func (a admissionCount) String() string {
	return fmt.Sprintf("%d dry-run admissions, %d failed", a.attempts, a.failed)
}

// startAdmissions creates a Memcached in ns with a server-side dry run every
// 100 ms, through the API server and so through both webhooks, until the
// returned stop is called; stop returns the count. An admission counts as
// failed when it was refused or came back without the webhook's defaults. A spec uses it to show
// that something (a drain, an upgrade) never interrupts admission.
func startAdmissions(ctx context.Context, ns string) (stop func() admissionCount) {
	var (
		mu    sync.Mutex
		count admissionCount
	)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(finished)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			mc := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
				"metadata": map[string]any{"name": fmt.Sprintf("dry-%d", i), "namespace": ns},
				"spec":     map[string]any{"size": int64(1)},
			}}
			err := k8s.Create(ctx, mc, client.DryRunAll)
			if _, defaulted, _ := unstructured.NestedFieldNoCopy(mc.Object, "spec", "maxConnections"); err == nil && !defaulted {
				// Only the mutating webhook sets it: an admission it did not
				// see (failurePolicy Ignore, or no webhook) is no success.
				err = errors.New("admitted without the webhook's defaults")
			}
			mu.Lock()
			count.attempts++
			if err != nil {
				count.failed++
				if count.first == nil {
					count.first = err
				}
			}
			mu.Unlock()
		}
	}()
	return func() admissionCount {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return count
	}
}
