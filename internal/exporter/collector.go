package exporter

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultPort is the upstream exporter's port, which scrape configs expect.
const DefaultPort = 9150

// series is one metric read from one statistic: from `stats` unless
// setting is true.
type series struct {
	name, help string
	kind       prometheus.ValueType
	key        string
	setting    bool
}

// metrics follow the upstream exporter's names and help texts.
var metrics = []series{
	{"uptime_seconds", "Number of seconds since the server started.", prometheus.CounterValue, "uptime", false},
	{"time_seconds", "current UNIX time according to the server.", prometheus.GaugeValue, "time", false},
	{"process_user_cpu_seconds_total", "Accumulated user time for this process.", prometheus.CounterValue, "rusage_user", false},
	{"process_system_cpu_seconds_total", "Accumulated system time for this process.", prometheus.CounterValue, "rusage_system", false},
	{"read_bytes_total", "Total number of bytes read by this server from network.", prometheus.CounterValue, "bytes_read", false},
	{"written_bytes_total", "Total number of bytes sent by this server to network.", prometheus.CounterValue, "bytes_written", false},
	{"current_connections", "Current number of open connections.", prometheus.GaugeValue, "curr_connections", false},
	{"max_connections", "Maximum number of clients allowed.", prometheus.GaugeValue, "maxconns", true},
	{"connections_total", "Total number of connections opened since the server started running.", prometheus.CounterValue, "total_connections", false},
	{"connections_rejected_total", "Total number of connections rejected due to hitting the memcached's -c limit in maxconns_fast mode.", prometheus.CounterValue, "rejected_connections", false},
	{"connections_yielded_total", "Total number of connections yielded running due to hitting the memcached's -R limit.", prometheus.CounterValue, "conn_yields", false},
	{"connections_listener_disabled_total", "Number of times that memcached has hit its connections limit and disabled its listener.", prometheus.CounterValue, "listen_disabled_num", false},
	{"accepting_conns", "The Memcached server is currently accepting new connections.", prometheus.GaugeValue, "accepting_conns", false},
	{"current_bytes", "Current number of bytes used to store items.", prometheus.GaugeValue, "bytes", false},
	{"limit_bytes", "Number of bytes this server is allowed to use for storage.", prometheus.GaugeValue, "limit_maxbytes", false},
	{"current_items", "Current number of items stored by this instance.", prometheus.GaugeValue, "curr_items", false},
	{"items_total", "Total number of items stored during the life of this instance.", prometheus.CounterValue, "total_items", false},
	{"items_evicted_total", "Total number of valid items removed from cache to free memory for new items.", prometheus.CounterValue, "evictions", false},
	{"items_reclaimed_total", "Total number of times an entry was stored using memory from an expired entry.", prometheus.CounterValue, "reclaimed", false},
	{"item_too_large_total", "The number of times an item exceeded the max-item-size when being stored.", prometheus.CounterValue, "store_too_large", false},
	{"item_no_memory_total", "The number of times an item could not be stored due to no more memory.", prometheus.CounterValue, "store_no_memory", false},
	{"direct_reclaims_total", "Times worker threads had to directly reclaim or evict items.", prometheus.CounterValue, "direct_reclaims", false},
	{"lru_crawler_enabled", "Whether the LRU crawler is enabled.", prometheus.GaugeValue, "lru_crawler", true},
	{"lru_crawler_sleep", "Microseconds to sleep between LRU crawls.", prometheus.GaugeValue, "lru_crawler_sleep", true},
	{"lru_crawler_to_crawl", "Max items to crawl per slab per run.", prometheus.GaugeValue, "lru_crawler_tocrawl", true},
	{"lru_crawler_maintainer_thread", "Split LRU mode and background threads.", prometheus.GaugeValue, "lru_maintainer_thread", true},
	{"lru_crawler_hot_percent", "Percent of slab memory reserved for HOT LRU.", prometheus.GaugeValue, "hot_lru_pct", true},
	{"lru_crawler_warm_percent", "Percent of slab memory reserved for WARM LRU.", prometheus.GaugeValue, "warm_lru_pct", true},
	{"lru_crawler_hot_max_factor", "Set idle age of HOT LRU to COLD age * this", prometheus.GaugeValue, "hot_max_factor", true},
	{"lru_crawler_warm_max_factor", "Set idle age of WARM LRU to COLD age * this", prometheus.GaugeValue, "warm_max_factor", true},
	{"lru_crawler_starts_total", "Times an LRU crawler was started.", prometheus.CounterValue, "lru_crawler_starts", false},
	{"lru_crawler_reclaimed_total", "Total items freed by LRU Crawler.", prometheus.CounterValue, "crawler_reclaimed", false},
	{"lru_crawler_items_checked_total", "Total items examined by LRU Crawler.", prometheus.CounterValue, "crawler_items_checked", false},
	{"lru_crawler_moves_to_cold_total", "Total number of items moved from HOT/WARM to COLD LRU's.", prometheus.CounterValue, "moves_to_cold", false},
	{"lru_crawler_moves_to_warm_total", "Total number of items moved from COLD to WARM LRU.", prometheus.CounterValue, "moves_to_warm", false},
	{"lru_crawler_moves_within_lru_total", "Total number of items reshuffled within HOT or WARM LRU's.", prometheus.CounterValue, "moves_within_lru", false},
}

// slabMetrics are per slab class, labelled slab, from `stats slabs` and
// `stats items`, under the upstream exporter's names and types.
var slabMetrics = []series{
	{"chunk_size_bytes", "Number of bytes allocated to each chunk within this slab class.", prometheus.GaugeValue, "chunk_size", false},
	{"chunks_per_page", "Number of chunks within a single page for this slab class.", prometheus.GaugeValue, "chunks_per_page", false},
	{"current_pages", "Number of pages allocated to this slab class.", prometheus.GaugeValue, "total_pages", false},
	{"current_chunks", "Number of chunks allocated to this slab class.", prometheus.GaugeValue, "total_chunks", false},
	{"chunks_used", "Number of chunks allocated to an item.", prometheus.GaugeValue, "used_chunks", false},
	{"chunks_free", "Number of chunks not yet allocated items.", prometheus.GaugeValue, "free_chunks", false},
	{"chunks_free_end", "Number of free chunks at the end of the last allocated page.", prometheus.GaugeValue, "free_chunks_end", false},
	{"mem_requested_bytes", "Number of bytes of memory actual items take up within a slab.", prometheus.CounterValue, "mem_requested", false},
	{"current_items", "Number of items currently stored in this slab class.", prometheus.GaugeValue, "number", false},
	{"hot_items", "Number of items presently stored in the HOT LRU.", prometheus.GaugeValue, "number_hot", false},
	{"warm_items", "Number of items presently stored in the WARM LRU.", prometheus.GaugeValue, "number_warm", false},
	{"cold_items", "Number of items presently stored in the COLD LRU.", prometheus.GaugeValue, "number_cold", false},
	{"items_age_seconds", "Number of seconds the oldest item has been in the slab class.", prometheus.GaugeValue, "age", false},
	{"hot_age_seconds", "Age of the oldest item in HOT LRU.", prometheus.GaugeValue, "age_hot", false},
	{"warm_age_seconds", "Age of the oldest item in WARM LRU.", prometheus.GaugeValue, "age_warm", false},
	{"items_evicted_total", "Total number of times an item had to be evicted from the LRU before it expired.", prometheus.CounterValue, "evicted", false},
	{"items_evicted_nonzero_total", "Total number of times an item which had an explicit expire time set had to be evicted from the LRU before it expired.", prometheus.CounterValue, "evicted_nonzero", false},
	{"items_evicted_time_seconds", "Seconds since the last access for the most recent item evicted from this class.", prometheus.CounterValue, "evicted_time", false},
	{"items_evicted_unfetched_total", "Total number of items evicted and never fetched.", prometheus.CounterValue, "evicted_unfetched", false},
	{"items_expired_unfetched_total", "Total number of valid items evicted from the LRU which were never touched after being set.", prometheus.CounterValue, "expired_unfetched", false},
	{"items_outofmemory_total", "Total number of items for this slab class that have triggered an out of memory error.", prometheus.CounterValue, "outofmemory", false},
	{"items_reclaimed_total", "Total number of items reclaimed.", prometheus.CounterValue, "reclaimed", false},
	{"items_tailrepairs_total", "Total number of times the entries for a particular ID need repairing.", prometheus.CounterValue, "tailrepairs", false},
	{"items_crawler_reclaimed_total", "Number of items freed by the LRU Crawler.", prometheus.CounterValue, "crawler_reclaimed", false},
	{"items_moves_to_cold", "Number of items moved from HOT or WARM into COLD.", prometheus.CounterValue, "moves_to_cold", false},
	{"items_moves_to_warm", "Number of items moves from COLD into WARM.", prometheus.CounterValue, "moves_to_warm", false},
	{"items_moves_within_lru", "Number of times active items were bumped within HOT or WARM.", prometheus.CounterValue, "moves_within_lru", false},
}

// slabCommands are memcached_slab_commands_total{slab,command,status}.
var slabCommands = []struct{ command, status, key string }{
	{"get", "hit", "get_hits"}, {"set", "hit", "cmd_set"}, {"delete", "hit", "delete_hits"},
	{"incr", "hit", "incr_hits"}, {"decr", "hit", "decr_hits"},
	{"cas", "hit", "cas_hits"}, {"cas", "badval", "cas_badval"}, {"touch", "hit", "touch_hits"},
}

// commands are memcached_commands_total{command,status} and the statistic
// each comes from.
var commands = []struct{ command, status, key string }{
	{"get", "hit", "get_hits"}, {"get", "miss", "get_misses"}, {"get", "expired", "get_expired"}, {"get", "flushed", "get_flushed"},
	{"set", "hit", "cmd_set"},
	{"delete", "hit", "delete_hits"}, {"delete", "miss", "delete_misses"},
	{"incr", "hit", "incr_hits"}, {"incr", "miss", "incr_misses"},
	{"decr", "hit", "decr_hits"}, {"decr", "miss", "decr_misses"},
	{"cas", "hit", "cas_hits"}, {"cas", "miss", "cas_misses"}, {"cas", "badval", "cas_badval"},
	{"touch", "hit", "touch_hits"}, {"touch", "miss", "touch_misses"},
	{"flush", "hit", "cmd_flush"},
}

// Collector scrapes one memcached server each time it is collected.
type Collector struct {
	address  string
	timeout  time.Duration
	logger   *slog.Logger
	authFile string

	up, version, commands, malloced, slabCommands *prometheus.Desc
	descs, slabDescs                              []*prometheus.Desc
}

// NewCollector scrapes address, giving up after timeout.
func NewCollector(address string, timeout time.Duration, logger *slog.Logger) *Collector {
	c := &Collector{
		address: address, timeout: timeout, logger: logger,
		up:      prometheus.NewDesc("memcached_up", "Could the memcached server be reached.", nil, nil),
		version: prometheus.NewDesc("memcached_version", "The version of this memcached server.", []string{"version"}, nil),
		commands: prometheus.NewDesc("memcached_commands_total",
			"Total number of all requests broken down by command (get, set, etc.) and status.", []string{"command", "status"}, nil),
	}
	c.malloced = prometheus.NewDesc("memcached_malloced_bytes", "Number of bytes of memory allocated to slab pages.", nil, nil)
	c.slabCommands = prometheus.NewDesc("memcached_slab_commands_total",
		"Total number of all requests broken down by command (get, set, etc.) and status per slab.", []string{"slab", "command", "status"}, nil)
	for _, m := range metrics {
		c.descs = append(c.descs, prometheus.NewDesc("memcached_"+m.name, m.help, nil, nil))
	}
	for _, m := range slabMetrics {
		c.slabDescs = append(c.slabDescs, prometheus.NewDesc("memcached_slab_"+m.name, m.help, []string{"slab"}, nil))
	}
	return c
}

// WithAuthFile logs each scrape in with the first entry of memcached's auth
// file. The file is read on every scrape, so credentials rotated in place
// (a Secret volume) are followed without a restart.
func (c *Collector) WithAuthFile(file string) *Collector {
	c.authFile = file
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.version
	ch <- c.commands
	ch <- c.malloced
	ch <- c.slabCommands
	for _, d := range append(slices.Clone(c.descs), c.slabDescs...) {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A server that cannot be reached,
// hangs or answers nonsense gives memcached_up 0, never a failed scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	var creds *Credentials
	var err error
	if c.authFile != "" {
		var cr Credentials
		cr, err = ReadAuthFile(c.authFile)
		creds = &cr
	}
	var s *Stats
	if err == nil {
		s, err = Fetch(context.Background(), c.address, c.timeout, creds)
	}
	if err != nil {
		c.logger.Warn("Scrape failed", "address", c.address, "error", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, m := range c.metrics(s) {
		ch <- m
	}
}

// metrics turns one scrape's statistics into metrics. A value the metric
// cannot carry (a label that is not UTF-8, from a server that answers
// garbage) drops that one metric instead of panicking the exporter.
func (c *Collector) metrics(s *Stats) []prometheus.Metric {
	var out []prometheus.Metric
	add := func(d *prometheus.Desc, kind prometheus.ValueType, v float64, labels ...string) {
		if m, err := prometheus.NewConstMetric(d, kind, v, labels...); err == nil {
			out = append(out, m)
		}
	}
	if v, ok := s.Stats["version"]; ok {
		add(c.version, prometheus.GaugeValue, 1, v)
	}
	for i, m := range metrics {
		src := s.Stats
		if m.setting {
			src = s.Settings
		}
		if v, ok := number(src[m.key]); ok {
			add(c.descs[i], m.kind, v)
		}
	}
	for _, cmd := range commands {
		if v, ok := number(s.Stats[cmd.key]); ok {
			add(c.commands, prometheus.CounterValue, v, cmd.command, cmd.status)
		}
	}
	if v, ok := number(s.SlabTotals["total_malloced"]); ok {
		add(c.malloced, prometheus.GaugeValue, v)
	}
	for slab, stats := range s.Slabs {
		for i, m := range slabMetrics {
			if v, ok := number(stats[m.key]); ok {
				add(c.slabDescs[i], m.kind, v, slab)
			}
		}
		for _, cmd := range slabCommands {
			if v, ok := number(stats[cmd.key]); ok {
				add(c.slabCommands, prometheus.CounterValue, v, slab, cmd.command, cmd.status)
			}
		}
	}
	return out
}

// number reads a statistic: an integer, a decimal (rusage's "sec.usec"), or
// memcached's yes/no and on/off.
func number(s string) (float64, bool) {
	switch s {
	case "":
		return 0, false
	case "yes", "on", "true":
		return 1, true
	case "no", "off", "false":
		return 0, true
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// MaxSamples bounds the samples of one scrape of the exporter: the
// ServiceMonitor's sampleLimit, above the most a memcached gives
// (TestMostSamplesAScrapeGives), so that Prometheus refuses a scrape only
// of something that is not this exporter.
const MaxSamples = 4096

// Handler serves the collector's metrics, with the exporter's own process
// and Go runtime metrics, in the Prometheus exposition formats. One scrape
// runs at a time (others get 503 at once, so a scraper that retries cannot
// pile connections onto memcached), and none runs longer than the
// collector's timeout and a second more.
func Handler(c *Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
		MaxRequestsInFlight: 1, Timeout: c.timeout + time.Second})
}
