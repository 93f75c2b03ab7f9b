package memcached

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// fleetMemory is everything a reconciler remembers of each fleet between
// passes, all keyed by the fleet's namespace and name, and forgotten
// together when the fleet is gone, so a fleet recreated under the same name
// starts from nothing.
type fleetMemory struct {
	// lastWrite holds each fleet's last status write by this process
	// (types.NamespacedName → statusWrite).
	lastWrite sync.Map
	// startHeld holds, for each fleet whose report of a new generation
	// (StartOnly) is held, the generation and since when
	// (types.NamespacedName → heldStart).
	startHeld sync.Map
	// applied remembers which owned objects hold what they should.
	applied appliedLedger
	// monitored holds the fleets this process gave a ServiceMonitor.
	monitored sync.Map
	// certified holds the fleets this process gave a Certificate.
	certified sync.Map
}

// forget drops everything remembered of the fleet key.
func (m *fleetMemory) forget(key types.NamespacedName) {
	m.lastWrite.Delete(key)
	m.startHeld.Delete(key)
	m.applied.forget(key)
	m.monitored.Delete(key)
	m.certified.Delete(key)
}

// remembers names what is remembered of the fleet key, for tests.
func (m *fleetMemory) remembers(key types.NamespacedName) []string {
	var out []string
	for name, mp := range map[string]*sync.Map{"lastWrite": &m.lastWrite, "startHeld": &m.startHeld, "monitored": &m.monitored, "certified": &m.certified} {
		if _, ok := mp.Load(key); ok {
			out = append(out, name)
		}
	}
	for _, kind := range ledgerKinds {
		if _, ok := m.applied.m.Load(ledgerKey{kind, key}); ok {
			out = append(out, "applied "+kind)
		}
	}
	sort.Strings(out)
	return out
}
