package main

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestChartCRDServesV1beta1: the chart's CRD stores v1alpha1 and serves
// v1beta1 with the same schema but for descriptions, the same printer
// columns and subresources; `make manifests` leaves it as committed.
func TestChartCRDServesV1beta1(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../../charts/memcached-operator/crds/cache.example.com_memcacheds.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	again, err := Serve(data, []string{"v1beta1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(again)).To(Equal(string(data)), "a second run changes nothing")

	crd := &apiextv1.CustomResourceDefinition{}
	g.Expect(yaml.Unmarshal(data, crd)).To(Succeed())
	g.Expect(crd.Spec.Versions).To(HaveLen(2))
	alpha, beta := crd.Spec.Versions[0], crd.Spec.Versions[1]
	g.Expect(alpha.Name).To(Equal("v1alpha1"))
	g.Expect(alpha.Storage && alpha.Served).To(BeTrue())
	g.Expect(beta.Name).To(Equal("v1beta1"))
	g.Expect(beta.Served).To(BeTrue())
	g.Expect(beta.Storage).To(BeFalse())
	g.Expect(crd.Spec.Conversion).To(Or(BeNil(), HaveField("Strategy", apiextv1.NoneConverter)))
	g.Expect(beta.AdditionalPrinterColumns).To(Equal(alpha.AdditionalPrinterColumns))
	g.Expect(beta.Subresources).To(Equal(alpha.Subresources))
	schema := alpha.Schema.OpenAPIV3Schema.DeepCopy()
	dropDescriptions(schema)
	g.Expect(beta.Schema.OpenAPIV3Schema).To(Equal(schema))
	g.Expect(alpha.Schema.OpenAPIV3Schema.Description).NotTo(BeEmpty(), "the stored version keeps its descriptions")
}

func TestServeRefusesTheStorageVersionsName(t *testing.T) {
	data, err := os.ReadFile("../../charts/memcached-operator/crds/cache.example.com_memcacheds.yaml")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, err = Serve(data, []string{"v1alpha1"})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("storage version")))
}
