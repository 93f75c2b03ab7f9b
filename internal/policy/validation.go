package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// Limits are the bounds the operator's flags put on a Memcached.
type Limits struct {
	// MaxSize is the largest spec.size accepted (--max-size).
	MaxSize int32
}

// Warnings are legal but risky choices, returned to the client as admission warnings.
type Warnings []string

// ReservedPodLabels are the labels the operator selects its pods by; podLabels
// may not override them or the Deployment would lose its pods.
var ReservedPodLabels = []string{
	"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
}

// MinWarmMemoryMB is the least item memory memcached starts with on a
// memory file: it preallocates a 1 MB page for each of up to 63 slab
// classes.
const MinWarmMemoryMB = 64

// RestartWarning is returned for an update that changes the pod template.
const RestartWarning = "this change replaces every memcached pod, one at a time; each new pod starts with an empty cache"

// Validate checks everything about a Memcached that needs neither the
// operator's flags nor its previous version: a Memcached that passes builds
// a Deployment, Service and PodDisruptionBudget the API server accepts.
// Admission and the controller both call it, so the rules hold where the
// webhooks do not run.
func Validate(mc *cachev1alpha1.Memcached) field.ErrorList {
	errs := validateName(field.NewPath("metadata", "name"), mc.Name)
	return append(errs, validateSpec(field.NewPath("spec"), &mc.Spec)...)
}

// ValidateResolved checks what only the operator's flags complete: a spec
// resolved with them must name every image its pods run.
func ValidateResolved(spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	var errs field.ErrorList
	if ptr.Deref(spec.Image, "") == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "image"), "the operator has no --default-image: set the image"))
	}
	if ExporterEnabled(spec) && ptr.Deref(spec.Monitoring.Exporter.Image, "") == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "monitoring", "exporter", "image"), "the operator has no --exporter-image: set the image"))
	}
	if spec.Auth != nil && ptr.Deref(spec.Auth.ReloaderImage, "") == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "auth", "reloaderImage"), "the operator has no --exporter-image: set the image"))
	}
	if TLSEnabled(spec) && spec.Auth == nil && ptr.Deref(spec.TLS.ReloaderImage, "") == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "tls", "reloaderImage"), "the operator has no --exporter-image: set the image"))
	}
	if WarmRestartEnabled(spec) {
		if ptr.Deref(spec.WarmRestart.LauncherImage, "") == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "warmRestart", "launcherImage"), "the operator has no --exporter-image: set the image"))
		}
	}
	return errs
}

// ValidateCreate checks a new, defaulted Memcached.
func ValidateCreate(mc *cachev1alpha1.Memcached, limits Limits) (field.ErrorList, Warnings) {
	errs := ValidateSize(field.NewPath("spec", "size"), mc.Spec.Size, nil, limits)
	errs = append(errs, Validate(mc)...)
	return errs, specWarnings(nil, &mc.Spec)
}

// ValidateUpdate checks a change to a Memcached. It ratchets: a value that
// was already there and already broke a rule (a rule tightened since, or an
// object stored while admission was bypassed) is not held against an update
// that leaves it alone, so labelling, finalizer removal and deletion are never
// blocked and only what changed is judged. Warnings, likewise, speak only of
// what changed.
func ValidateUpdate(oldMC, mc *cachev1alpha1.Memcached, limits Limits) (field.ErrorList, Warnings) {
	if mc.DeletionTimestamp != nil || apiequality.Semantic.DeepEqual(oldMC.Spec, mc.Spec) {
		return nil, nil
	}
	errs := ValidateSize(field.NewPath("spec", "size"), mc.Spec.Size, oldMC.Spec.Size, limits)
	errs = append(errs, Ratchet(Validate(mc), Validate(oldMC))...)
	warnings := specWarnings(&oldMC.Spec, &mc.Spec)
	if restartsPods(&oldMC.Spec, &mc.Spec) {
		warnings = append(warnings, restartWarning(&oldMC.Spec, &mc.Spec))
	}
	if Paused(mc) {
		warnings = append(warnings, PausedWarning)
	}
	return errs, warnings
}

// Check is the controller's entry point to the rules, ratcheted as admission
// ratchets updates: the errors of Validate and ValidateResolved, less those
// the fleet already had when it was last built (accepted says which). A rule
// tightened by an operator upgrade so never stops reconciling a fleet that
// broke it before, while a new breach is refused. What ValidateResolved
// finds (an image only the operator's flags could name) is never kept:
// nothing could be built from it.
func Check(mc *cachev1alpha1.Memcached, resolved *cachev1alpha1.MemcachedSpec, accepted func(*field.Error) bool) (refused, kept field.ErrorList) {
	for _, e := range Validate(mc) {
		if accepted != nil && accepted(e) {
			kept = append(kept, e)
		} else {
			refused = append(refused, e)
		}
	}
	return append(refused, ValidateResolved(resolved)...), kept
}

// RuleKey names an error by what Ratchet compares (the field, the kind of
// error, the complaint and the value), short enough to be recorded on the
// Deployment built despite it.
func RuleKey(e *field.Error) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%v", e.Type, e.Field, e.Detail, e.BadValue))
	return hex.EncodeToString(sum[:8])
}

// Ratchet drops the errors the old object had already: same field, same
// value, same complaint.
func Ratchet(errs, old field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		known := false
		for _, o := range old {
			if o.Type == e.Type && o.Field == e.Field && o.Detail == e.Detail && reflect.DeepEqual(o.BadValue, e.BadValue) {
				known = true
				break
			}
		}
		if !known {
			out = append(out, e)
		}
	}
	return out
}

// ValidateSize bounds a size, from the object, its scale subresource, or
// the controller (which passes the Deployment's replicas as old). A size
// above --max-size is refused only when it grows past old: lowering the flag
// never blocks an existing fleet's other edits, nor scaling it down.
func ValidateSize(path *field.Path, size, old *int32, limits Limits) field.ErrorList {
	if size == nil {
		return nil
	}
	switch {
	case *size < 0:
		return field.ErrorList{field.Invalid(path, *size, "must be greater than or equal to 0")}
	case limits.MaxSize > 0 && *size > limits.MaxSize && (old == nil || *size > *old):
		return field.ErrorList{field.Invalid(path, *size,
			fmt.Sprintf("must be less than or equal to %d, the operator's --max-size", limits.MaxSize))}
	}
	return nil
}

// validateName holds the name to a DNS-1035 label: it names the Service and
// is the value of the pods' instance label.
func validateName(path *field.Path, name string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNS1035Label(name, false) {
		errs = append(errs, field.Invalid(path, name, msg+" (the name is also the fleet's Service name)"))
	}
	return errs
}

func validateSpec(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	var errs field.ErrorList
	if spec.Image != nil && (*spec.Image == "" || strings.TrimSpace(*spec.Image) != *spec.Image) {
		errs = append(errs, field.Invalid(path.Child("image"), *spec.Image, "must name a memcached image, without surrounding spaces"))
	}
	errs = append(errs, validateMemory(path, spec)...)
	errs = append(errs, validateConnections(path, spec)...)
	errs = append(errs, validateExtraArgs(path.Child("extraArgs"), spec.ExtraArgs)...)
	errs = append(errs, validateProtocol(path, spec)...)
	errs = append(errs, validatePorts(path, spec)...)
	errs = append(errs, validatePodLabels(path.Child("podLabels"), spec.PodLabels)...)
	errs = append(errs, validatePodAnnotations(path.Child("podAnnotations"), spec.PodAnnotations)...)
	errs = append(errs, validateService(path.Child("service"), spec.Service)...)
	errs = append(errs, validatePodDisruptionBudget(path.Child("podDisruptionBudget"), spec.PodDisruptionBudget)...)
	errs = append(errs, validatePodSpec(path, spec)...)
	errs = append(errs, validateNetworkPolicy(path.Child("networkPolicy"), spec.NetworkPolicy)...)
	errs = append(errs, validateAuth(path.Child("auth"), spec.Auth)...)
	errs = append(errs, validateTLS(path.Child("tls"), spec)...)
	errs = append(errs, validateMonitoring(path.Child("monitoring"), spec)...)
	errs = append(errs, validateWarmRestart(path, spec)...)
	return append(errs, validateSpecSize(path, spec)...)
}

// validateWarmRestart holds a fleet with warm restarts to what memcached
// needs to start on a memory file: a page of every slab class up front.
// The schema holds the workload; this repeats it for where no schema runs.
func validateWarmRestart(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	if !WarmRestartEnabled(spec) {
		return nil
	}
	var errs field.ErrorList
	if i := spec.WarmRestart.LauncherImage; i != nil && (*i == "" || strings.TrimSpace(*i) != *i) {
		errs = append(errs, field.Invalid(path.Child("warmRestart", "launcherImage"), *i, "must name an image, without surrounding spaces"))
	}
	if ptr.Deref(spec.Workload, cachev1alpha1.WorkloadDeployment) != cachev1alpha1.WorkloadStatefulSet {
		errs = append(errs, field.Invalid(path.Child("warmRestart", "enabled"), true, "warmRestart needs workload StatefulSet: a pod keeps its cache only where it stays, under its name"))
	}
	m := ptr.Deref(spec.MemoryLimitMB, derivedMemoryLimitMB(spec.Resources))
	if m < MinWarmMemoryMB {
		p := path.Child("memoryLimitMB")
		if spec.MemoryLimitMB == nil {
			p = path.Child("resources", "limits", "memory")
		}
		errs = append(errs, field.Invalid(p, m, fmt.Sprintf(
			"with warmRestart memcached allocates a page of every slab class up front and needs at least %d MB of item memory (memoryLimitMB, or 90%% of the memory limit): raise it", MinWarmMemoryMB)))
	}
	return errs
}

// MaxSpecBytes bounds a fleet's spec, encoded as JSON: the schema caps its
// lists and maps, but not those nested in Kubernetes' own types (affinity
// terms, selectors), and every fleet is held whole in the operator's cache
// and judged by the webhook.
const MaxSpecBytes = 64 << 10

func validateSpecSize(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	raw, err := json.Marshal(spec)
	if err != nil || len(raw) <= MaxSpecBytes {
		return nil
	}
	return field.ErrorList{field.Invalid(path, fmt.Sprintf("%d bytes", len(raw)),
		fmt.Sprintf("the spec is %d bytes as JSON, more than %d: trim affinity terms, selectors or lists", len(raw), MaxSpecBytes))}
}

// validateConnections keeps -c above what memcached needs for itself: it
// sets its open-file limit to -c, and each worker thread holds about five
// descriptors (measured with memcached 1.6.18: the least -c that starts is
// 5 × -t + 2; 14 more leave room for the listeners).
func validateConnections(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	if spec.MaxConnections == nil {
		return nil
	}
	threads := ptr.Deref(spec.Threads, derivedThreads(spec.Resources))
	if least := 5*threads + 16; *spec.MaxConnections < least {
		return field.ErrorList{field.Invalid(path.Child("maxConnections"), *spec.MaxConnections,
			fmt.Sprintf("must be at least %d with %d threads (5 × threads + 16): memcached needs those descriptors itself and refuses to start otherwise", least, threads))}
	}
	return nil
}

// validateProtocol refuses a protocol memcached cannot serve with ASCII
// authentication: it exits when -Y meets -B binary or auto.
func validateProtocol(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	if spec.Auth == nil {
		return nil
	}
	opts, _ := ParseArgs(path.Child("extraArgs"), spec.ExtraArgs)
	var errs field.ErrorList
	for _, o := range opts {
		if o.Short == 'B' && o.Value != "ascii" {
			errs = append(errs, field.Invalid(path.Child("extraArgs").Index(o.Index), spec.ExtraArgs[o.Index],
				"spec.auth is memcached's ASCII authentication, which serves the ASCII protocol only: memcached refuses to start with -B "+o.Value))
		}
	}
	return errs
}

// validatePorts keeps memcached's listeners off the exporter's port, which
// the exporter sidecar holds in the same network namespace.
func validatePorts(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	if !ExporterEnabled(spec) {
		return nil
	}
	var errs field.ErrorList
	msg := fmt.Sprintf("port %d is the exporter's, which runs in the same pod: choose another port", ExporterPort)
	if spec.Port != nil && *spec.Port == ExporterPort {
		errs = append(errs, field.Invalid(path.Child("port"), *spec.Port, msg))
	}
	if t := spec.TLS; t != nil && t.PlaintextPort != nil && *t.PlaintextPort == ExporterPort {
		errs = append(errs, field.Invalid(path.Child("tls", "plaintextPort"), *t.PlaintextPort, msg))
	}
	return errs
}

// validateAuth holds the Secret reference to the API server's rules for a
// Secret's name and a secret volume's key, so that an admitted fleet's pods
// are ones it accepts.
func validateAuth(path *field.Path, a *cachev1alpha1.AuthSpec) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	ref := path.Child("secretRef")
	if msgs := validation.IsDNS1123Subdomain(a.SecretRef.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(ref.Child("name"), a.SecretRef.Name, strings.Join(msgs, "; ")))
	}
	if a.SecretRef.Key != nil {
		if msgs := validation.IsConfigMapKey(*a.SecretRef.Key); len(msgs) > 0 {
			errs = append(errs, field.Invalid(ref.Child("key"), *a.SecretRef.Key, strings.Join(msgs, "; ")))
		}
	}
	if a.ReloaderImage != nil && (*a.ReloaderImage == "" || strings.TrimSpace(*a.ReloaderImage) != *a.ReloaderImage) {
		errs = append(errs, field.Invalid(path.Child("reloaderImage"), *a.ReloaderImage, "must name an image, without surrounding spaces"))
	}
	return errs
}

// validateTLS holds the issuer reference to what cert-manager accepts and
// keeps the listeners apart: memcached refuses to start when two of them
// claim one port, and TLSLoopbackPort is the operator's own.
func validateTLS(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	t := spec.TLS
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	if t.Enabled && t.IssuerRef == nil {
		errs = append(errs, field.Required(path.Child("issuerRef"), "an enabled TLS needs the cert-manager issuer that signs the fleet's certificate"))
	}
	if ref := t.IssuerRef; ref != nil {
		rp := path.Child("issuerRef")
		if msgs := validation.IsDNS1123Subdomain(ref.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, strings.Join(msgs, "; ")))
		}
		if k := ptr.Deref(ref.Kind, IssuerKind); k != IssuerKind && k != ClusterIssuerKind {
			errs = append(errs, field.NotSupported(rp.Child("kind"), k, []string{IssuerKind, ClusterIssuerKind}))
		}
		if ref.Group != nil {
			if msgs := validation.IsDNS1123Subdomain(*ref.Group); len(msgs) > 0 {
				errs = append(errs, field.Invalid(rp.Child("group"), *ref.Group, strings.Join(msgs, "; ")))
			}
		}
	}
	if c := t.ClientAuth; c != nil {
		switch *c {
		case cachev1alpha1.TLSClientAuthNone, cachev1alpha1.TLSClientAuthRequest, cachev1alpha1.TLSClientAuthRequire:
		default:
			errs = append(errs, field.NotSupported(path.Child("clientAuth"), *c, []string{string(cachev1alpha1.TLSClientAuthNone), string(cachev1alpha1.TLSClientAuthRequest), string(cachev1alpha1.TLSClientAuthRequire)}))
		}
	}
	if pp := t.PlaintextPort; pp != nil {
		pPath := path.Child("plaintextPort")
		switch {
		case *pp < 1 || *pp > 65535:
			errs = append(errs, field.Invalid(pPath, *pp, "must be between 1 and 65535"))
		case *pp == ptr.Deref(spec.Port, DefaultPort):
			errs = append(errs, field.Invalid(pPath, *pp, "must differ from spec.port, which serves TLS"))
		case *pp == TLSLoopbackPort:
			errs = append(errs, field.Invalid(pPath, *pp, fmt.Sprintf("port %d is the pod's loopback listener for the exporter and the reloader", TLSLoopbackPort)))
		}
	}
	if t.Enabled && spec.Port != nil && *spec.Port == TLSLoopbackPort {
		errs = append(errs, field.Invalid(path.Child("enabled"), t.Enabled, fmt.Sprintf("spec.port %d is the pod's loopback listener for the exporter and the reloader when TLS is on: choose another port", TLSLoopbackPort)))
	}
	if t.ReloaderImage != nil && (*t.ReloaderImage == "" || strings.TrimSpace(*t.ReloaderImage) != *t.ReloaderImage) {
		errs = append(errs, field.Invalid(path.Child("reloaderImage"), *t.ReloaderImage, "must name an image, without surrounding spaces"))
	}
	return errs
}

// validateNetworkPolicy holds the peers to the API server's NetworkPolicy
// rules, so that an admitted fleet's policy is one it accepts.
func validateNetworkPolicy(path *field.Path, np *cachev1alpha1.NetworkPolicySpec) field.ErrorList {
	if np == nil {
		return nil
	}
	var errs field.ErrorList
	for i := range np.From {
		errs = append(errs, validatePeer(path.Child("from").Index(i), &np.From[i])...)
	}
	for i := range np.MetricsFrom {
		errs = append(errs, validatePeer(path.Child("metricsFrom").Index(i), &np.MetricsFrom[i])...)
	}
	return errs
}

func validatePeer(path *field.Path, p *networkingv1.NetworkPolicyPeer) field.ErrorList {
	var errs field.ErrorList
	if p.PodSelector != nil {
		errs = append(errs, validateLabelSelector(path.Child("podSelector"), p.PodSelector)...)
	}
	if p.NamespaceSelector != nil {
		errs = append(errs, validateLabelSelector(path.Child("namespaceSelector"), p.NamespaceSelector)...)
	}
	switch {
	case p.IPBlock != nil && (p.PodSelector != nil || p.NamespaceSelector != nil):
		errs = append(errs, field.Forbidden(path, "ipBlock stands alone: a peer is either an ipBlock or selectors"))
	case p.IPBlock != nil:
		errs = append(errs, validateIPBlock(path.Child("ipBlock"), p.IPBlock)...)
	case p.PodSelector == nil && p.NamespaceSelector == nil:
		errs = append(errs, field.Required(path, "a peer needs a podSelector, a namespaceSelector or an ipBlock"))
	}
	return errs
}

func validateIPBlock(path *field.Path, b *networkingv1.IPBlock) field.ErrorList {
	errs := validation.IsValidCIDR(path.Child("cidr"), b.CIDR)
	if len(errs) > 0 {
		return errs
	}
	block := netip.MustParsePrefix(b.CIDR)
	for i, except := range b.Except {
		p := path.Child("except").Index(i)
		if e := validation.IsValidCIDR(p, except); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		if ex := netip.MustParsePrefix(except); !block.Contains(ex.Addr()) || ex.Bits() <= block.Bits() {
			errs = append(errs, field.Invalid(p, except, "must be a strict subset of cidr "+b.CIDR))
		}
	}
	return errs
}

func validateMonitoring(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	m := spec.Monitoring
	if m == nil {
		return nil
	}
	var errs field.ErrorList
	if e := m.Exporter; e != nil {
		if e.Image != nil && (*e.Image == "" || strings.TrimSpace(*e.Image) != *e.Image) {
			errs = append(errs, field.Invalid(path.Child("exporter", "image"), *e.Image, "must name an image, without surrounding spaces"))
		}
		errs = append(errs, validateResources(path.Child("exporter", "resources"), e.Resources)...)
	}
	if sm := m.ServiceMonitor; sm != nil {
		errs = append(errs, validateLabels(path.Child("serviceMonitor", "labels"), sm.Labels)...)
		if ServiceMonitorEnabled(spec) && !ExporterEnabled(spec) {
			errs = append(errs, field.Invalid(path.Child("serviceMonitor", "enabled"), true,
				"needs spec.monitoring.exporter.enabled: the ServiceMonitor scrapes the exporter"))
		}
	}
	return errs
}

func validatePodLabels(path *field.Path, labels map[string]string) field.ErrorList {
	errs := validateLabels(path, labels)
	for _, key := range ReservedPodLabels {
		if _, ok := labels[key]; ok {
			errs = append(errs, field.Forbidden(path.Key(key),
				"the operator selects its pods by this label; it cannot be overridden"))
		}
	}
	return errs
}

// validateService keeps the Service's labels from taking the operator's
// own (its EndpointSlices, which carry them, are found by them) and from
// Kubernetes' prefixes, which the EndpointSlice controller and kube-proxy
// read.
func validateService(path *field.Path, svc *cachev1alpha1.ServiceSpec) field.ErrorList {
	if svc == nil {
		return nil
	}
	errs := validateLabels(path.Child("labels"), svc.Labels)
	for _, key := range slices.Sorted(maps.Keys(svc.Labels)) {
		switch {
		case slices.Contains(ReservedPodLabels, key):
			errs = append(errs, field.Forbidden(path.Child("labels").Key(key),
				"the operator finds the Service's EndpointSlices by this label; it cannot be overridden"))
		case reservedDomain(key) != "":
			errs = append(errs, field.Forbidden(path.Child("labels").Key(key),
				"keys under kubernetes.io and k8s.io are Kubernetes' own (the EndpointSlice controller and kube-proxy read them)"))
		}
	}
	return append(errs, apivalidation.ValidateAnnotations(svc.Annotations, path.Child("annotations"))...)
}

// reservedDomain is kubernetes.io or k8s.io when a key's prefix is either
// or a subdomain of either, in any case, and "" otherwise.
func reservedDomain(key string) string {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	prefix = strings.ToLower(prefix)
	for _, reserved := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == reserved || strings.HasSuffix(prefix, "."+reserved) {
			return reserved
		}
	}
	return ""
}

// AllowedReservedPodAnnotations are the Kubernetes-reserved annotation keys
// a fleet's pods may carry from spec.podAnnotations: hints to tools that
// weaken nothing.
var AllowedReservedPodAnnotations = []string{
	"cluster-autoscaler.kubernetes.io/safe-to-evict",
	"kubectl.kubernetes.io/default-container",
	"kubectl.kubernetes.io/default-logs-container",
}

// OperatorAnnotationDomain is the prefix domain of the annotations the
// operator writes on a fleet's pods (a warm pod's template hash, memcached's
// command line, its restart count); spec.podAnnotations may not set them.
const OperatorAnnotationDomain = "cache.example.com"

// validatePodAnnotations refuses the keys under Kubernetes' reserved
// prefixes (kubernetes.io, k8s.io and their subdomains) beyond the allowed
// ones: among them are the AppArmor and seccomp annotations that would undo
// the pods' restricted profile, and the pod-deletion cost the operator's
// scale-down sets. Keys under the operator's own domain are refused too: a
// warm pod's memcached runs the command line its annotation holds.
func validatePodAnnotations(path *field.Path, annotations map[string]string) field.ErrorList {
	errs := apivalidation.ValidateAnnotations(annotations, path)
	for _, key := range slices.Sorted(maps.Keys(annotations)) {
		prefix, _, ok := strings.Cut(key, "/")
		if !ok || slices.Contains(AllowedReservedPodAnnotations, key) {
			continue
		}
		prefix = strings.ToLower(prefix)
		if prefix == OperatorAnnotationDomain || strings.HasSuffix(prefix, "."+OperatorAnnotationDomain) {
			errs = append(errs, field.Forbidden(path.Key(key), fmt.Sprintf(
				"keys under %s are the operator's own (a warm pod's command line among them)", OperatorAnnotationDomain)))
		} else if reserved := reservedDomain(key); reserved != "" {
			errs = append(errs, field.Forbidden(path.Key(key), fmt.Sprintf(
				"keys under %s are Kubernetes' own (AppArmor and seccomp profiles, the scale-down's deletion cost among them); allowed: %s",
				reserved, strings.Join(AllowedReservedPodAnnotations, ", "))))
		}
	}
	return errs
}

// validateMemory keeps memcached's settings consistent with each other and
// with the container: memcached refuses to start with an item size above half
// its memory, and a -m above the container limit ends in an OOM kill. The
// item memory checked is the one the pods get, derived or set; an error is
// put on a field the user wrote, never on a value the operator derived.
func validateMemory(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	var errs field.ErrorList
	memMB, derived := ptr.Deref(spec.MemoryLimitMB, 0), spec.MemoryLimitMB == nil
	if derived {
		memMB = derivedMemoryLimitMB(spec.Resources)
	}
	limit, hasLimit := memoryLimit(spec.Resources)
	switch {
	case !hasLimit:
	case !derived && int64(memMB)<<20 > limit.Value():
		errs = append(errs, field.Invalid(path.Child("memoryLimitMB"), memMB,
			fmt.Sprintf("must fit inside resources.limits.memory (%s), or the container is OOM-killed once the cache fills", limit.String())))
	case derived && int64(memMB)<<20 > limit.Value():
		errs = append(errs, field.Invalid(path.Child("resources", "limits", "memory"), limit.String(),
			fmt.Sprintf("must be at least 9Mi: memcached needs %dMB of item memory and the operator gives it 90%% of the limit", MinMemoryLimitMB)))
	}
	if spec.MaxItemSize == nil {
		return errs
	}
	itemPath := path.Child("maxItemSize")
	b, err := ParseItemSize(*spec.MaxItemSize)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(itemPath, *spec.MaxItemSize, err.Error()))
	case b < 1<<10 || b > 1<<30:
		errs = append(errs, field.Invalid(itemPath, *spec.MaxItemSize, "must be between 1k and 1024m"))
	case b < slabChunkMax || b%slabChunkMax != 0:
		errs = append(errs, field.Invalid(itemPath, *spec.MaxItemSize,
			"must be a multiple of 512k (memcached's slab chunk size), such as 512k, 1m or 1536k: memcached refuses to start otherwise"))
	case b > int64(memMB)<<20/2:
		how := "memoryLimitMB"
		if derived {
			how = "the item memory derived from resources.limits.memory"
		}
		errs = append(errs, field.Invalid(itemPath, *spec.MaxItemSize,
			fmt.Sprintf("must be at most half of %s (%dMB): memcached refuses to start otherwise", how, memMB)))
	}
	return errs
}

// slabChunkMax is memcached's default -o slab_chunk_max, in bytes: -I must
// be a multiple of it.
const slabChunkMax = 512 << 10

// ParseItemSize reads memcached's -I notation: bytes, or a number with a k or m suffix.
func ParseItemSize(s string) (int64, error) {
	mult := int64(1)
	num := s
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult, num = 1<<10, s[:n-1]
		case 'm', 'M':
			mult, num = 1<<20, s[:n-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v <= 0 || v > 1<<40 {
		return 0, fmt.Errorf("must be a positive number of bytes, optionally followed by k or m")
	}
	return v * mult, nil
}

// validatePodDisruptionBudget repeats the schema's rules, so that a budget
// stored before they existed is caught before it is built.
func validatePodDisruptionBudget(path *field.Path, pdb *cachev1alpha1.PodDisruptionBudgetSpec) field.ErrorList {
	if pdb == nil {
		return nil
	}
	var errs field.ErrorList
	if pdb.MinAvailable != nil && pdb.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(path, "", "set minAvailable or maxUnavailable, not both"))
	}
	errs = append(errs, validateIntOrPercent(path.Child("minAvailable"), pdb.MinAvailable)...)
	return append(errs, validateIntOrPercent(path.Child("maxUnavailable"), pdb.MaxUnavailable)...)
}

func specWarnings(oldSpec, spec *cachev1alpha1.MemcachedSpec) Warnings {
	changed := func(get func(*cachev1alpha1.MemcachedSpec) any) bool {
		return oldSpec == nil || !apiequality.Semantic.DeepEqual(get(oldSpec), get(spec))
	}
	var w Warnings
	if changed(func(s *cachev1alpha1.MemcachedSpec) any { return s.Size }) {
		switch ptr.Deref(spec.Size, -1) {
		case 0:
			w = append(w, "spec.size is 0: no memcached pod will run")
		case 1:
			w = append(w, "spec.size is 1: every restart or node drain empties the whole cache")
		}
	}
	if _, ok := memoryLimit(spec.Resources); !ok && changed(func(s *cachev1alpha1.MemcachedSpec) any { return s.Resources }) {
		w = append(w, "spec.resources.limits.memory is not set: a memcached pod may grow until the node evicts it")
	}
	return w
}

// onlyImageChanged tells whether memcached's image is the one pod-template
// field a change touches.
// restartsPods tells whether a change alters the pod template, which rolls
// every pod and so empties each one's cache in turn.
func restartsPods(oldSpec, spec *cachev1alpha1.MemcachedSpec) bool {
	o, n := oldSpec.DeepCopy(), spec.DeepCopy()
	for _, s := range []*cachev1alpha1.MemcachedSpec{o, n} {
		s.Size, s.PodDisruptionBudget, s.NetworkPolicy = nil, nil, nil
	}
	return !apiequality.Semantic.DeepEqual(o, n)
}
