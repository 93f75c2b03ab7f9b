//go:build tools

// Package hack pins modules that the project's tests and tooling import before
// any non-test code does, so `go mod tidy` keeps them.
package hack

import (
	_ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	_ "github.com/google/go-containerregistry/pkg/v1/layout"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "helm.sh/helm/v3/pkg/action"
	_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
