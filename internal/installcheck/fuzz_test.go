package installcheck

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// conn is a server that answers with a fixed byte stream and swallows what
// it is sent.
type conn struct{ io.Reader }

func (conn) Write(p []byte) (int, error) { return len(p), nil }

// FuzzSetGet: whatever the server answers, the helm test's client returns
// (success only for the right answer) without panicking or reading more
// than the value it stored.
func FuzzSetGet(f *testing.F) {
	for _, seed := range []string{
		"STORED\r\nVALUE k 0 5\r\nhello\r\nEND\r\n",
		"STORED\r\nVALUE k 0 -5\r\nhello\r\nEND\r\n",
		"STORED\r\nVALUE k 0 99999999999\r\n",
		"STORED\r\nVALUE k 0 5\r\nhel",
		"SERVER_ERROR out of memory\r\n",
		"STORED\r\nVALUE other 0 5\r\nhello\r\nEND\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		if err := SetGet(conn{bytes.NewReader(answer)}, "k", "hello"); err == nil && !bytes.Contains(answer, []byte("hello")) {
			t.Fatalf("success from an answer without the value: %q", answer)
		}
	})
}

func TestSetGetRefusesAnotherSize(t *testing.T) {
	for _, answer := range []string{"STORED\r\nVALUE k 0 -5\r\n", "STORED\r\nVALUE k 0 1099511627776\r\n", "STORED\r\nVALUE k 0 4\r\nhell\r\nEND\r\n"} {
		if err := SetGet(conn{strings.NewReader(answer)}, "k", "hello"); err == nil || !strings.Contains(err.Error(), "want 5") {
			t.Errorf("%q: %v", answer, err)
		}
	}
	if err := SetGet(conn{strings.NewReader("STORED\r\nVALUE k 0 5\r\nhello\r\nEND\r\n")}, "k", "hello"); err != nil {
		t.Fatal(err)
	}
}
