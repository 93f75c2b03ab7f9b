// Package logbuf is a log sink for tests, safe to read while the code under
// test writes to it from its own goroutines.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer collects what is written to it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
