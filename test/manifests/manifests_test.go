package manifests

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestDecode: documents in either spelling, empty ones skipped, a broken
// one an error rather than a short list.
func TestDecode(t *testing.T) {
	g := NewWithT(t)
	objs, err := Decode("---\n# a comment only\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n\n---\n{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"b\"}}\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(2))
	g.Expect(objs[0].GetKind()).To(Equal("ConfigMap"))
	g.Expect(objs[1].GetName()).To(Equal("b"))

	objs, err = Decode("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(BeEmpty())

	_, err = Decode("kind: ConfigMap\n---\nkind: [unclosed\n")
	g.Expect(err).To(MatchError(ContainSubstring("decoding manifest")))
}
