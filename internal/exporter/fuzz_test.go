package exporter

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"os"
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
