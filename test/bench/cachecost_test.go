package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/memcached"
)

// TestDecodedSizeWeighsWhatTheCacheKeeps: a pod the operator's cache trims
// to its placement weighs a fraction of the whole pod, and each weighs at
// least what its kept strings take.
func TestDecodedSizeWeighsWhatTheCacheKeeps(t *testing.T) {
	g := NewWithT(t)
	var trim toolscache.TransformFunc
	for obj, by := range memcached.CacheOptions(nil).ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			trim = by.Transform
		}
	}
	g.Expect(trim).NotTo(BeNil())

	const n = 500
	raw := make([][]byte, n)
	for i := range raw {
		p := corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fleet-%d-abcde", i), Namespace: "bench",
				Labels: map[string]string{desired.LabelManagedBy: desired.ManagedByValue, "app.kubernetes.io/instance": fmt.Sprintf("fleet-%d", i)}},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{
				Name: "memcached", Image: "memcached:1.6", Args: strings.Fields(strings.Repeat("-o modern ", 50)),
				Env: []corev1.EnvVar{{Name: "A", Value: strings.Repeat("x", 1024)}},
			}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
		var err error
		raw[i], err = json.Marshal(&p)
		g.Expect(err).NotTo(HaveOccurred())
	}
	whole, err := decodedSize(raw, &corev1.Pod{}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	trimmed, err := decodedSize(raw, &corev1.Pod{}, trim)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("a pod: %d bytes whole, %d trimmed", whole/n, trimmed/n)
	g.Expect(whole).To(BeNumerically(">", n*1024), "the env value alone is 1 KiB a pod")
	g.Expect(trimmed).To(BeNumerically(">", n*64), "the name and labels stay")
	g.Expect(trimmed).To(BeNumerically("<", whole/3))
}
