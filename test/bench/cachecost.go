package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/example/memcached-operator/internal/controller/memcached"
)

// kindCost is what the operator's cache holds of one kind, a fleet.
type kindCost struct {
	Kind    string `json:"kind"`
	Objects int    `json:"objects"`
	// Bytes is the live heap the objects of the kind add, decoded from the
	// API server's JSON and trimmed by the operator's cache transform, over
	// the number of fleets; JSONBytes what the API server sent for them.
	BytesPerFleet     float64 `json:"bytesPerFleet"`
	JSONBytesPerFleet float64 `json:"jsonBytesPerFleet"`
}

// cacheCost measures, kind by kind, the objects the operator's cache holds
// of the fleets in ns: each object of a cached kind (with the cache's label
// selector) is fetched as the API server serves it, decoded by the same
// deserializer as the operator's informers, passed through the operator's
// own transform (memcached.CacheOptions) and kept; the heap it adds, after a
// collection, is its cost. The operator's own heap also holds indexes, queues
// and garbage between collections: this is what the objects alone weigh.
func (b *bench) cacheCost(ctx context.Context, ns string, fleets int) ([]kindCost, error) {
	if fleets <= 0 {
		return nil, nil
	}
	var out []kindCost
	for obj, by := range memcached.CacheOptions(nil).ByObject {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return nil, err
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		opts := []client.ListOption{client.InNamespace(ns)}
		if by.Label != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: by.Label})
		}
		if err := b.admin.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		if len(list.Items) == 0 {
			continue
		}
		raw := make([][]byte, len(list.Items))
		jsonBytes := 0
		for i := range list.Items {
			if raw[i], err = json.Marshal(list.Items[i].Object); err != nil {
				return nil, err
			}
			jsonBytes += len(raw[i])
		}
		added, err := decodedSize(raw, obj, by.Transform)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", gvk.Kind, err)
		}
		out = append(out, kindCost{Kind: gvk.Kind, Objects: len(raw),
			BytesPerFleet: float64(added) / float64(fleets), JSONBytesPerFleet: float64(jsonBytes) / float64(fleets)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BytesPerFleet > out[j].BytesPerFleet })
	return out, nil
}

// decodedSize is the live heap that the objects in raw take once decoded
// into obj's type, as an informer decodes them, and passed through
// transform, as the cache keeps them.
func decodedSize(raw [][]byte, obj client.Object, transform toolscache.TransformFunc) (int64, error) {
	dec := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	keep := func(r []byte) (any, error) {
		decoded, _, err := dec.Decode(r, nil, obj.DeepCopyObject())
		if err != nil || transform == nil {
			return decoded, err
		}
		return transform(decoded)
	}
	// Once before measuring: what the first object alone makes and keeps
	// (a transform's parsed schema of the API's types) is the process's,
	// not the objects'.
	if len(raw) > 0 {
		if _, err := keep(raw[0]); err != nil {
			return 0, err
		}
	}
	kept := make([]any, len(raw))
	before := liveHeap()
	for i, r := range raw {
		v, err := keep(r)
		if err != nil {
			return 0, err
		}
		kept[i] = v
	}
	added := liveHeap() - before
	runtime.KeepAlive(kept)
	return added, nil
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// cacheCostNote prints the costs, largest first, and their sum.
func cacheCostNote(costs []kindCost) string {
	var parts []string
	total := 0.0
	for _, c := range costs {
		total += c.BytesPerFleet
		parts = append(parts, fmt.Sprintf("%s %.1f KiB (%d objects, %.1f KiB of JSON)", c.Kind, c.BytesPerFleet/1024, c.Objects, c.JSONBytesPerFleet/1024))
	}
	return fmt.Sprintf("%.1f KiB a fleet: %s", total/1024, strings.Join(parts, ", "))
}
