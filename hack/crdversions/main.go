// Command crdversions serves a CRD's storage version under more version
// names, with the same schema (conversion None): `make manifests` runs it
// after controller-gen, which writes one version per Go package.
//
//	go run ./hack/crdversions FILE VERSION...
package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: crdversions FILE VERSION...")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdversions:", err)
		os.Exit(1)
	}
}

func run(file string, names []string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := Serve(data, names)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, out, 0o644)
}

// Serve adds to the CRD in data a served, non-storage copy of its storage
// version under each name; a version already there under that name is
// replaced, so a second run changes nothing.
func Serve(data []byte, names []string) ([]byte, error) {
	crd := &apiextv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(bytes.TrimPrefix(data, []byte("---\n")), crd); err != nil {
		return nil, err
	}
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextv1.CustomResourceDefinitionVersion) bool { return v.Storage })
	if i < 0 {
		return nil, fmt.Errorf("no storage version")
	}
	storage := crd.Spec.Versions[i]
	crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextv1.CustomResourceDefinitionVersion) bool {
		return !v.Storage && slices.Contains(names, v.Name)
	})
	for _, name := range names {
		if name == storage.Name {
			return nil, fmt.Errorf("%s is the storage version", name)
		}
		v := *storage.DeepCopy()
		v.Name, v.Storage, v.Served = name, false, true
		// Without descriptions: kubectl explain reads the storage version's,
		// and the CRD stays small enough for a client-side kubectl apply
		// (its last-applied annotation holds at most 256 KiB).
		dropDescriptions(v.Schema.OpenAPIV3Schema)
		crd.Spec.Versions = append(crd.Spec.Versions, v)
	}
	// As controller-gen writes it: no status, no creationTimestamp.
	j, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}

func dropDescriptions(s *apiextv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	s.Description = ""
	for k, p := range s.Properties {
		dropDescriptions(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		dropDescriptions(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			dropDescriptions(&s.Items.JSONSchemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		dropDescriptions(s.AdditionalProperties.Schema)
	}
	for _, list := range [][]apiextv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			dropDescriptions(&list[i])
		}
	}
	dropDescriptions(s.Not)
}
