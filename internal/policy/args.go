package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// memcachedOption is one option of memcached's command line (memcached 1.6,
// `memcached -h`), as its getopt_long reads it.
type memcachedOption struct {
	short    byte   // 0 when the option has no short form
	long     string // "" when it has no long form
	hasValue bool
	// owner is the spec field that sets the option, or the reason it cannot
	// be used in a fleet's container; "" means it is allowed in extraArgs.
	owner  string
	reason string
}

// memcachedOptions is memcached 1.6's whole option table: its short option
// string is "a:AZp:s:U:m:Mc:khiVrvdl:u:P:f:n:t:D:LR:Cb:B:I:SFXWY:e:o:N:".
// Only the options with neither owner nor reason may appear in extraArgs.
var memcachedOptions = []memcachedOption{
	{short: 'p', long: "port", hasValue: true, owner: "port"},
	{short: 'm', long: "memory-limit", hasValue: true, owner: "memoryLimitMB"},
	{short: 'c', long: "conn-limit", hasValue: true, owner: "maxConnections"},
	{short: 't', long: "threads", hasValue: true, owner: "threads"},
	{short: 'I', long: "max-item-size", hasValue: true, owner: "maxItemSize"},
	{short: 'v', long: "verbose", owner: "verbosity"},

	{short: 'M', long: "disable-evictions"},
	{short: 'C', long: "disable-cas"},
	{short: 'F', long: "disable-flush-all"},
	{short: 'X', long: "disable-dumping"},
	{short: 'W', long: "disable-watch"},
	{short: 'R', long: "max-reqs-per-event", hasValue: true},
	{short: 'b', long: "listen-backlog", hasValue: true},
	{short: 'B', long: "protocol", hasValue: true},
	{short: 'f', long: "slab-growth-factor", hasValue: true},
	{short: 'n', long: "slab-min-size", hasValue: true},
	{short: 'D', hasValue: true},
	{short: 'o', long: "extended", hasValue: true},

	{short: 'd', long: "daemon", reason: "daemonizes, so the container's main process exits"},
	{short: 'u', long: "user", hasValue: true, reason: "needs root; the pods run as UID 11211"},
	{short: 'h', long: "help", reason: "prints help and exits"},
	{short: 'i', long: "license", reason: "prints the license and exits"},
	{short: 'V', long: "version", reason: "prints the version and exits"},
	{short: 's', long: "unix-socket", hasValue: true, reason: "turns off the TCP listener that the Service and probes use"},
	{short: 'a', long: "unix-mask", hasValue: true, reason: "applies to a UNIX socket, which fleets do not use"},
	{short: 'l', long: "listen", hasValue: true, reason: "can move the listener away from the pod address that the Service and probes use"},
	{short: 'U', long: "udp-port", hasValue: true, reason: "opens a UDP listener that the Service does not expose"},
	{short: 'A', long: "enable-shutdown", reason: "lets any client stop the pod with the shutdown command"},
	{short: 'P', long: "pidfile", hasValue: true, reason: "writes a file; the root filesystem is read-only"},
	{short: 'e', long: "memory-file", hasValue: true, reason: "maps a file; the root filesystem is read-only"},
	{short: 'k', long: "lock-memory", reason: "needs the IPC_LOCK capability, which the pods drop"},
	{short: 'r', long: "enable-coredumps", reason: "writes core files; the root filesystem is read-only"},
	{short: 'L', long: "enable-largepages", reason: "needs huge pages the pod does not request"},
	{short: 'S', long: "enable-sasl", reason: "needs a SASL configuration the pods do not have"},
	{short: 'Y', long: "auth-file", hasValue: true, reason: "reads a file the pods do not have"},
	{short: 'Z', long: "enable-ssl", reason: "is spec.tls's: set spec.tls, which brings the certificates"},
	{short: 'N', long: "napi-ids", hasValue: true, reason: "ties threads to NIC queues the pod does not control"},
}

func shortOption(c byte) *memcachedOption {
	for i := range memcachedOptions {
		if memcachedOptions[i].short == c {
			return &memcachedOptions[i]
		}
	}
	return nil
}

// longOption resolves a long option the way getopt_long does: an exact name,
// or a prefix that only one option starts with.
func longOption(name string) (*memcachedOption, error) {
	var match *memcachedOption
	for i := range memcachedOptions {
		o := &memcachedOptions[i]
		switch {
		case o.long == "" || !strings.HasPrefix(o.long, name):
		case o.long == name:
			return o, nil
		case match != nil:
			return nil, fmt.Errorf("--%s is ambiguous (--%s, --%s, ...): memcached refuses to start", name, match.long, o.long)
		default:
			match = o
		}
	}
	if match == nil {
		return nil, fmt.Errorf("--%s is not a memcached option: memcached refuses to start", name)
	}
	return match, nil
}

// ParsedOption is one option found in a command line.
type ParsedOption struct {
	// Index is the argument the option starts in.
	Index int
	// Short is its one-letter form, or 0.
	Short byte
	// Long is its long form, or "".
	Long string
	// Value is its value, for an option that takes one.
	Value string
}

// Name is how the option is written in messages.
func (o ParsedOption) Name() string {
	if o.Short != 0 {
		return "-" + string(o.Short)
	}
	return "--" + o.Long
}

// ParseArgs reads args as memcached's getopt_long does: clustered short
// options (-vd), values attached (-m2048, "-m 2048") or in the next argument,
// long options with "=value" or the next argument, and unambiguous prefixes
// of long options (--mem=1 is --memory-limit). Arguments that are not
// options, and options memcached does not know, are errors at their index.
func ParseArgs(path *field.Path, args []string) ([]ParsedOption, field.ErrorList) {
	var opts []ParsedOption
	var errs field.ErrorList
	for i := 0; i < len(args); i++ {
		arg := args[i]
		start := i
		// next takes the following argument as a value, as getopt does even
		// when it looks like an option.
		next := func(name string) (string, bool) {
			if i+1 >= len(args) {
				errs = append(errs, field.Invalid(path.Index(start), arg, fmt.Sprintf("%s needs a value", name)))
				return "", false
			}
			i++
			return args[i], true
		}
		switch {
		case arg == "--":
			errs = append(errs, field.Invalid(path.Index(i), arg, "ends memcached's options; everything after it would be ignored"))
			return opts, errs
		case strings.HasPrefix(arg, "--"):
			name, value, hasEquals := strings.Cut(arg[2:], "=")
			o, err := longOption(name)
			if err != nil {
				errs = append(errs, field.Invalid(path.Index(i), arg, err.Error()))
				continue
			}
			p := ParsedOption{Index: start, Short: o.short, Long: o.long}
			switch {
			case o.hasValue && !hasEquals:
				v, ok := next("--" + o.long)
				if !ok {
					continue
				}
				p.Value = v
			case o.hasValue:
				p.Value = value
			case hasEquals && o.long != "verbose":
				errs = append(errs, field.Invalid(path.Index(i), arg, fmt.Sprintf("--%s takes no value", o.long)))
				continue
			}
			opts = append(opts, p)
		case len(arg) > 1 && arg[0] == '-':
			for j := 1; j < len(arg); j++ {
				o := shortOption(arg[j])
				if o == nil {
					errs = append(errs, field.Invalid(path.Index(i), arg, fmt.Sprintf("-%c is not a memcached option: memcached refuses to start", arg[j])))
					break
				}
				p := ParsedOption{Index: start, Short: o.short, Long: o.long}
				if o.hasValue {
					// The rest of the argument is the value, if any is left.
					if j+1 < len(arg) {
						p.Value = arg[j+1:]
					} else if v, ok := next("-" + string(o.short)); ok {
						p.Value = v
					} else {
						break
					}
					opts = append(opts, p)
					break
				}
				opts = append(opts, p)
			}
		default:
			errs = append(errs, field.Invalid(path.Index(i), arg, "is not an option; memcached takes options only (for example -o modern or --disable-cas)"))
		}
	}
	return opts, errs
}

// validateExtraArgs accepts only the options no field owns and that can run
// in the fleet's restricted container.
func validateExtraArgs(path *field.Path, args []string) field.ErrorList {
	opts, errs := ParseArgs(path, args)
	for _, p := range opts {
		o := shortOption(p.Short)
		if o == nil {
			o, _ = longOption(p.Long)
		}
		at := path.Index(p.Index)
		switch {
		case o.owner != "":
			errs = append(errs, field.Forbidden(at, fmt.Sprintf("%s is set by spec.%s; set that field instead", p.Name(), o.owner)))
		case o.reason != "":
			errs = append(errs, field.Forbidden(at, fmt.Sprintf("%s %s", p.Name(), o.reason)))
		case o.hasValue && strings.TrimSpace(p.Value) == "":
			errs = append(errs, field.Invalid(at, args[p.Index], fmt.Sprintf("%s needs a value", p.Name())))
		case o.short == 'o':
			errs = append(errs, validateExtended(at, args[p.Index], p.Value)...)
		default:
			if msg := badValue(o.short, p.Value); msg != "" {
				errs = append(errs, field.Invalid(at, args[p.Index], p.Name()+" "+msg+": memcached refuses to start otherwise"))
			}
		}
	}
	return errs
}

// badValue says what is wrong with the value of a short option memcached
// reads as a word or a number, or "".
func badValue(short byte, value string) string {
	switch short {
	case 'B':
		if value != "auto" && value != "binary" && value != "ascii" {
			return "takes auto, binary or ascii"
		}
	case 'R', 'b', 'n':
		if n, err := strconv.Atoi(value); err != nil || n <= 0 {
			return "takes a whole number above 0"
		}
	case 'f':
		if f, err := strconv.ParseFloat(value, 64); err != nil || f <= 1 {
			return "takes a number above 1"
		}
	case 'D':
		if len(value) != 1 {
			return "takes one character"
		}
	}
	return ""
}

// extendedOptions are the -o sub-options of memcached 1.6.18 (memcached -h)
// that can run in a fleet's pod; each also takes a no_ prefix where
// memcached has one. The property test starts the real memcached with them.
var extendedOptions = []string{
	"maxconns_fast", "no_maxconns_fast", "hashpower", "tail_repair_time", "hash_algorithm",
	"lru_crawler", "no_lru_crawler", "lru_crawler_sleep", "lru_crawler_tocrawl", "read_buf_mem_limit",
	"lru_maintainer", "no_lru_maintainer", "hot_lru_pct", "warm_lru_pct", "hot_max_factor", "warm_max_factor",
	"temporary_ttl", "idle_timeout", "watcher_logbuf_size", "worker_logbuf_size", "track_sizes",
	"no_hashexpand", "modern", "no_modern", "slab_reassign", "slab_automove", "slab_automove_ratio",
	"slab_automove_window", "slab_automove_freeratio", "sock_cookie_id",
}

// ExtendedOptions are the -o sub-options extraArgs may use.
func ExtendedOptions() []string { return slices.Clone(extendedOptions) }

// validateExtended checks the comma-separated sub-options of -o: only
// memcached's own, and none that needs files (TLS certificates, extstore's
// storage file: the pods have neither the files nor a writable filesystem).
func validateExtended(path *field.Path, arg, value string) field.ErrorList {
	var errs field.ErrorList
	for _, sub := range strings.Split(value, ",") {
		key, _, _ := strings.Cut(strings.TrimSpace(sub), "=")
		switch {
		case key == "":
			errs = append(errs, field.Invalid(path, arg, "-o has an empty sub-option"))
		case strings.HasPrefix(key, "ssl_"):
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("-o %s configures TLS, which is spec.tls's: set spec.tls", key)))
		case strings.HasPrefix(key, "ext_"):
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("-o %s is extstore's, which needs a writable storage file; the root filesystem is read-only", key)))
		case key == "slab_chunk_max":
			errs = append(errs, field.Forbidden(path, "-o slab_chunk_max is experimental in memcached and must match maxItemSize: set maxItemSize to a multiple of 512k instead"))
		case !slices.Contains(extendedOptions, key):
			errs = append(errs, field.Invalid(path, arg, fmt.Sprintf("-o %s is not a memcached 1.6 sub-option (allowed: %s): memcached refuses to start", key, strings.Join(extendedOptions, ", "))))
		}
	}
	return errs
}
