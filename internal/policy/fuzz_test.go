package policy_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/test/specgen"
)

// Properties of the admission rules, over generated Memcacheds. `go test`
// runs each on its seed corpus (testdata/fuzz); `make fuzz` searches further.

func seed(f *testing.F) {
	for _, s := range []string{"", "\x00", "\x01\x01\x01\x01\x01\x01", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7", strings.Repeat("\x0b\x07", 40), strings.Repeat("\x01", 120)} {
		f.Add([]byte(s))
	}
}

// FuzzDefault: defaulting is idempotent, never changes a value the user set,
// and resolving a stored (defaulted) spec builds the same pods as resolving
// the spec as written. Defaulting a create differs only by the create-only
// fields, which an update's defaulting never sets.
func FuzzDefault(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := specgen.Memcached(data).Spec
		once := *in.DeepCopy()
		policy.Default(&once, cfg)
		twice := *once.DeepCopy()
		policy.Default(&twice, cfg)
		if !apiequality.Semantic.DeepEqual(once, twice) {
			t.Fatalf("Default is not idempotent:\n%+v\n%+v", once, twice)
		}
		if in.Size != nil && *in.Size != *once.Size || in.Image != nil && *in.Image != *once.Image ||
			in.MaxItemSize != nil && *in.MaxItemSize != *once.MaxItemSize || in.Port != nil && *in.Port != *once.Port {
			t.Fatalf("Default changed a value the user set:\n%+v\n%+v", in, once)
		}
		if once.MemoryLimitMB != in.MemoryLimitMB && (once.MemoryLimitMB == nil || in.MemoryLimitMB == nil) ||
			once.Threads != in.Threads && (once.Threads == nil || in.Threads == nil) {
			t.Fatalf("Default stored a derived value")
		}
		if !apiequality.Semantic.DeepEqual(policy.Resolve(&in, cfg), policy.Resolve(&once, cfg)) {
			t.Fatalf("resolving the stored spec differs from resolving the written one")
		}
		if !apiequality.Semantic.DeepEqual(once.NodeLossTolerationSeconds, in.NodeLossTolerationSeconds) {
			t.Fatalf("Default, which updates use, set nodeLossTolerationSeconds: it would roll fleets older than the field")
		}
		created := *in.DeepCopy()
		policy.DefaultCreate(&created, cfg)
		again := *created.DeepCopy()
		policy.DefaultCreate(&again, cfg)
		if !apiequality.Semantic.DeepEqual(created, again) {
			t.Fatalf("DefaultCreate is not idempotent:\n%+v\n%+v", created, again)
		}
		if created.NodeLossTolerationSeconds == nil || in.NodeLossTolerationSeconds != nil && *in.NodeLossTolerationSeconds != *created.NodeLossTolerationSeconds {
			t.Fatalf("DefaultCreate left nodeLossTolerationSeconds unset or changed the user's %v", in.NodeLossTolerationSeconds)
		}
		created.NodeLossTolerationSeconds = once.NodeLossTolerationSeconds
		if !apiequality.Semantic.DeepEqual(created, once) {
			t.Fatalf("DefaultCreate differs from Default by more than the create-only fields")
		}
	})
}

// FuzzValidate: validation never panics and puts every error under spec or
// metadata; an update that changes nothing is always admitted; ratcheting
// only ever removes errors; and a spec that passes builds a Deployment whose
// memcached command line keeps every field's value.
func FuzzValidate(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		mc := specgen.Memcached(data)
		policy.Default(&mc.Spec, cfg)
		errs, _ := policy.ValidateCreate(mc, policy.Limits{MaxSize: 10})
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "spec") && !strings.HasPrefix(e.Field, "metadata") {
				t.Fatalf("error outside spec and metadata: %v", e)
			}
		}
		if errs, warnings := policy.ValidateUpdate(mc, mc.DeepCopy(), policy.Limits{MaxSize: 10}); len(errs)+len(warnings) > 0 {
			t.Fatalf("an unchanged object is refused or warned about: %v %v", errs, warnings)
		}
		other := specgen.Memcached(append([]byte{0x5a}, data...))
		other.Name = mc.Name
		policy.Default(&other.Spec, cfg)
		upd, _ := policy.ValidateUpdate(other, mc, policy.Limits{MaxSize: 10})
		for _, e := range upd {
			if !slices.ContainsFunc(errs, func(c *field.Error) bool { return c.Field == e.Field && c.Detail == e.Detail }) &&
				e.Field != "spec.size" {
				t.Fatalf("an update error the object itself does not have: %v", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		spec := policy.Resolve(&mc.Spec, cfg)
		opts, perrs := policy.ParseArgs(field.NewPath("args"), desired.Args(spec))
		if len(perrs) > 0 {
			t.Fatalf("the built command line does not parse: %v", perrs)
		}
		last := map[byte]string{}
		for _, o := range opts {
			last[o.Short] = o.Value
		}
		want := map[byte]string{'p': itoa(*spec.Port), 'm': itoa(*spec.MemoryLimitMB), 'c': itoa(*spec.MaxConnections), 't': itoa(*spec.Threads), 'I': *spec.MaxItemSize}
		for k, v := range want {
			if last[k] != v {
				t.Fatalf("-%c is %q on the command line, the field says %q: %v", k, last[k], v, desired.Args(spec))
			}
		}
		// The auth file comes from spec.auth alone, never from extraArgs.
		if y, ok := last['Y']; ok != (spec.Auth != nil) || (ok && y != "/etc/memcached/auth/auth-file") {
			t.Fatalf("-Y %q on the command line with spec.auth %v: %v", y, spec.Auth, desired.Args(spec))
		}
		// TLS and its listeners come from spec.tls alone: the TLS port on
		// every address, the loopback listener without TLS, and a plaintext
		// listener on every address only when plaintextPort asks.
		_, z := last['Z']
		l, hasL := last['l']
		if z != policy.TLSEnabled(spec) || hasL != z {
			t.Fatalf("-Z %v, -l %q on the command line with spec.tls %+v: %v", z, l, spec.TLS, desired.Args(spec))
		}
		if z {
			want := "*:" + itoa(*spec.Port) + ",notls:127.0.0.1:" + itoa(policy.TLSLoopbackPort)
			if pp := spec.TLS.PlaintextPort; pp != nil {
				want += ",notls:*:" + itoa(*pp)
			}
			if l != want {
				t.Fatalf("-l %q, want %q: %v", l, want, desired.Args(spec))
			}
		}
		for _, forbidden := range []byte{'d', 'u', 's', 'h', 'V'} {
			if _, ok := last[forbidden]; ok {
				t.Fatalf("-%c made it onto the command line: %v", forbidden, desired.Args(spec))
			}
		}
		if v := ptr.Deref(spec.Verbosity, 0); v == 0 {
			if _, ok := last['v']; ok {
				t.Fatalf("-v on the command line with verbosity 0")
			}
		}
	})
}

// FuzzExtraArgs: any argument list (NUL-separated) is parsed without panic,
// errors stay on an index of the list, and a list that is accepted can
// never set an option a field owns.
func FuzzExtraArgs(f *testing.F) {
	for _, s := range []string{"-m2048", "-m 2048", "-vd", "--memory-limit=4096", "--mem=1", "-o\x00modern", "--port\x001", "-C\x00-M", "--", "-R"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		mc := &cachev1alpha1.Memcached{}
		mc.Name = "cache"
		mc.Spec.ExtraArgs = args
		policy.Default(&mc.Spec, cfg)
		errs := policy.Validate(mc)
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "spec.extraArgs[") {
				t.Fatalf("error off the list: %v", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		opts, perrs := policy.ParseArgs(field.NewPath("spec", "extraArgs"), args)
		if len(perrs) > 0 {
			t.Fatalf("accepted but does not parse: %v", perrs)
		}
		for _, o := range opts {
			if strings.ContainsRune("pmctIvduslUAhiVPekrLSYZNa", rune(o.Short)) {
				t.Fatalf("accepted %s in %q", o.Name(), args)
			}
		}
	})
}

func itoa(v int32) string { return strconv.Itoa(int(v)) }
