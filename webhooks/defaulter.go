package webhooks

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// Defaulter fills the fields a user left empty, and its patch adds those
// and nothing else. A generic defaulter (controller-runtime's) patches the
// whole object back to its Go type's encoding, which rewrites fields the
// user wrote: a CPU limit of "1000m" is stored as "1", and a GitOps tool
// then reports the fleet out of sync with its source.
type Defaulter struct {
	Config policy.Config
}

var _ admission.Handler = &Defaulter{}

// Handle implements admission.Handler.
func (d *Defaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var obj struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	spec := &cachev1alpha1.MemcachedSpec{}
	if len(obj.Spec) > 0 {
		if err := kjson.UnmarshalCaseSensitivePreserveInts(obj.Spec, spec); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	defaulted := spec.DeepCopy()
	d.Default(req.Operation, defaulted)
	if reflect.DeepEqual(spec, defaulted) {
		return admission.Allowed("")
	}
	patch, err := defaultsPatch(obj.Spec, spec, defaulted)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Patched("", patch...)
}

// Default fills spec in place. A create gets every default; an update only
// those that fleets had from the start, so that editing a fleet created
// before a default existed does not change its pods.
func (d *Defaulter) Default(op admissionv1.Operation, spec *cachev1alpha1.MemcachedSpec) {
	if op == admissionv1.Create {
		policy.DefaultCreate(spec, d.Config)
		return
	}
	policy.Default(spec, d.Config)
}

// defaultsPatch is the JSON patch that takes the spec as the request holds
// it (raw) to one with what defaulting changed from before to after. It
// compares before and after as their Go type encodes them, so that only
// defaulting's changes appear, and writes each change where raw lacks it:
// at the field, or at the first of its parents raw does not have.
func defaultsPatch(raw []byte, before, after *cachev1alpha1.MemcachedSpec) ([]jsonpatch.JsonPatchOperation, error) {
	b, err := tree(before)
	if err != nil {
		return nil, err
	}
	a, err := tree(after)
	if err != nil {
		return nil, err
	}
	var r any
	if len(raw) > 0 {
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &r); err != nil {
			return nil, err
		}
	}
	rm, ok := r.(map[string]any)
	if !ok { // no spec, or null
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/spec", a)}, nil
	}
	return changes("/spec", rm, b, a), nil
}

// changes are the operations under path that take raw from before to after:
// raw holds at least the fields before has that the user wrote. Defaulting
// only sets fields, so there is nothing to remove (the property test holds
// the patch to the generic defaulter's object, which would show one).
func changes(path string, raw, before, after map[string]any) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	for _, k := range slices.Sorted(maps.Keys(after)) {
		av := after[k]
		bv, inBefore := before[k]
		if inBefore && reflect.DeepEqual(av, bv) {
			continue
		}
		p := path + "/" + escapePointer(k)
		am, aMap := av.(map[string]any)
		bm, bMap := bv.(map[string]any)
		rm, rMap := raw[k].(map[string]any)
		if aMap && bMap && rMap {
			ops = append(ops, changes(p, rm, bm, am)...)
			continue
		}
		// "add" replaces a member that exists, as a null one the Go type
		// dropped.
		ops = append(ops, jsonpatch.NewOperation("add", p, av))
	}
	return ops
}

// tree is spec as its JSON encoding decodes into maps, integers kept whole.
func tree(spec *cachev1alpha1.MemcachedSpec) (map[string]any, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	return m, kjson.UnmarshalCaseSensitivePreserveInts(data, &m)
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string { return pointerEscaper.Replace(k) }

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
