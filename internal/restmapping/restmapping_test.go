package restmapping

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// counting is a RESTMapper that counts the RESTMapping calls that reach it.
type counting struct {
	*meta.DefaultRESTMapper
	calls atomic.Int32
}

func (c *counting) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls.Add(1)
	return c.DefaultRESTMapper.RESTMapping(gk, versions...)
}

var (
	deployment = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	memcached  = schema.GroupVersionKind{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached"}
	node       = schema.GroupVersionKind{Version: "v1", Kind: "Node"}
)

func newCounting(kinds ...schema.GroupVersionKind) *counting {
	c := &counting{DefaultRESTMapper: meta.NewDefaultRESTMapper([]schema.GroupVersion{deployment.GroupVersion(), node.GroupVersion()})}
	for _, k := range kinds {
		scope := meta.RESTScopeNamespace
		if k == node {
			scope = meta.RESTScopeRoot
		}
		c.Add(k, scope)
	}
	return c
}

func TestMemoAsksTheMapperOnceAKind(t *testing.T) {
	g := NewWithT(t)
	base := newCounting(deployment, node)
	memo := NewMemo(base)
	want, err := base.DefaultRESTMapper.RESTMapping(deployment.GroupKind(), "v1")
	g.Expect(err).NotTo(HaveOccurred())

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				got, err := memo.RESTMapping(deployment.GroupKind(), "v1")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(want))
			}
		})
	}
	wg.Wait()
	// Concurrent first calls may each reach the mapper; later ones never do.
	g.Expect(base.calls.Load()).To(BeNumerically("<=", 8))
	first := base.calls.Load()
	_, _ = memo.RESTMapping(deployment.GroupKind(), "v1")
	g.Expect(base.calls.Load()).To(Equal(first))

	// The scope a namespaced cache asks about, for each scope.
	for gvk, scope := range map[schema.GroupVersionKind]meta.RESTScopeName{deployment: meta.RESTScopeNameNamespace, node: meta.RESTScopeNameRoot} {
		for range 2 {
			m, err := memo.RESTMapping(gvk.GroupKind(), gvk.Version)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m.Scope.Name()).To(Equal(scope), "%v", gvk)
			g.Expect(m.GroupVersionKind).To(Equal(gvk))
		}
	}
}

func TestMemoKeysOnGroupKindAndVersions(t *testing.T) {
	g := NewWithT(t)
	beta := schema.GroupVersionKind{Group: "apps", Version: "v1beta2", Kind: "Deployment"}
	base := newCounting(deployment, beta)
	memo := NewMemo(base)
	for _, versions := range [][]string{{"v1"}, {"v1beta2"}, nil, {"v1beta2", "v1"}} {
		m, err := memo.RESTMapping(deployment.GroupKind(), versions...)
		g.Expect(err).NotTo(HaveOccurred())
		want, _ := base.DefaultRESTMapper.RESTMapping(deployment.GroupKind(), versions...)
		g.Expect(m.GroupVersionKind).To(Equal(want.GroupVersionKind), "%v", versions)
	}
	g.Expect(base.calls.Load()).To(BeEquivalentTo(4), "each list of versions is its own question")
	// A kind of another group with the same name is another kind.
	_, err := memo.RESTMapping(schema.GroupKind{Group: "extensions", Kind: "Deployment"}, "v1")
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue())
}

// A kind the API server does not serve yet (a CRD installed after the
// operator started) is found once it is served: errors are not remembered.
func TestMemoDoesNotRememberErrors(t *testing.T) {
	g := NewWithT(t)
	base := newCounting(deployment)
	memo := NewMemo(base)
	_, err := memo.RESTMapping(memcached.GroupKind(), memcached.Version)
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue())
	_, err = memo.RESTMapping(memcached.GroupKind(), memcached.Version)
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue())
	g.Expect(base.calls.Load()).To(BeEquivalentTo(2))

	base.Add(memcached, meta.RESTScopeNamespace)
	m, err := memo.RESTMapping(memcached.GroupKind(), memcached.Version)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Resource.Resource).To(Equal("memcacheds"))
	_, _ = memo.RESTMapping(memcached.GroupKind(), memcached.Version)
	g.Expect(base.calls.Load()).To(BeEquivalentTo(3))
}

// A caller that changes what it was given does not change the next answer.
func TestMemoHandsOutCopies(t *testing.T) {
	g := NewWithT(t)
	memo := NewMemo(newCounting(deployment))
	m, err := memo.RESTMapping(deployment.GroupKind(), "v1")
	g.Expect(err).NotTo(HaveOccurred())
	m.Resource.Resource = "changed"
	again, err := memo.RESTMapping(deployment.GroupKind(), "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Resource.Resource).To(Equal("deployments"))
	again.Resource.Resource = "changed"
	third, _ := memo.RESTMapping(deployment.GroupKind(), "v1")
	g.Expect(third.Resource.Resource).To(Equal("deployments"))
}

func TestProvider(t *testing.T) {
	g := NewWithT(t)
	base := newCounting(deployment)
	provide := Provider(func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return base, nil })
	mapper, err := provide(&rest.Config{}, http.DefaultClient)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mapper).To(BeAssignableToTypeOf(&Memo{}))
	for range 3 {
		_, err = mapper.RESTMapping(deployment.GroupKind(), "v1")
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(base.calls.Load()).To(BeEquivalentTo(1))
	// Every other method is the wrapped mapper's.
	gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Group: "apps", Resource: "deployments"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gvr.Version).To(Equal("v1"))

	failing := Provider(func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return nil, errors.New("discovery down") })
	_, err = failing(&rest.Config{}, http.DefaultClient)
	g.Expect(err).To(MatchError("discovery down"))
}

func TestResetBuildsTheMapperAnew(t *testing.T) {
	g := NewWithT(t)
	withKind, without := newCounting(deployment, memcached), newCounting(deployment)
	bases := []meta.RESTMapper{withKind, without}
	provide := Provider(func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
		b := bases[0]
		bases = bases[1:]
		return b, nil
	})
	m, err := provide(nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = m.RESTMapping(memcached.GroupKind(), memcached.Version)
	g.Expect(err).NotTo(HaveOccurred())

	// The CRD is gone: the fresh mapper's discovery no longer has it.
	m.(meta.ResettableRESTMapper).Reset()
	_, err = m.RESTMapping(memcached.GroupKind(), memcached.Version)
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue(), "the remembered mapping is forgotten: %v", err)
	g.Expect(without.calls.Load()).To(Equal(int32(1)))
	_, err = m.RESTMapping(deployment.GroupKind(), deployment.Version)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestResetKeepsTheMapperWhenANewOneFails(t *testing.T) {
	g := NewWithT(t)
	base := newCounting(deployment)
	builds := 0
	provide := Provider(func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
		if builds++; builds > 1 {
			return nil, errors.New("discovery failed")
		}
		return base, nil
	})
	m, err := provide(nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, _ = m.RESTMapping(deployment.GroupKind(), deployment.Version)
	m.(meta.ResettableRESTMapper).Reset()
	_, err = m.RESTMapping(deployment.GroupKind(), deployment.Version)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(base.calls.Load()).To(Equal(int32(2)), "asked again: the memory was cleared, the mapper kept")
}
