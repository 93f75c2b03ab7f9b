// Package crdupgrade upgrades the Memcached CRD from a chart's crds/ folder
// during `helm upgrade`, which Helm itself never does: it installs crds/ once
// and leaves them alone afterwards. The chart runs it as a pre-upgrade hook
// (templates/crd-upgrade.yaml), so a new chart's fields exist before the new
// operator starts using them.
//
// It never creates and never deletes a CRD, and it refuses an upgrade that
// would drop a field or a version the live CRD has: the API server prunes
// fields its schema no longer knows from every object it reads, so such a
// "downgrade" would silently lose what users stored.
package crdupgrade

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Decode reads one CustomResourceDefinition from YAML or JSON.
func Decode(data []byte) (*apiextv1.CustomResourceDefinition, error) {
	crd := &apiextv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("decoding the CRD: %w", err)
	}
	if crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
		return nil, fmt.Errorf("not a named CustomResourceDefinition (kind %q, name %q)", crd.Kind, crd.Name)
	}
	return crd, nil
}

// Paths lists every field a version's schema declares, as dotted paths from
// the object's root ("spec.tls.issuerRef.name"); "[]" stands for the items of
// a list and "{}" for the values of a map.
func Paths(v *apiextv1.CustomResourceDefinitionVersion) []string {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil
	}
	var out []string
	var walk func(prefix string, s *apiextv1.JSONSchemaProps)
	walk = func(prefix string, s *apiextv1.JSONSchemaProps) {
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			p := join(prefix, name)
			out = append(out, p)
			child := s.Properties[name]
			walk(p, &child)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(join(prefix, "[]"), s.Items.Schema)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(join(prefix, "{}"), s.AdditionalProperties.Schema)
		}
	}
	walk("", v.Schema.OpenAPIV3Schema)
	return out
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// Dropped lists what applying next over live would lose: every version live
// has stored objects in (status.storedVersions) or serves that next does not
// have, and every field of a version of live that the same version of next
// no longer declares. Empty means next keeps everything live can hold.
func Dropped(live, next *apiextv1.CustomResourceDefinition) []string {
	nextVersions := map[string]*apiextv1.CustomResourceDefinitionVersion{}
	for i := range next.Spec.Versions {
		nextVersions[next.Spec.Versions[i].Name] = &next.Spec.Versions[i]
	}
	var lost []string
	for _, stored := range live.Status.StoredVersions {
		if nextVersions[stored] == nil {
			lost = append(lost, "version "+stored+" (objects are stored in it)")
		}
	}
	for i := range live.Spec.Versions {
		lv := &live.Spec.Versions[i]
		nv := nextVersions[lv.Name]
		if nv == nil {
			if lv.Served && !slices.Contains(live.Status.StoredVersions, lv.Name) {
				lost = append(lost, "version "+lv.Name+" (served)")
			}
			continue
		}
		kept := map[string]bool{}
		for _, p := range Paths(nv) {
			kept[p] = true
		}
		for _, p := range Paths(lv) {
			if !kept[p] {
				lost = append(lost, lv.Name+": "+p)
			}
		}
	}
	sort.Strings(lost)
	return slices.Compact(lost)
}

// ErrWouldDrop is Upgrade's refusal: the chart's CRD is older than the
// cluster's, or lost fields.
var ErrWouldDrop = errors.New("the chart's CRD would drop fields or versions the cluster's CRD has")

// Outcome is what Upgrade did.
type Outcome string

const (
	// Missing means the cluster has no such CRD (installed with --skip-crds, or
	// removed): nothing is created, the one who chose that keeps it.
	Missing Outcome = "missing"
	// Unchanged means the cluster's CRD already has the chart's spec; nothing was written.
	Unchanged Outcome = "unchanged"
	// Updated means the cluster's CRD now has the chart's spec.
	Updated Outcome = "updated"
)

// Upgrade replaces the spec of the cluster's CRD with next's. It writes the
// whole spec with an update, not an apply: fields the new chart removed on
// purpose (a default, a validation) must go too, and a server-side apply
// leaves in place whatever another manager (Helm's install) set. Labels and
// annotations of next are added; others are kept.
func Upgrade(ctx context.Context, c client.Client, next *apiextv1.CustomResourceDefinition) (Outcome, error) {
	var outcome Outcome
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: next.Name}, live); apierrors.IsNotFound(err) {
			outcome = Missing
			return nil
		} else if err != nil {
			return fmt.Errorf("reading CRD %s: %w", next.Name, err)
		}
		if lost := Dropped(live, next); len(lost) > 0 {
			return fmt.Errorf("%w: %s", ErrWouldDrop, strings.Join(roots(lost), ", "))
		}
		updated := live.DeepCopy()
		updated.Spec = next.Spec
		updated.Labels = merged(live.Labels, next.Labels)
		updated.Annotations = merged(live.Annotations, next.Annotations)
		// The server fills defaults into the spec it stores (conversion
		// strategy, list types): compare what it keeps, after a dry run.
		if err := c.Update(ctx, updated, client.DryRunAll); err != nil {
			return fmt.Errorf("checking the update of CRD %s: %w", next.Name, err)
		}
		if equalStored(live, updated) {
			outcome = Unchanged
			return nil
		}
		if err := c.Update(ctx, updated); err != nil {
			return err
		}
		outcome = Updated
		return nil
	})
	return outcome, err
}

// roots keeps, of sorted dropped paths, those whose parent is not dropped
// too: a removed object is named once, not with each field under it.
func roots(lost []string) []string {
	var out []string
	for _, p := range lost {
		if n := len(out); n > 0 && strings.HasPrefix(p, out[n-1]+".") {
			continue
		}
		out = append(out, p)
	}
	return out
}

func merged(live, next map[string]string) map[string]string {
	if len(next) == 0 {
		return live
	}
	out := maps.Clone(live)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, next)
	return out
}

// equalStored tells whether the dry-run result of an update stores exactly
// what live already holds: its spec, labels and annotations.
func equalStored(live, dryRun *apiextv1.CustomResourceDefinition) bool {
	return equality.Semantic.DeepEqual(live.Spec, dryRun.Spec) &&
		equality.Semantic.DeepEqual(live.Labels, dryRun.Labels) &&
		equality.Semantic.DeepEqual(live.Annotations, dryRun.Annotations)
}

// MigrateStorage rewrites every object of the CRD in its storage version,
// then leaves that version alone in status.storedVersions: only then may a
// later chart stop serving the others without losing what they stored.
// Nothing is written when the storage version is already the only one
// stored. Each object is written back as read, so a no-op for the API
// server but for the version it encodes the object in.
func MigrateStorage(ctx context.Context, c client.Client, name string) (migrated int, err error) {
	crd := &apiextv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return 0, fmt.Errorf("reading CRD %s: %w", name, err)
	}
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextv1.CustomResourceDefinitionVersion) bool { return v.Storage })
	if i < 0 {
		return 0, fmt.Errorf("CRD %s has no storage version", name)
	}
	storage := crd.Spec.Versions[i].Name
	if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		return 0, nil
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.ListKind}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk)
	for {
		if err := c.List(ctx, list, client.Limit(100), client.Continue(list.GetContinue())); err != nil {
			return migrated, fmt.Errorf("listing %s: %w", crd.Spec.Names.Plural, err)
		}
		for i := range list.Items {
			if err := rewrite(ctx, c, &list.Items[i]); err != nil {
				return migrated, err
			}
			migrated++
		}
		if list.GetContinue() == "" {
			break
		}
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		crd.Status.StoredVersions = []string{storage}
		return c.Status().Update(ctx, crd)
	})
	if err != nil {
		return migrated, fmt.Errorf("recording %s as the only stored version of CRD %s: %w", storage, name, err)
	}
	return migrated, nil
}

// rewrite writes obj back unchanged, reading it again after a conflict; an
// object deleted meanwhile needs no migration.
func rewrite(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := c.Update(ctx, obj)
		if apierrors.IsConflict(err) {
			if getErr := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); getErr != nil {
				return getErr
			}
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rewriting %s %s/%s in the storage version: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
