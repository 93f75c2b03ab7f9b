package apply

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// appliedLedger remembers, for each owned object, that the fields FieldOwner
// owns were found to hold a given desired configuration, so that later
// passes can skip extracting them (the most expensive part of a no-op pass:
// the whole object is converted to a typed value first). It is sound because
// of how the API server tracks field ownership: a change of a field we own by
// another manager (an update, a patch, a forced apply) takes the field out
// of our managed-fields entry, a change of the spec by anyone moves the
// generation, and the deployment controller's status updates move neither.
// So while our entry and the desired configuration are both unchanged, the
// extraction would compare equal again. Only an equality an extraction
// verified is recorded, never what an apply merely sent.
type appliedLedger struct {
	m sync.Map // ledgerKey → ledgerEntry
}

type ledgerKey struct {
	kind string
	key  types.NamespacedName
}

type ledgerEntry struct {
	uid     types.UID
	fields  [sha256.Size]byte
	desired [sha256.Size]byte
}

// ledgerKinds are the kinds applyIfChanged records, so a deleted fleet's
// entries can all be forgotten.
var ledgerKinds = []string{"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"}

// ownFieldsDigest digests FieldOwner's apply entry of obj; false when obj
// has none (nothing was applied, or someone reset the managed fields).
func ownFieldsDigest(obj client.Object) ([sha256.Size]byte, bool) {
	for _, f := range obj.GetManagedFields() {
		if f.Manager != FieldOwner || f.Operation != metav1.ManagedFieldsOperationApply || f.Subresource != "" || f.FieldsV1 == nil {
			continue
		}
		h := sha256.New()
		// The time moves whenever an apply under our name changes the
		// object, so another process applying as FieldOwner (an old replica
		// during an upgrade) invalidates the record too; the time is kept to
		// the second, so a metadata change it applies within the second of
		// our own apply goes unseen until the entry next moves.
		at := ""
		if f.Time != nil {
			at = f.Time.UTC().Format(time.RFC3339)
		}
		_, _ = fmt.Fprintf(h, "%s\x00%s\x00%d\x00", f.APIVersion, at, obj.GetGeneration())
		_, _ = h.Write(f.FieldsV1.GetRawBytes())
		var d [sha256.Size]byte
		h.Sum(d[:0])
		return d, true
	}
	return [sha256.Size]byte{}, false
}

// desiredDigest digests an apply configuration as it would be sent.
func desiredDigest(desired any) ([sha256.Size]byte, error) {
	raw, err := json.Marshal(desired)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(raw), nil
}

// holds reports whether live's own fields were verified to hold desired
// (by its digest) and have not changed since.
func (l *appliedLedger) holds(kind string, live client.Object, desired [sha256.Size]byte) bool {
	fields, ok := ownFieldsDigest(live)
	if !ok {
		return false
	}
	v, found := l.m.Load(ledgerKey{kind, client.ObjectKeyFromObject(live)})
	if !found {
		return false
	}
	e := v.(ledgerEntry)
	return e.uid == live.GetUID() && e.fields == fields && e.desired == desired
}

// verified records that an extraction of live's own fields equalled desired.
func (l *appliedLedger) verified(kind string, live client.Object, desired [sha256.Size]byte) {
	fields, ok := ownFieldsDigest(live)
	if !ok {
		return
	}
	l.m.Store(ledgerKey{kind, client.ObjectKeyFromObject(live)}, ledgerEntry{uid: live.GetUID(), fields: fields, desired: desired})
}

// forget drops what is recorded for a fleet's objects (they share its name).
func (l *appliedLedger) forget(fleet types.NamespacedName) {
	for _, kind := range ledgerKinds {
		l.m.Delete(ledgerKey{kind, fleet})
	}
}
