package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AppliedDigest is the annotation under which the cache's copy of an owned
// object (KeepApplied) carries the digest of the fields FieldOwner applied
// to it. The key is one the API server refuses, so an object it returns
// never has it: a tenant cannot forge a digest to stop drift repair, and the
// transform knows a copy it already made. Nothing the operator sends is
// built from a cached object.
const AppliedDigest = "applied fields (cache only)"

// KeepApplied returns the cache transform of an owned kind. A pass needs of
// the operator's managed-fields entry only whether the fields it names hold
// what the pass would apply, so the transform extracts those fields once, as
// the object enters the cache, and keeps their digest in place of every
// managed-fields entry; trim drops whatever else no pass reads. An edit by
// anyone else of a field the operator owns takes the field out of its
// entry, so the next copy's digest differs and the pass applies again.
//
// The transform is idempotent, as an informer that streams its initial list
// needs: it returns a copy it already made unchanged.
func KeepApplied[O client.Object, A any](kind string, extract func(O, string) (A, error), trim func(O)) func(any) (any, error) {
	return func(in any) (any, error) {
		obj, ok := in.(O)
		if !ok {
			return in, nil
		}
		if _, done := obj.GetAnnotations()[AppliedDigest]; done {
			return in, nil
		}
		digest, err := extractedDigest(kind, extractedByCache, obj, extract)
		obj.SetManagedFields(nil)
		if trim != nil {
			trim(obj)
		}
		if err == nil {
			// A copy without the digest (an extraction that failed) is
			// applied again by the next pass, never taken as matching.
			annotations := obj.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[AppliedDigest] = digest
			obj.SetAnnotations(annotations)
		}
		return obj, nil
	}
}

// appliedDigest is the digest of the fields FieldOwner applied to live:
// the one its cached copy carries, or else (an object read whole, not
// through the operator's cache) its extraction's.
func appliedDigest[O client.Object, A any](kind string, live O, extract func(O, string) (A, error)) (string, error) {
	if d, ok := live.GetAnnotations()[AppliedDigest]; ok {
		return d, nil
	}
	return extractedDigest(kind, extractedByPass, live, extract)
}

func extractedDigest[O client.Object, A any](kind, by string, obj O, extract func(O, string) (A, error)) (string, error) {
	extractions.WithLabelValues(kind, by).Inc()
	applied, err := extract(obj, FieldOwner)
	if err != nil {
		return "", err
	}
	return digestOf(applied)
}

// digestOf digests an apply configuration as it would be sent. Two
// configurations that encode alike are the same request, so comparing
// digests is comparing what was applied with what would be.
func digestOf(ac any) (string, error) {
	raw, err := json.Marshal(ac)
	if err != nil {
		return "", err
	}
	d := sha256.Sum256(raw)
	return hex.EncodeToString(d[:]), nil
}
