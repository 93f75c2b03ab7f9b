package memcached

import (
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// unitScheme knows the built-in kinds and the Memcached, for fake clients.
func unitScheme(g Gomega) *runtime.Scheme {
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	return scheme
}
