// Command metrics-server is metrics-server's own command with one change.
// Its generated OpenAPI definitions are keyed by Go type paths
// (k8s.io/metrics/...), while the Kubernetes libraries of the testbed's
// release look models up by their REST names (io.k8s.metrics...): without
// the renaming below the server panics at start.
package main

import (
	"os"

	"github.com/spf13/cobra"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/logs"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/metrics-server/pkg/api"
	generatedopenapi "sigs.k8s.io/metrics-server/pkg/api/generated/openapi"

	"sigs.k8s.io/metrics-server/cmd/metrics-server/app/options"
)

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use:          "metrics-server",
		SilenceUsage: true,
		RunE:         func(*cobra.Command, []string) error { return run(opts) },
	}
	for _, fs := range opts.Flags().FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}

func run(o *options.Options) error {
	if errs := o.Validate(); len(errs) > 0 {
		return errs[0]
	}
	config, err := o.ServerConfig()
	if err != nil {
		return err
	}
	// As options.ServerConfig builds them, but from the renamed definitions.
	namer := openapinamer.NewDefinitionNamer(api.Scheme)
	v2, v3 := config.Apiserver.OpenAPIConfig.Info, config.Apiserver.OpenAPIV3Config.Info
	config.Apiserver.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(restNamed, namer)
	config.Apiserver.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(restNamed, namer)
	config.Apiserver.OpenAPIConfig.Info, config.Apiserver.OpenAPIV3Config.Info = v2, v3
	s, err := config.Complete()
	if err != nil {
		return err
	}
	return s.RunUntil(genericapiserver.SetupSignalHandler())
}

// restNamed is the generated definitions, keyed and referenced by REST names.
func restNamed(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := generatedopenapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return ref(util.ToRESTFriendlyName(name))
	})
	out := make(map[string]common.OpenAPIDefinition, len(defs))
	for name, def := range defs {
		for i, dep := range def.Dependencies {
			def.Dependencies[i] = util.ToRESTFriendlyName(dep)
		}
		out[util.ToRESTFriendlyName(name)] = def
	}
	return out
}
