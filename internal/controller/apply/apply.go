package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// FieldOwner is the server-side apply field manager of every object the
// operator writes; one fixed name lets it take back fields others changed.
const FieldOwner = "memcached-operator"

// Applier writes a fleet's owned objects. It remembers which fleets it gave
// an optional object; Forget drops that when the fleet is gone.
type Applier struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, bypassing the cache; it confirms a
	// cache miss before an object is created. Defaults to Client.
	APIReader client.Reader

	// Now is time.Now, replaceable in tests.
	Now func() time.Time

	// gave holds the fleets this process gave an optional object
	// (optionalKey → struct{}).
	gave sync.Map
	// created holds the objects this process created that its cache has
	// not shown yet (createdKey → creation), and kinds the kinds it ever
	// created (kind → struct{}), so Forget knows which keys to drop.
	created, kinds sync.Map
}

// createdKey is one fleet's object of one kind.
type createdKey struct {
	kind  string
	fleet types.NamespacedName
}

// creation is when this process created an object, and for which fleet.
type creation struct {
	owner types.UID
	at    time.Time
}

// CacheWait bounds how long a pass trusts that an object this process
// created is on its way to the cache: past it, a miss is taken as the
// object being gone, and it is created again.
const CacheWait = 10 * time.Second

// ErrCacheBehind is returned for an object this process created less than
// CacheWait ago that its cache does not hold yet. The pass read a cache
// older than its own last pass, so it writes no status and sends no event:
// the object's creation event requeues the fleet once the cache has it.
var ErrCacheBehind = errors.New("the cache has not yet shown an object this process created")

// remember notes that this process created the object, until the cache
// shows it.
func (a *Applier) remember(memo createdKey, mc *cachev1alpha1.Memcached) {
	a.kinds.Store(memo.kind, struct{}{})
	a.created.Store(memo, creation{owner: mc.UID, at: a.now()})
}

func (a *Applier) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Applier) apiReader() client.Reader {
	if a.APIReader != nil {
		return a.APIReader
	}
	return a.Client
}

// Forget drops everything remembered of the fleet's objects.
func (a *Applier) Forget(fleet types.NamespacedName) {
	for _, kind := range optionalKinds {
		a.gave.Delete(optionalKey{kind, fleet})
	}
	a.kinds.Range(func(kind, _ any) bool {
		a.created.Delete(createdKey{kind.(string), fleet})
		return true
	})
}

// Remembers names what is remembered of the fleet's objects, for tests.
func (a *Applier) Remembers(fleet types.NamespacedName) []string {
	var out []string
	for _, kind := range optionalKinds {
		if _, ok := a.gave.Load(optionalKey{kind, fleet}); ok {
			out = append(out, "gave "+kind)
		}
	}
	a.kinds.Range(func(kind, _ any) bool {
		if _, ok := a.created.Load(createdKey{kind.(string), fleet}); ok {
			out = append(out, "created "+kind.(string))
		}
		return true
	})
	return out
}

// IfChanged server-side applies desired unless the fields FieldOwner
// owns on the live object already hold exactly those values. Comparing the
// extracted fields, not the whole object, skips the request when nothing
// drifted while still catching an edit by anyone else: such an edit moves
// ownership of the field away from us, so it no longer extracts equal. An
// object from the operator's cache was extracted as it entered the cache
// (KeepApplied); extract serves one read whole.
//
// An object of that name that mc does not control is never touched: the
// result is a NameConflict. The cache only holds objects with the operator's
// label, so on a miss the apply carries a resourceVersion precondition no
// existing object can meet (createOnly): the API server creates the object
// when the name is free and answers Conflict, changing nothing, when it is
// taken. Only then is the object read live, to tell a stranger from our own
// object the cache has not seen yet. A new fleet's objects so cost one
// request each, and a converged fleet never takes that path.
//
// A pass that runs before the cache shows what the last one created (its
// first object's creation event requeues the fleet while the others are on
// their way) would take that path for each of them, and race the
// controllers that update them: the miss is ErrCacheBehind instead, until
// CacheWait has passed.
//
// live receives the object as the API server last returned it (the apply's
// answer, or the cached copy when nothing was sent), so status is computed
// from the object after this pass, never from the one before it.
func IfChanged[O client.Object, A interface {
	runtime.ApplyConfiguration
	WithResourceVersion(string) A
}](
	ctx context.Context, a *Applier, mc *cachev1alpha1.Memcached, kind string, live O, desired A,
	extract func(O, string) (A, error),
) (created bool, err error) {
	key := client.ObjectKeyFromObject(mc)
	memo := createdKey{kind, key}
	cause := "drifted"
	switch err := a.Client.Get(ctx, key, live); {
	case apierrors.IsNotFound(err):
		if c, ok := a.created.Load(memo); ok {
			if c := c.(creation); c.owner == mc.UID && a.now().Sub(c.at) < CacheWait {
				applyRequests.WithLabelValues(kind, applyWaited).Inc()
				return false, ErrCacheBehind
			}
			a.created.Delete(memo)
		}
		if desired, err = detached(desired); err != nil {
			return false, fmt.Errorf("encoding %s %s: %w", kind, key, err)
		}
		applyRequests.WithLabelValues(kind, applySent).Inc()
		switch err := a.Client.Apply(ctx, desired.WithResourceVersion(createOnly(mc)), client.FieldOwner(FieldOwner), client.ForceOwnership); {
		case err == nil:
			a.remember(memo, mc)
			ctrl.LoggerFrom(ctx).V(1).Info("Applied owned object", "kind", kind, "name", key.Name, "created", true)
			return true, fromApplyConfiguration(desired, live)
		case !apierrors.IsConflict(err):
			return false, applyError(kind, key, err)
		}
		switch err := a.apiReader().Get(ctx, key, live); {
		case apierrors.IsNotFound(err):
			// Deleted since the Conflict: create-only again below.
			created = true
		case err != nil:
			return false, fmt.Errorf("reading %s %s: %w", kind, key, err)
		case !metav1.IsControlledBy(live, mc):
			return false, NameConflict(kind, live)
		default:
			cause = "ours, not cached yet"
			// Ours: applied on the condition that it is still the object
			// read. An empty resourceVersion is no way to drop the
			// precondition: it is applied as a value, and kinds that refuse
			// unconditional updates (PodDisruptionBudget) then refuse it.
			desired.WithResourceVersion(live.GetResourceVersion())
		}
	case err != nil:
		return false, fmt.Errorf("reading %s %s: %w", kind, key, err)
	case !metav1.IsControlledBy(live, mc):
		return false, NameConflict(kind, live)
	default:
		a.created.Delete(memo)
		want, err := digestOf(desired)
		if err != nil {
			return false, fmt.Errorf("encoding %s %s: %w", kind, key, err)
		}
		have, err := appliedDigest(kind, live, extract)
		if err != nil {
			return false, fmt.Errorf("extracting applied fields of %s %s: %w", kind, key, err)
		}
		if have == want {
			applyRequests.WithLabelValues(kind, applySkipped).Inc()
			return false, nil
		}
		if desired, err = detached(desired); err != nil {
			return false, fmt.Errorf("encoding %s %s: %w", kind, key, err)
		}
	}
	applyRequests.WithLabelValues(kind, applySent).Inc()
	if err := a.Client.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, applyError(kind, key, err)
	}
	if created {
		a.remember(memo, mc)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Applied owned object", "kind", kind, "name", key.Name, "created", created, "cause", cause)
	// The client decoded the API server's answer into desired, the copy.
	return created, fromApplyConfiguration(desired, live)
}

// detached copies an apply configuration for the client to decode the API
// server's answer into. Decoding writes into the maps it finds, and a
// builder's configuration may hold maps it shares with the cached Memcached
// or with its package's defaults, which the passes of other fleets read and
// decode into at the same time.
func detached[A any](ac A) (A, error) {
	out := reflect.New(reflect.TypeOf(ac).Elem()).Interface().(A)
	raw, err := json.Marshal(ac)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(raw, out)
}

// createOnly is a resourceVersion no existing object has, so an apply that
// carries it can only create. The API server checks a resourceVersion in an
// apply against the stored object's, and ignores it when there is none
// (create-via-apply wipes it). A resourceVersion is the storage revision of
// an object's last write, and no two objects are written by the same one,
// so the Memcached's own resourceVersion is never that of its Deployment,
// Service or PodDisruptionBudget.
func createOnly(mc *cachev1alpha1.Memcached) string {
	if rv := mc.GetResourceVersion(); rv != "" {
		return rv
	}
	// Never stored (a Memcached built in a test): the first revision,
	// which no write produces.
	return "1"
}

// fromApplyConfiguration copies an apply configuration holding a whole
// object, as the API server returned it, into its API type.
func fromApplyConfiguration(ac any, obj client.Object) error {
	raw, err := json.Marshal(ac)
	if err != nil {
		return fmt.Errorf("reading the applied object: %w", err)
	}
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	if err := json.Unmarshal(raw, obj); err != nil {
		return fmt.Errorf("reading the applied object: %w", err)
	}
	return nil
}
