package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	raw := podsJSON(t, n)
	whole, err := decodedSize(raw, &corev1.Pod{}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	trimmed, err := decodedSize(raw, &corev1.Pod{}, trim)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("a pod: %d bytes whole, %d trimmed", whole/n, trimmed/n)
	g.Expect(whole).To(BeNumerically(">", n*1024), "the env value alone is 1 KiB a pod")
	g.Expect(trimmed).To(BeNumerically(">", n*64), "the name and labels stay")
	g.Expect(trimmed).To(BeNumerically("<", whole/3))
}

// podsJSON is n pods as the API server would serve them, each with 1 KiB
// of environment that the operator's cache trims away.
func podsJSON(t *testing.T, n int) [][]byte {
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
		if err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

// TestMain lets the test binary stand in for the bench's own when a test
// starts it as a child (bench cache-cost).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "cache-cost" {
		if err := cmdCacheCost(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCacheCostWeighsEachKindInAChild: the child weighs the pods as the
// cache keeps them (trimmed: more than their names, less than a third of the
// whole pod), and refuses a kind the operator does not cache.
func TestCacheCostWeighsEachKindInAChild(t *testing.T) {
	g := NewWithT(t)
	const n = 500
	raw := podsJSON(t, n)
	objs := make([]json.RawMessage, n)
	for i := range raw {
		objs[i] = raw[i]
	}
	whole, err := decodedSize(raw, &corev1.Pod{}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	added, err := decodedSizesInChild(context.Background(), []kindObjects{{Kind: "Pod", Objects: objs}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("a pod: %d bytes trimmed (in a child), %d whole", added["Pod"]/n, whole/n)
	g.Expect(added).To(HaveKey("Pod"))
	g.Expect(added["Pod"]).To(BeNumerically(">", n*64), "the name and labels stay")
	g.Expect(added["Pod"]).To(BeNumerically("<", whole/3))

	_, err = decodedSizesInChild(context.Background(), []kindObjects{{Kind: "Secret", Objects: objs}})
	g.Expect(err).To(HaveOccurred())
}
