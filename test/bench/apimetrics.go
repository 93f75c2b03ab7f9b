package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// webhookHistogram is the API server's own view of the webhook calls:
// apiserver_admission_webhook_admission_duration_seconds, per webhook name,
// cumulative bucket counts by upper bound (le).
type webhookHistogram map[string]map[string]float64

// scrapeWebhookHistogram reads the histogram from the API server's /metrics.
func scrapeWebhookHistogram(ctx context.Context, s *clusterState) (webhookHistogram, error) {
	body, err := adminGet(ctx, s, "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	h := webhookHistogram{}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const prefix = "apiserver_admission_webhook_admission_duration_seconds_bucket{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		name, le := label(line, "name"), label(line, "le")
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return nil, err
		}
		if h[name] == nil {
			h[name] = map[string]float64{}
		}
		h[name][le] += v // summed over operation, type and rejected
	}
	return h, sc.Err()
}

func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

// shareUnder is, per webhook, the share of calls between before and after
// that took at most the bucket bound le (e.g. "0.005"), and their number.
func shareUnder(before, after webhookHistogram, le string) map[string]string {
	out := map[string]string{}
	for name, buckets := range after {
		total := buckets["+Inf"] - before[name]["+Inf"]
		if total <= 0 {
			continue
		}
		under := buckets[le] - before[name][le]
		out[name] = fmt.Sprintf("%.1f%% of %.0f calls ≤ %s s", 100*under/total, total, le)
	}
	return out
}
