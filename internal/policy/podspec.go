package policy

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// The fields below pass through to the Deployment's pod template. The API
// server validates a PodSpec far more strictly than the CRD's schema can
// say, so these rules repeat the ones a memcached fleet can break: a spec
// that passes here is one the API server accepts once built.

// allowedResources are the resources a memcached container can use.
var allowedResources = sets.New(corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage)

func validatePodSpec(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	var errs field.ErrorList
	for i, s := range spec.ImagePullSecrets {
		for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
			errs = append(errs, field.Invalid(path.Child("imagePullSecrets").Index(i).Child("name"), s.Name, msg))
		}
	}
	errs = append(errs, validateLabels(path.Child("nodeSelector"), spec.NodeSelector)...)
	for i := range spec.Tolerations {
		errs = append(errs, validateToleration(path.Child("tolerations").Index(i), &spec.Tolerations[i])...)
	}
	errs = append(errs, validateAffinity(path.Child("affinity"), spec.Affinity)...)
	for i := range spec.TopologySpreadConstraints {
		errs = append(errs, validateTopologySpread(path.Child("topologySpreadConstraints").Index(i), &spec.TopologySpreadConstraints[i])...)
	}
	if spec.PriorityClassName != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*spec.PriorityClassName) {
			errs = append(errs, field.Invalid(path.Child("priorityClassName"), *spec.PriorityClassName, msg))
		}
	}
	return append(errs, validateResources(path.Child("resources"), spec.Resources)...)
}

func validateLabels(path *field.Path, labels map[string]string) field.ErrorList {
	return metav1validation.ValidateLabels(labels, path)
}

func validateQualifiedName(path *field.Path, name string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func validateLabelValue(path *field.Path, value string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(value) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

// validateIntOrPercent takes a whole number of 0 or more or a percentage
// from 0% to 100%, as a PodDisruptionBudget does.
func validateIntOrPercent(path *field.Path, v *intstr.IntOrString) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return field.ErrorList{field.Invalid(path, v.IntVal, "must be greater than or equal to 0")}
		}
		return nil
	}
	num, ok := strings.CutSuffix(v.StrVal, "%")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 0 || n > 100 || strconv.Itoa(n) != num {
		return field.ErrorList{field.Invalid(path, v.StrVal, "must be a whole number of 0 or more, or a percentage from 0% to 100%")}
	}
	return nil
}

func validateToleration(path *field.Path, t *corev1.Toleration) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, validateQualifiedName(path.Child("key"), t.Key)...)
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(path.Child("operator"), t.Operator, "must be Exists when key is empty"))
		}
		errs = append(errs, validateLabelValue(path.Child("value"), t.Value)...)
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpExists, corev1.TolerationOpEqual}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect,
			[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(path.Child("effect"), t.Effect, "must be NoExecute when tolerationSeconds is set"))
	}
	return errs
}

func validateTopologySpread(path *field.Path, c *corev1.TopologySpreadConstraint) field.ErrorList {
	var errs field.ErrorList
	if c.MaxSkew <= 0 {
		errs = append(errs, field.Invalid(path.Child("maxSkew"), c.MaxSkew, "must be greater than 0"))
	}
	if c.TopologyKey == "" {
		errs = append(errs, field.Required(path.Child("topologyKey"), "names the node label to spread over"))
	} else {
		errs = append(errs, validateQualifiedName(path.Child("topologyKey"), c.TopologyKey)...)
	}
	switch c.WhenUnsatisfiable {
	case corev1.DoNotSchedule, corev1.ScheduleAnyway:
	default:
		errs = append(errs, field.NotSupported(path.Child("whenUnsatisfiable"), c.WhenUnsatisfiable,
			[]corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}))
	}
	if c.MinDomains != nil {
		if *c.MinDomains <= 0 {
			errs = append(errs, field.Invalid(path.Child("minDomains"), *c.MinDomains, "must be greater than 0"))
		}
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			errs = append(errs, field.Invalid(path.Child("minDomains"), *c.MinDomains, "may only be set with whenUnsatisfiable: DoNotSchedule"))
		}
	}
	for name, p := range inOrder(map[string]*corev1.NodeInclusionPolicy{"nodeAffinityPolicy": c.NodeAffinityPolicy, "nodeTaintsPolicy": c.NodeTaintsPolicy}) {
		if p != nil && *p != corev1.NodeInclusionPolicyHonor && *p != corev1.NodeInclusionPolicyIgnore {
			errs = append(errs, field.NotSupported(path.Child(name), *p,
				[]corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore}))
		}
	}
	errs = append(errs, validateLabelSelector(path.Child("labelSelector"), c.LabelSelector)...)
	seen := sets.New[string]()
	for i, k := range c.MatchLabelKeys {
		kp := path.Child("matchLabelKeys").Index(i)
		errs = append(errs, validateQualifiedName(kp, k)...)
		switch {
		case seen.Has(k):
			errs = append(errs, field.Duplicate(kp, k))
		case c.LabelSelector != nil && selectorHasKey(c.LabelSelector, k):
			errs = append(errs, field.Invalid(kp, k, "must not also be a key of labelSelector"))
		}
		seen.Insert(k)
	}
	return errs
}

func selectorHasKey(s *metav1.LabelSelector, key string) bool {
	if _, ok := s.MatchLabels[key]; ok {
		return true
	}
	for _, r := range s.MatchExpressions {
		if r.Key == key {
			return true
		}
	}
	return false
}

func validateLabelSelector(path *field.Path, s *metav1.LabelSelector) field.ErrorList {
	if s == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, path)
}

func validateAffinity(path *field.Path, a *corev1.Affinity) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		np := path.Child("nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			rp := np.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			if len(req.NodeSelectorTerms) == 0 {
				errs = append(errs, field.Required(rp, "must have at least one node selector term"))
			}
			for i := range req.NodeSelectorTerms {
				errs = append(errs, validateNodeSelectorTerm(rp.Index(i), &req.NodeSelectorTerms[i])...)
			}
		}
		for i, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			pp := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			errs = append(errs, validateWeight(pp.Child("weight"), p.Weight)...)
			errs = append(errs, validateNodeSelectorTerm(pp.Child("preference"), &p.Preference)...)
		}
	}
	for name, pa := range inOrder(map[string]podAffinityTerms{"podAffinity": podAffinityOf(a.PodAffinity), "podAntiAffinity": podAntiAffinityOf(a.PodAntiAffinity)}) {
		pp := path.Child(name)
		for i := range pa.required {
			errs = append(errs, validatePodAffinityTerm(pp.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i), &pa.required[i])...)
		}
		for i := range pa.preferred {
			wp := pp.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			errs = append(errs, validateWeight(wp.Child("weight"), pa.preferred[i].Weight)...)
			errs = append(errs, validatePodAffinityTerm(wp.Child("podAffinityTerm"), &pa.preferred[i].PodAffinityTerm)...)
		}
	}
	return errs
}

type podAffinityTerms struct {
	required  []corev1.PodAffinityTerm
	preferred []corev1.WeightedPodAffinityTerm
}

func podAffinityOf(a *corev1.PodAffinity) podAffinityTerms {
	if a == nil {
		return podAffinityTerms{}
	}
	return podAffinityTerms{a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution}
}

func podAntiAffinityOf(a *corev1.PodAntiAffinity) podAffinityTerms {
	if a == nil {
		return podAffinityTerms{}
	}
	return podAffinityTerms{a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution}
}

func validateWeight(path *field.Path, w int32) field.ErrorList {
	if w < 1 || w > 100 {
		return field.ErrorList{field.Invalid(path, w, "must be between 1 and 100")}
	}
	return nil
}

func validateNodeSelectorTerm(path *field.Path, t *corev1.NodeSelectorTerm) field.ErrorList {
	var errs field.ErrorList
	for i, r := range t.MatchExpressions {
		rp := path.Child("matchExpressions").Index(i)
		errs = append(errs, validateQualifiedName(rp.Child("key"), r.Key)...)
		errs = append(errs, validateNodeSelectorValues(rp, r)...)
	}
	for i, r := range t.MatchFields {
		rp := path.Child("matchFields").Index(i)
		if r.Key != "metadata.name" {
			errs = append(errs, field.NotSupported(rp.Child("key"), r.Key, []string{"metadata.name"}))
		}
		if (r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn) || len(r.Values) != 1 {
			errs = append(errs, field.Invalid(rp, r.Operator, "must be In or NotIn with exactly one value"))
		}
	}
	return errs
}

func validateNodeSelectorValues(path *field.Path, r corev1.NodeSelectorRequirement) field.ErrorList {
	var errs field.ErrorList
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			errs = append(errs, field.Required(path.Child("values"), "must have at least one value with In or NotIn"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			errs = append(errs, field.Forbidden(path.Child("values"), "must be empty with Exists or DoesNotExist"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			errs = append(errs, field.Required(path.Child("values"), "must have exactly one value with Gt or Lt"))
		} else if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
			errs = append(errs, field.Invalid(path.Child("values").Index(0), r.Values[0], "must be an integer with Gt or Lt"))
		}
		return errs
	default:
		return append(errs, field.NotSupported(path.Child("operator"), r.Operator, []corev1.NodeSelectorOperator{
			corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
			corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt}))
	}
	for i, v := range r.Values {
		errs = append(errs, validateLabelValue(path.Child("values").Index(i), v)...)
	}
	return errs
}

func validatePodAffinityTerm(path *field.Path, t *corev1.PodAffinityTerm) field.ErrorList {
	var errs field.ErrorList
	if t.TopologyKey == "" {
		errs = append(errs, field.Required(path.Child("topologyKey"), "names the node label that defines a domain"))
	} else {
		errs = append(errs, validateQualifiedName(path.Child("topologyKey"), t.TopologyKey)...)
	}
	errs = append(errs, validateLabelSelector(path.Child("labelSelector"), t.LabelSelector)...)
	errs = append(errs, validateLabelSelector(path.Child("namespaceSelector"), t.NamespaceSelector)...)
	for i, ns := range t.Namespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(path.Child("namespaces").Index(i), ns, msg))
		}
	}
	keys := sets.New[string]()
	for name, list := range inOrder(map[string][]string{"matchLabelKeys": t.MatchLabelKeys, "mismatchLabelKeys": t.MismatchLabelKeys}) {
		for i, k := range list {
			kp := path.Child(name).Index(i)
			errs = append(errs, validateQualifiedName(kp, k)...)
			if keys.Has(k) {
				errs = append(errs, field.Invalid(kp, k, "must not repeat a key of matchLabelKeys or mismatchLabelKeys"))
			}
			keys.Insert(k)
			if t.LabelSelector == nil {
				errs = append(errs, field.Forbidden(kp, "needs labelSelector to be set"))
			} else if selectorHasKey(t.LabelSelector, k) {
				errs = append(errs, field.Invalid(kp, k, "must not also be a key of labelSelector"))
			}
		}
	}
	return errs
}

func validateResources(path *field.Path, r *corev1.ResourceRequirements) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if len(r.Claims) > 0 {
		errs = append(errs, field.Forbidden(path.Child("claims"), "memcached pods do not use dynamic resource claims"))
	}
	for kind, list := range inOrder(map[string]corev1.ResourceList{"limits": r.Limits, "requests": r.Requests}) {
		for name, q := range inOrder(list) {
			p := path.Child(kind).Key(string(name))
			switch {
			case !allowedResources.Has(name):
				errs = append(errs, field.NotSupported(path.Child(kind), name, sets.List(allowedResources)))
			case q.Sign() < 0:
				errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	for name, req := range inOrder(r.Requests) {
		if limit, ok := r.Limits[name]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to the %s limit (%s)", name, limit.String())))
		}
	}
	return errs
}

// inOrder ranges over m by its keys in order, so that a spec's errors come
// in the same order, on the same fields, at every review of it.
func inOrder[K cmp.Ordered, V any](m map[K]V) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
