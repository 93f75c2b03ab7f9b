package crdupgrade_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/example/memcached-operator/internal/crdupgrade"
)

// chartCRD is the CRD the chart ships, the one the hook applies.
func chartCRD(t testing.TB) *apiextv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "charts", "memcached-operator", "crds", "cache.example.com_memcacheds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdupgrade.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// without returns crd with the property at path (dots between names)
// removed from every version.
func without(crd *apiextv1.CustomResourceDefinition, path string) *apiextv1.CustomResourceDefinition {
	out := crd.DeepCopy()
	names := strings.Split(path, ".")
	for i := range out.Spec.Versions {
		s := out.Spec.Versions[i].Schema.OpenAPIV3Schema
		for _, n := range names[:len(names)-1] {
			child := s.Properties[n]
			s = &child
		}
		delete(s.Properties, names[len(names)-1])
	}
	return out
}

func TestDecodeRefusesWhatIsNotACRD(t *testing.T) {
	g := NewWithT(t)
	_, err := crdupgrade.Decode([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"))
	g.Expect(err).To(MatchError(ContainSubstring("not a named CustomResourceDefinition")))
	_, err = crdupgrade.Decode([]byte("kind: CustomResourceDefinition\nmetadata: {name: x}\nspec: {nope: 1}\n"))
	g.Expect(err).To(MatchError(ContainSubstring("unknown field")))
}

func TestPathsOfTheChartCRD(t *testing.T) {
	g := NewWithT(t)
	crd := chartCRD(t)
	paths := crdupgrade.Paths(&crd.Spec.Versions[0])
	g.Expect(paths).To(ContainElements("spec", "spec.size", "spec.tls.issuerRef.name", "status.conditions.[].type",
		"spec.podAnnotations", "status.nodes"))
	g.Expect(paths).To(ContainElement("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.[].matchExpressions"), "list items are walked")
}

func TestDropped(t *testing.T) {
	crd := chartCRD(t)
	crd.Status.StoredVersions = []string{"v1alpha1"}
	older := without(crd, "spec.networkPolicy")
	renamed := crd.DeepCopy()
	renamed.Spec.Versions[0].Name = "v1alpha2"
	for _, tc := range []struct {
		name       string
		live, next *apiextv1.CustomResourceDefinition
		want       []string
	}{
		{name: "same CRD", live: crd, next: crd},
		{name: "upgrade adds a field", live: older, next: crd},
		{name: "downgrade drops a field and everything under it", live: crd, next: older,
			want: []string{"v1alpha1: spec.networkPolicy", "v1alpha1: spec.networkPolicy.enabled", "v1alpha1: spec.networkPolicy.from",
				"v1beta1: spec.networkPolicy"}},
		{name: "a stored version disappears", live: crd, next: renamed, want: []string{"version v1alpha1 (objects are stored in it)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := crdupgrade.Dropped(tc.live, tc.next)
			if tc.want == nil {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(got).To(ContainElements(tc.want))
			for _, p := range got {
				g.Expect(p).To(Or(HavePrefix("version "), MatchRegexp(`^v1(alpha|beta)1: spec\.networkPolicy`)), "only what was removed is reported")
			}
		})
	}
}

func TestDroppedServedVersionWithoutObjects(t *testing.T) {
	g := NewWithT(t)
	crd := chartCRD(t)
	next := crd.DeepCopy()
	next.Spec.Versions = next.Spec.Versions[1:] // v1beta1 alone
	next.Spec.Versions[0].Storage = true
	crd.Status.StoredVersions = nil
	g.Expect(crdupgrade.Dropped(crd, next)).To(ConsistOf("version v1alpha1 (served)"))
}

// schemaFrom builds a schema tree from fuzz bytes: each byte picks a child
// name, its kind (object, list of objects, map of objects, leaf) and depth.
func schemaFrom(data []byte) *apiextv1.JSONSchemaProps {
	pos := 0
	next := func() byte {
		if pos >= len(data) {
			return 0
		}
		pos++
		return data[pos-1]
	}
	var build func(depth int) apiextv1.JSONSchemaProps
	build = func(depth int) apiextv1.JSONSchemaProps {
		s := apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{}}
		n := int(next() % 4)
		for range n {
			b := next()
			name := string(rune('a' + b%6))
			if depth >= 3 || b&0x30 == 0 {
				s.Properties[name] = apiextv1.JSONSchemaProps{Type: "string"}
				continue
			}
			child := build(depth + 1)
			switch b >> 6 {
			case 1:
				s.Properties[name] = apiextv1.JSONSchemaProps{Type: "array", Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &child}}
			case 2:
				s.Properties[name] = apiextv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &child}}
			default:
				s.Properties[name] = child
			}
		}
		return s
	}
	root := build(0)
	return &root
}

func crdOf(schema *apiextv1.JSONSchemaProps) *apiextv1.CustomResourceDefinition {
	return &apiextv1.CustomResourceDefinition{
		Spec: apiextv1.CustomResourceDefinitionSpec{Versions: []apiextv1.CustomResourceDefinitionVersion{{
			Name: "v1", Served: true, Storage: true,
			Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: schema},
		}}},
		Status: apiextv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}},
	}
}

// FuzzDropped: for any two schemas a and b, the upgrade a → b is refused
// exactly when a declares a field b does not; an upgrade to a schema that
// only adds fields (the union) is never refused; and what a → c loses was
// lost on the way a → b or b → c.
func FuzzDropped(f *testing.F) {
	f.Add([]byte{3, 0x15, 2, 1, 0x52, 1, 3}, []byte{2, 0x15, 1, 2})
	f.Add([]byte{1, 0x91, 2, 0, 4}, []byte{1, 0x91, 1, 0})
	f.Add([]byte{2, 0, 1}, []byte{0})
	f.Fuzz(func(t *testing.T, da, db []byte) {
		a, b := crdOf(schemaFrom(da)), crdOf(schemaFrom(db))
		pa, pb := crdupgrade.Paths(&a.Spec.Versions[0]), crdupgrade.Paths(&b.Spec.Versions[0])
		var want []string
		for _, p := range pa {
			if !slices.Contains(pb, p) {
				want = append(want, "v1: "+p)
			}
		}
		got := crdupgrade.Dropped(a, b)
		if !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
			t.Fatalf("Dropped = %v, want %v", got, want)
		}
		if d := crdupgrade.Dropped(a, a); len(d) != 0 {
			t.Fatalf("a CRD drops %v against itself", d)
		}
		union := crdOf(merge(schemaFrom(da), schemaFrom(db)))
		if d := crdupgrade.Dropped(a, union); len(d) != 0 {
			t.Fatalf("an upgrade that only adds fields drops %v", d)
		}
		c := crdOf(schemaFrom(append(slices.Clone(db), da...)))
		ab, bc := crdupgrade.Dropped(a, b), crdupgrade.Dropped(b, c)
		for _, p := range crdupgrade.Dropped(a, c) {
			if !slices.Contains(ab, p) && !slices.Contains(bc, p) {
				t.Fatalf("a → c drops %s, which neither a → b nor b → c drops", p)
			}
		}
	})
}

// merge adds b's properties into a, recursively: a schema that keeps all of
// a's fields.
func merge(a, b *apiextv1.JSONSchemaProps) *apiextv1.JSONSchemaProps {
	out := a.DeepCopy()
	if out.Properties == nil && len(b.Properties) > 0 {
		out.Properties = map[string]apiextv1.JSONSchemaProps{}
	}
	for name, bp := range b.Properties {
		ap, ok := out.Properties[name]
		if !ok {
			out.Properties[name] = bp
			continue
		}
		m := merge(&ap, &bp)
		if ap.Items == nil && bp.Items != nil {
			m.Items = bp.Items
		} else if ap.Items != nil && ap.Items.Schema != nil && bp.Items != nil && bp.Items.Schema != nil {
			m.Items = &apiextv1.JSONSchemaPropsOrArray{Schema: merge(ap.Items.Schema, bp.Items.Schema)}
		}
		if ap.AdditionalProperties == nil && bp.AdditionalProperties != nil {
			m.AdditionalProperties = bp.AdditionalProperties
		} else if ap.AdditionalProperties != nil && ap.AdditionalProperties.Schema != nil && bp.AdditionalProperties != nil && bp.AdditionalProperties.Schema != nil {
			m.AdditionalProperties = &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: merge(ap.AdditionalProperties.Schema, bp.AdditionalProperties.Schema)}
		}
		out.Properties[name] = *m
	}
	return out
}

func TestPathsWalksListsAndMaps(t *testing.T) {
	g := NewWithT(t)
	leaf := apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{"x": {Type: "string"}}}
	crd := crdOf(&apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
		"l": {Type: "array", Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &leaf}},
		"m": {Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &leaf}},
	}})
	g.Expect(crdupgrade.Paths(&crd.Spec.Versions[0])).To(Equal([]string{"l", "l.[].x", "m", "m.{}.x"}))
}

func TestRootsNameARemovedObjectOnce(t *testing.T) {
	g := NewWithT(t)
	g.Expect(crdupgrade.Roots([]string{"v1: a", "v1: a.b", "v1: a.b.[].c", "v1: ab", "v1: c.d", "version v2 (served)"})).
		To(Equal([]string{"v1: a", "v1: ab", "v1: c.d", "version v2 (served)"}))
}
