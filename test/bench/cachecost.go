package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
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
// The decoding runs in a child process (bench cache-cost) with nothing else
// in it: in the bench's own process, its watchers' heap moves between two
// collections by more than a kind's objects weigh.
func (b *bench) cacheCost(ctx context.Context, ns string, fleets int) ([]kindCost, error) {
	if fleets <= 0 {
		return nil, nil
	}
	var in []kindObjects
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
		k := kindObjects{Kind: gvk.Kind, Objects: make([]json.RawMessage, len(list.Items))}
		jsonBytes := 0
		for i := range list.Items {
			if k.Objects[i], err = json.Marshal(list.Items[i].Object); err != nil {
				return nil, err
			}
			jsonBytes += len(k.Objects[i])
		}
		in = append(in, k)
		out = append(out, kindCost{Kind: gvk.Kind, Objects: len(k.Objects), JSONBytesPerFleet: float64(jsonBytes) / float64(fleets)})
	}
	added, err := decodedSizesInChild(ctx, in)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].BytesPerFleet = float64(added[out[i].Kind]) / float64(fleets)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BytesPerFleet > out[j].BytesPerFleet })
	return out, nil
}

// kindObjects are the objects of one cached kind as the API server served
// them: what bench cache-cost reads on its standard input.
type kindObjects struct {
	Kind    string            `json:"kind"`
	Objects []json.RawMessage `json:"objects"`
}

// decodedSizesInChild runs bench cache-cost on in and returns the heap each
// kind's objects add, by kind.
func decodedSizesInChild(ctx context.Context, in []kindObjects) (map[string]int64, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	input, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "cache-cost")
	cmd.Stdin, cmd.Stderr = bytes.NewReader(input), os.Stderr
	stdout, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("bench cache-cost: %w", err)
	}
	added := map[string]int64{}
	if err := json.Unmarshal(stdout, &added); err != nil {
		return nil, fmt.Errorf("bench cache-cost's answer %q: %w", stdout, err)
	}
	return added, nil
}

// cmdCacheCost reads kindObjects from stdin and writes, as a JSON object by
// kind, the live heap each kind's objects add once decoded and trimmed as the
// operator's cache keeps them.
func cmdCacheCost(stdin io.Reader, stdout io.Writer) error {
	var in []kindObjects
	if err := json.NewDecoder(stdin).Decode(&in); err != nil {
		return err
	}
	type cached struct {
		obj       client.Object
		transform toolscache.TransformFunc
	}
	byKind := map[string]cached{}
	for obj, by := range memcached.CacheOptions(nil).ByObject {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return err
		}
		byKind[gvk.Kind] = cached{obj, by.Transform}
	}
	added := map[string]int64{}
	for _, k := range in {
		by, ok := byKind[k.Kind]
		if !ok {
			return fmt.Errorf("%s is not a kind the operator caches", k.Kind)
		}
		raw := make([][]byte, len(k.Objects))
		for i := range k.Objects {
			raw[i] = k.Objects[i]
		}
		n, err := decodedSize(raw, by.obj, by.transform)
		if err != nil {
			return fmt.Errorf("decoding %s: %w", k.Kind, err)
		}
		added[k.Kind] = n
	}
	return json.NewEncoder(stdout).Encode(added)
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

// liveHeap is the heap in use after a full collection. Garbage with a
// finalizer (an exited child's pipes, say) outlives the first collection,
// so a second one follows the finalizers' turn.
func liveHeap() int64 {
	runtime.GC()
	runtime.Gosched()
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
