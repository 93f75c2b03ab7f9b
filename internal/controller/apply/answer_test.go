package apply

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// TestTheAnswerIsDecodedIntoACopy: the client decodes the API server's
// answer to an apply into the configuration it sent, writing into the maps
// it finds there. A builder's configuration may share a map with the
// cached Memcached or with its package's defaults, so the answer goes into
// a copy: the shared map keeps its values, and live still gets the answer.
// For a creation and for a drift repair.
func TestTheAnswerIsDecodedIntoACopy(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", ResourceVersion: "42"}}
	ours := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "cache", UID: "uid-1", Controller: ptr.To(true)}}}}
	// The answer as the API server would give it, with a limit the
	// desired object does not hold (a defaulting webhook's, say).
	answer := `{"metadata":{"name":"cache","namespace":"ns","resourceVersion":"7"},"spec":{"template":{"spec":{"containers":[{"name":"memcached","resources":{"limits":{"memory":"999Mi"}}}]}}}}`
	for name, existing := range map[string][]client.Object{"creation": nil, "drift repair": {ours}} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(existing...).WithInterceptorFuncs(interceptor.Funcs{
				Apply: func(_ context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
					return json.Unmarshal([]byte(answer), obj)
				}}).Build()
			shared := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
			desired := appsv1ac.Deployment("cache", "ns").WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("memcached").
					WithResources(corev1ac.ResourceRequirements().WithLimits(shared))))))
			live := &appsv1.Deployment{}
			_, err := IfChanged(context.Background(), &Applier{Client: c}, mc, "Deployment", live, desired, appsv1ac.ExtractDeployment)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(shared.Memory().String()).To(Equal("64Mi"), "the shared map is not written")
			g.Expect(live.Spec.Template.Spec.Containers).To(HaveLen(1))
			g.Expect(live.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("999Mi"), "live holds the answer")
			g.Expect(live.ResourceVersion).To(Equal("7"))
		})
	}
}
