package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

var testDefaults = policy.Config{DefaultImage: "memcached:1.6", ExporterImage: "operator:1", AppArmorProfile: corev1.AppArmorProfileTypeRuntimeDefault}

// genericDefaulter gives the same defaults through controller-runtime's
// generic defaulter, which patches the whole object to its Go encoding: the
// reference Defaulter's patches are held to.
type genericDefaulter struct{ Config policy.Config }

func (g genericDefaulter) Default(ctx context.Context, mc *cachev1alpha1.Memcached) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return err
	}
	(&Defaulter{Config: g.Config}).Default(req.Operation, &mc.Spec)
	return nil
}

// For generated specs, as users spell them, Defaulter's patch gives the
// object the generic defaulter gives, changes no value the user wrote and
// nothing outside spec, and a second pass finds nothing to do.
func TestDefaulterPatchesOnlyTheDefaults(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 1))
	rewritten := 0
	for i := range 2000 {
		op := []admissionv1.Operation{admissionv1.Create, admissionv1.Update}[r.IntN(2)]
		spec, present := genSpec(r)
		raw := object(t, spec, present)
		if checkDefaulter(t, fmt.Sprintf("case %d (%s) %s", i, op, raw), op, raw) {
			rewritten++
		}
	}
	// The generator must spell values the Go type rewrites, or the check
	// that Defaulter keeps them could not fail.
	if rewritten == 0 {
		t.Error("the generic defaulter rewrote no user value in any case: the generator spells none the Go type changes")
	}
}

// FuzzDefaulter holds the same properties for any spec bytes.
func FuzzDefaulter(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"size":3}`, `{"image":null,"size":2}`,
		`{"resources":{"limits":{"cpu":"1000m","memory":"262144Ki"}}}`,
		`{"auth":{}}`, `{"auth":{"secretRef":{"name":"a"}}}`,
		`{"tls":{"enabled":true,"issuerRef":{"name":"ca"}}}`,
		`{"monitoring":{"exporter":{"enabled":true,"resources":{"requests":{"cpu":"0.01"}}}}}`,
		`{"warmRestart":{"enabled":true},"workload":"StatefulSet"}`,
		`{"podLabels":{"a/b~c":"d"},"extraArgs":[]}`,
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, spec string, create bool) {
		var tree any
		if kjson.UnmarshalCaseSensitivePreserveInts([]byte(spec), &tree) != nil {
			return
		}
		op := admissionv1.Update
		if create {
			op = admissionv1.Create
		}
		checkDefaulter(t, fmt.Sprintf("%s %s", op, spec), op, object(t, tree, true))
	})
}

// checkDefaulter admits raw with Defaulter and with the generic defaulter
// and checks the properties above; it tells whether the generic one
// rewrote a value the user wrote.
func checkDefaulter(t *testing.T, name string, op admissionv1.Operation, raw []byte) (rewritten bool) {
	t.Helper()
	ours, ok := admit(t, &Defaulter{Config: testDefaults}, op, raw)
	generic, gok := admit(t, admission.WithDefaulter[*cachev1alpha1.Memcached](testScheme(t), genericDefaulter{Config: testDefaults}), op, raw)
	if ok != gok {
		t.Fatalf("%s: admitted %v, the generic defaulter %v", name, ok, gok)
	}
	if !ok {
		return false
	}
	if a, b := decodeMemcached(t, ours), decodeMemcached(t, generic); !apiequality.Semantic.DeepEqual(a, b) {
		t.Fatalf("%s: defaulted to\n%s\nthe generic defaulter to\n%s", name, ours, generic)
	}
	in, out := mustTree(t, raw), mustTree(t, ours)
	if path, ok := keeps(out["spec"], in["spec"], "/spec"); !ok {
		t.Fatalf("%s: changed %s: %s", name, path, ours)
	}
	_, kept := keeps(mustTree(t, generic)["spec"], in["spec"], "/spec")
	delete(in, "spec")
	delete(out, "spec")
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("%s: changed more than spec: %v", name, out)
	}
	if again, _ := admit(t, &Defaulter{Config: testDefaults}, op, ours); string(again) != string(ours) {
		t.Fatalf("%s: a second pass changed\n%s\nto\n%s", name, ours, again)
	}
	return !kept
}

// admit runs h on a review of raw and applies its patch: the object it
// admits, or ok false when it refused.
func admit(t *testing.T, h admission.Handler, op admissionv1.Operation, raw []byte) (out []byte, ok bool) {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "u", Operation: op, Name: "cache", Namespace: "team-a",
		Kind:   testKind,
		Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw},
	}}
	resp := h.Handle(context.Background(), req)
	if !resp.Allowed {
		return nil, false
	}
	if len(resp.Patches) == 0 {
		return raw, true
	}
	p, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err = patch.Apply(raw)
	if err != nil {
		t.Fatalf("patch %s does not apply to %s: %v", p, raw, err)
	}
	return out, true
}

// keeps tells whether got holds every value want holds but null (a null
// is an empty field defaulting may fill), and names the first it changed.
func keeps(got, want any, path string) (string, bool) {
	switch w := want.(type) {
	case nil:
		return "", true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range w {
			if p, ok := keeps(g[k], v, path+"/"+k); !ok {
				return p, false
			}
		}
		return "", true
	default:
		return path, reflect.DeepEqual(got, want)
	}
}

// genSpec is a spec as a user might write it: each field present or not,
// some null, quantities in the spellings the API server accepts, parents
// without the children defaulting fills. present is false for no spec.
func genSpec(r *rand.Rand) (spec map[string]any, present bool) {
	if r.IntN(20) == 0 {
		return nil, r.IntN(2) == 0 // no spec, or spec: null
	}
	s := map[string]any{}
	maybe := func(k string, values ...any) {
		switch n := r.IntN(len(values) + 2); {
		case n < len(values):
			s[k] = values[n]
		case n == len(values):
			s[k] = nil
		}
	}
	maybe("size", 0, 1, 3)
	maybe("image", "mine:1")
	maybe("imagePullPolicy", "Always")
	maybe("port", 11311)
	maybe("workload", "Deployment", "StatefulSet")
	maybe("maxConnections", 100)
	maybe("maxItemSize", "2m")
	maybe("verbosity", 1)
	maybe("threads", 2)
	maybe("memoryLimitMB", 100)
	maybe("nodeLossTolerationSeconds", 0, 300)
	maybe("appArmorProfile", "Unconfined")
	maybe("extraArgs", []any{}, []any{"-R", "20"})
	maybe("podLabels", map[string]any{}, map[string]any{"team/a": "x"})
	maybe("resources", genResources(r), map[string]any{})
	maybe("podDisruptionBudget", map[string]any{"minAvailable": "50%"}, map[string]any{"maxUnavailable": 1})
	maybe("monitoring", map[string]any{}, map[string]any{
		"exporter":       pick(r, map[string]any{"enabled": true}, map[string]any{"enabled": true, "image": "exp:1", "resources": genResources(r)}, map[string]any{"enabled": false}, map[string]any{}),
		"serviceMonitor": pick(r, map[string]any{"enabled": true, "interval": "30s"}, nil),
	})
	maybe("auth", map[string]any{}, map[string]any{"secretRef": map[string]any{"name": "creds"}},
		map[string]any{"secretRef": map[string]any{"name": "creds", "key": "file"}, "reloaderImage": "rel:1"})
	maybe("warmRestart", map[string]any{}, map[string]any{"enabled": true}, map[string]any{"enabled": true, "launcherImage": "l:1"}, map[string]any{"enabled": false})
	maybe("tls", map[string]any{}, map[string]any{"enabled": true},
		map[string]any{"enabled": true, "issuerRef": map[string]any{"name": "ca"}, "clientAuth": "Require"},
		map[string]any{"enabled": true, "issuerRef": map[string]any{"name": "ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}})
	return s, true
}

// genResources spells quantities as users do, some in forms the Go type
// writes back differently ("1000m" as "1", "262144Ki" as "256Mi").
func genResources(r *rand.Rand) map[string]any {
	list := func() map[string]any {
		l := map[string]any{}
		if v := pick(r, "1000m", "1", "0.5", "500m", "2", nil); v != nil {
			l["cpu"] = v
		}
		if v := pick(r, "256Mi", "262144Ki", "268435456", "0.25Gi", "1G", nil); v != nil {
			l["memory"] = v
		}
		return l
	}
	res := map[string]any{}
	if r.IntN(2) == 0 {
		res["limits"] = list()
	}
	if r.IntN(2) == 0 {
		res["requests"] = list()
	}
	return res
}

func pick(r *rand.Rand, values ...any) any { return values[r.IntN(len(values))] }

var testKind = metav1.GroupVersionKind{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached"}

// object is a Memcached as the API server sends it to the webhook, with
// metadata a real request carries (managed fields included).
func object(t *testing.T, spec any, present bool) []byte {
	t.Helper()
	obj := map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{
			"name": "cache", "namespace": "team-a", "uid": "1d2c", "generation": 1,
			"managedFields": []any{map[string]any{
				"manager": "kubectl", "operation": "Apply", "apiVersion": "cache.example.com/v1alpha1",
				"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{"f:size": map[string]any{}}},
			}},
		},
	}
	if present {
		obj["spec"] = spec
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func decodeMemcached(t *testing.T, raw []byte) *cachev1alpha1.Memcached {
	t.Helper()
	mc := &cachev1alpha1.Memcached{}
	unmarshal(t, raw, mc)
	return mc
}

func mustTree(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	unmarshal(t, raw, &m)
	return m
}

func unmarshal(t *testing.T, raw []byte, into any) {
	t.Helper()
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, into); err != nil {
		t.Fatalf("%s: %v", strings.TrimSpace(string(raw)), err)
	}
}

// BenchmarkDefaulter measures defaulting one new Memcached that gave only
// its size, through Defaulter and through the generic defaulter (go test
// ./webhooks -run X -bench Defaulter -benchmem).
func BenchmarkDefaulter(b *testing.B) {
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "cache", "namespace": "team-a"},
		"spec":     map[string]any{"size": 3},
	})
	if err != nil {
		b.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "u", Operation: admissionv1.Create, Name: "cache", Namespace: "team-a", Kind: testKind,
		Object: runtime.RawExtension{Raw: raw},
	}}
	for name, h := range map[string]admission.Handler{
		"Defaulter": &Defaulter{Config: testDefaults},
		"generic":   admission.WithDefaulter[*cachev1alpha1.Memcached](testScheme(b), genericDefaulter{Config: testDefaults}),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if resp := h.Handle(context.Background(), req); !resp.Allowed || len(resp.Patches) == 0 {
					b.Fatalf("not defaulted: %+v", resp)
				}
			}
		})
	}
}
