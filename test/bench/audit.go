package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// auditEvent holds the fields of an audit.k8s.io/v1 Event the bench reads.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// requestCounts are one user's API requests in a window.
type requestCounts struct {
	Total int `json:"total"`
	// Writes are create, update, patch, delete and deletecollection
	// requests (a server-side apply is a patch), events included.
	Writes int `json:"writes"`
	// WritesExclEvents leaves out event creation and patches.
	WritesExclEvents int `json:"writesExclEvents"`
	// FailedWrites answered 4xx/5xx (conflicts, for instance).
	FailedWrites int            `json:"failedWrites"`
	ByVerb       map[string]int `json:"byVerb"`
	// ByVerbResource is "verb resource[/subresource]" → count.
	ByVerbResource map[string]int `json:"byVerbResource"`
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// auditReader counts requests from the API server's audit log window by
// window: each window ends at a marker request whose audit line proves that
// the log holds every request answered before it.
type auditReader struct {
	path   string
	offset int64
	marker client.Client
}

// skip moves to the end of the log as it is now: the next window starts here.
func (a *auditReader) skip(ctx context.Context) error {
	_, err := a.window(ctx, "")
	return err
}

// window returns user's requests since the end of the previous window.
func (a *auditReader) window(ctx context.Context, user string) (requestCounts, error) {
	counts := newRequestCounts()
	id := "bench-marker-" + rand.String(10)
	// A read of a namespace that does not exist: the marker's own request.
	_ = a.marker.Get(ctx, client.ObjectKey{Name: id}, &corev1.Namespace{})
	f, err := os.Open(a.path)
	if err != nil {
		return counts, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return counts, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	deadline := time.Now().Add(30 * time.Second)
	var partial []byte
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			// Not yet written: wait for the marker's line (the log backend
			// writes a request's line when it completes).
			partial = append(partial, line...)
			if time.Now().After(deadline) {
				return counts, fmt.Errorf("audit marker %s not in %s after 30s", id, a.path)
			}
			select {
			case <-ctx.Done():
				return counts, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return counts, err
		}
		if len(partial) > 0 {
			line, partial = append(partial, line...), nil
		}
		a.offset += int64(len(line))
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return counts, fmt.Errorf("audit line: %w", err)
		}
		if ev.User.Username == userMarker && ev.ObjectRef != nil && ev.ObjectRef.Name == id {
			return counts, nil
		}
		if ev.User.Username != user {
			continue
		}
		counts.add(&ev)
	}
}

// add counts ev, once per request: a watch when its response starts, any
// other request when it completes.
func (c *requestCounts) add(ev *auditEvent) {
	if (ev.Verb == "watch" && ev.Stage != "ResponseStarted") || (ev.Verb != "watch" && ev.Stage != "ResponseComplete") {
		return
	}
	c.Total++
	c.ByVerb[ev.Verb]++
	res := ""
	if ev.ObjectRef != nil {
		res = ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
	}
	c.ByVerbResource[ev.Verb+" "+res]++
	if isWrite(ev.Verb) {
		c.Writes++
		if res != "events" {
			c.WritesExclEvents++
		}
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 400 {
			c.FailedWrites++
		}
	}
}

func newRequestCounts() requestCounts {
	return requestCounts{ByVerb: map[string]int{}, ByVerbResource: map[string]int{}}
}

// String is "create deployments=100, patch memcacheds/status=100, …" for
// the writes, sorted.
func (c requestCounts) String() string {
	var parts []string
	for k, v := range c.ByVerbResource {
		if isWrite(strings.Fields(k)[0]) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
