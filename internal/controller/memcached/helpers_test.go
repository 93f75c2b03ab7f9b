package memcached_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingClient counts the write requests a client sends, whatever the kind
// or subresource, so a spec can prove a pass wrote nothing.
type countingClient struct {
	client.Client
	writes *atomic.Int64
}

func (c countingClient) count() { c.writes.Add(1) }

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.count()
	return c.Client.Create(ctx, obj, opts...)
}

func (c countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.count()
	return c.Client.Update(ctx, obj, opts...)
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.count()
	return c.Client.Patch(ctx, obj, p, opts...)
}

func (c countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.count()
	return c.Client.Apply(ctx, obj, opts...)
}

func (c countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.count()
	return c.Client.Delete(ctx, obj, opts...)
}

func (c countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.count()
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c countingClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c countingClient) SubResource(name string) client.SubResourceClient {
	return countingSubResource{SubResourceClient: c.Client.SubResource(name), c: c}
}

type countingSubResource struct {
	client.SubResourceClient
	c countingClient
}

func (s countingSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	s.c.count()
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s countingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.count()
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s countingSubResource) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.count()
	return s.SubResourceClient.Patch(ctx, obj, p, opts...)
}

func (s countingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	s.c.count()
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}

// getJSON GETs url with the given Accept header and decodes the answer.
func getJSON(c *http.Client, url, accept string, out any) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// metricValue is the value of the series of family name whose labels
// include these pairs (name, value, ...); the sum when several match.
func metricValue(g Gomega, name string, labels ...string) float64 {
	mfs, err := metricsReg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				match = match && got[labels[i]] == labels[i+1]
			}
			if !match {
				continue
			}
			if m.Gauge != nil {
				total += m.Gauge.GetValue()
			} else {
				total += m.Counter.GetValue()
			}
		}
	}
	return total
}
