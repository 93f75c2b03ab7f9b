package webhooks

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"

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
// walks before and after as their Go type encodes them, so that only
// defaulting's changes appear, and writes each change where raw lacks it:
// at the field, or at the first of its parents raw does not have. It walks
// the Go values rather than their encodings: encoding both to compare them
// made most of the garbage a review left.
func defaultsPatch(raw []byte, before, after *cachev1alpha1.MemcachedSpec) ([]jsonpatch.JsonPatchOperation, error) {
	if !isObject(raw) { // no spec, or null
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/spec", after)}, nil
	}
	return changes("/spec", raw, reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem())
}

// changes are the operations under path that take raw from before to after,
// two structs or two maps with string keys of one type: raw holds at least
// the members of before that the user wrote. Defaulting only sets fields,
// so there is nothing to remove (the property test holds the patch to the
// generic defaulter's object, which would show one).
func changes(path string, raw []byte, before, after reflect.Value) ([]jsonpatch.JsonPatchOperation, error) {
	var ops []jsonpatch.JsonPatchOperation
	var members map[string]json.RawMessage
	change := func(name string, b, a reflect.Value) error {
		p := path + "/" + escapePointer(name)
		bc, ac := container(b), container(a)
		if bc.IsValid() && ac.IsValid() {
			if members == nil {
				if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &members); err != nil {
					return err
				}
			}
			if r := members[name]; isObject(r) {
				sub, err := changes(p, r, bc, ac)
				ops = append(ops, sub...)
				return err
			}
		}
		// "add" replaces a member that exists, as a null one the Go type
		// dropped.
		ops = append(ops, jsonpatch.NewOperation("add", p, a.Interface()))
		return nil
	}
	if after.Kind() == reflect.Map {
		keys := after.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		for _, k := range keys {
			b, a := before.MapIndex(k), after.MapIndex(k)
			if b.IsValid() && same(b, a) {
				continue
			}
			if !b.IsValid() {
				b = reflect.Zero(a.Type())
			}
			if err := change(k.String(), b, a); err != nil {
				return nil, err
			}
		}
		return ops, nil
	}
	for _, f := range fieldsOf(after.Type()) {
		b, a := before.FieldByIndex(f.index), after.FieldByIndex(f.index)
		if same(b, a) {
			continue
		}
		if err := change(f.name, b, a); err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// same tells whether b and a are deeply equal, without boxing either when
// both are nil, as most of a spec's optional fields are.
func same(b, a reflect.Value) bool {
	switch a.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
	}
	return reflect.DeepEqual(b.Interface(), a.Interface())
}

// jsonField is a struct field that encoding/json writes as a member.
type jsonField struct {
	name  string
	index []int
}

var fieldCache sync.Map // reflect.Type → []jsonField

// fieldsOf are the members of struct type t's encoding, with those of its
// embedded structs that have no name of their own.
func fieldsOf(t reflect.Type) []jsonField {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]jsonField)
	}
	var fs []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for _, ef := range fieldsOf(f.Type) {
				ef.index = append([]int{i}, ef.index...)
				fs = append(fs, ef)
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs = append(fs, jsonField{name: name, index: []int{i}})
	}
	fieldCache.Store(t, fs)
	return fs
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// container is v, through its pointer, when its encoding is a JSON object
// of its members (a struct or a map with string keys, without an encoding
// of its own); otherwise the zero Value.
func container(v reflect.Value) reflect.Value {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	t := v.Type()
	for _, tt := range []reflect.Type{t, reflect.PointerTo(t)} {
		if tt.Implements(marshalerType) || tt.Implements(textMarshalerType) {
			return reflect.Value{}
		}
	}
	switch {
	case t.Kind() == reflect.Struct:
		return v
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && !v.IsNil():
		return v
	}
	return reflect.Value{}
}

// isObject tells whether raw is a JSON object (not null, nor absent).
func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string { return pointerEscaper.Replace(k) }

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
