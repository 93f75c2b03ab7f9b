package exporter

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// FuzzRead: whatever a server answers to the four stats commands, the
// exporter reads it within its bounds and turns it into metrics without
// panicking; every metric it keeps can be written out.
func FuzzRead(f *testing.F) {
	real, err := os.ReadFile("testdata/memcached-1.6.18.txt")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{
		real,
		[]byte("STAT version \xff\xfe\r\nEND\r\nEND\r\nSTAT \xff:chunk_size 96\r\nEND\r\nSTAT items:\xc3:number 1\r\nEND\r\n"),
		[]byte("STAT  x\r\nEND\r\n"),
		[]byte("SERVER_ERROR out of memory\r\n"),
		bytes.Repeat([]byte("STAT a 1\r\n"), maxLines+1),
		append([]byte("STAT version "), bytes.Repeat([]byte("9"), maxLineBytes)...),
		[]byte("STAT curr_items -1e308\r\nSTAT uptime NaN\r\nEND\r\nEND\r\nEND\r\nEND\r\n"),
	} {
		f.Add(seed)
	}
	c := NewCollector("fuzz", time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.Fuzz(func(t *testing.T, answer []byte) {
		rw := bufio.NewReadWriter(bufio.NewReaderSize(bytes.NewReader(answer), maxLineBytes), bufio.NewWriter(io.Discard))
		s, err := read(rw)
		if err != nil {
			return
		}
		for _, m := range c.metrics(s) {
			if err := m.Write(&dto.Metric{}); err != nil {
				t.Fatalf("a kept metric does not write: %v", err)
			}
		}
	})
}

// TestMetricsDropWhatTheyCannotCarry: a version or slab label that is not
// UTF-8 drops that metric; the rest of the scrape stands.
func TestMetricsDropWhatTheyCannotCarry(t *testing.T) {
	c := NewCollector("x", time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s := &Stats{Stats: map[string]string{"version": "\xff", "uptime": "5"}, Settings: map[string]string{},
		Slabs: map[string]map[string]string{"\xfe": {"chunk_size": "96"}, "1": {"chunk_size": "96"}}, SlabTotals: map[string]string{}}
	got := map[string]int{}
	for _, m := range c.metrics(s) {
		got[m.Desc().String()]++
	}
	if n := len(c.metrics(s)); n != 2 {
		t.Fatalf("want uptime and slab 1's chunk size, got %d metrics: %v", n, got)
	}
}

// TestMostSamplesAScrapeGives: memcached has at most 63 slab classes
// (MAX_NUMBER_OF_SLAB_CLASSES less one); a scrape of a server with every
// statistic in every class stays under MaxSamples, the ServiceMonitor's
// sampleLimit, with room for the Go and process metrics.
func TestMostSamplesAScrapeGives(t *testing.T) {
	c := NewCollector("x", time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s := &Stats{Stats: map[string]string{"version": "1.6.18"}, Settings: map[string]string{}, Slabs: map[string]map[string]string{}, SlabTotals: map[string]string{"total_malloced": "1"}}
	for _, m := range metrics {
		s.Stats[m.key], s.Settings[m.key] = "1", "1"
	}
	for _, cmd := range commands {
		s.Stats[cmd.key] = "1"
	}
	for class := 1; class <= 63; class++ {
		stats := map[string]string{}
		for _, m := range slabMetrics {
			stats[m.key] = "1"
		}
		for _, cmd := range slabCommands {
			stats[cmd.key] = "1"
		}
		s.Slabs[strconv.Itoa(class)] = stats
	}
	n := len(c.metrics(s)) + 1 // and memcached_up
	const runtimeMetrics = 200 // the Go collector's and the process collector's, with room
	if n+runtimeMetrics > MaxSamples {
		t.Fatalf("a full scrape gives %d samples, and the exporter's own ~%d: more than MaxSamples %d", n, runtimeMetrics, MaxSamples)
	}
	t.Logf("%d memcached samples at most, MaxSamples %d", n, MaxSamples)
}
