package authreload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/test/memcachedbin"
)

func TestCheckAuth(t *testing.T) {
	for _, tt := range []struct {
		in, refused string
	}{
		{in: "app:secret\n"},
		{in: "app:secret", refused: "does not end with a newline"},
		{in: ":secret\n", refused: "no user name"},
		{in: "a:1\nb:2\n"},
		{in: "a:pass:with:colons\n"},
		{in: "", refused: "empty"},
		{in: "\n", refused: "line 1 is empty"},
		{in: "a:1\n\nb:2\n", refused: "line 2 is empty"},
		{in: "a:1\n\n", refused: "line 2 is empty"},
		{in: "nocolon\n", refused: "no ':'"},
		{in: "a:1\r\nb:2\r\n", refused: "carriage return"},
		{in: "a:", refused: "does not end with a newline"},
		{in: "a:\n", refused: "no password"},
		{in: strings.Repeat("u:p\n", MaxAuthEntries+1), refused: "more than 8 entries"},
		{in: "u:" + strings.Repeat("p", MaxAuthLine-1) + "\n", refused: "ignores lines longer than 255"},
		{in: "u:" + strings.Repeat("p", MaxAuthLine-2) + "\n"},
		{in: "a b:c\n", refused: "has a space"},
		{in: "a:b c\n", refused: "has a space"},
	} {
		err := checkAuth([]byte(tt.in))
		if tt.refused == "" {
			NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%q", tt.in)
		} else {
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.refused)), "%q", tt.in)
		}
	}
	NewWithT(t).Expect(errors.Is(CheckAuthFile(filepath.Join(t.TempDir(), "absent")), os.ErrNotExist)).To(BeTrue())
}

// FuzzCheckAuth: the check reads the user's Secret; any bytes give an
// answer, the same one twice.
func FuzzCheckAuth(f *testing.F) {
	for _, s := range []string{"app:secret\n", "a:1\r\n", "\n", ":", "a:1\n\nb:2", "\xff:\xfe\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		first := checkAuth(raw)
		if second := checkAuth(raw); (first == nil) != (second == nil) {
			t.Fatalf("%q: %v then %v", raw, first, second)
		}
	})
}

// memcachedBinary is Debian's memcached, the image's; a test that needs it
// fails in CI (CI=true) rather than skip.
func memcachedBinary(t *testing.T) string { return memcachedbin.Path(t) }

// memcachedStarts reports whether the real memcached starts with raw as its
// auth file (it listens, or exits), and, when it does, the first of the
// file's entries that cannot log in ("" when every one can).
func memcachedStarts(t *testing.T, bin string, raw []byte) (bool, string) {
	t.Helper()
	dir := t.TempDir()
	// memcached drops to nobody when the tests run as root: it must read the file.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "auth-file")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	args := []string{"-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "8", "-Y", file}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	mc := exec.Command(bin, args...)
	if err := mc.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = mc.Wait(); close(exited) }()
	defer func() { _ = mc.Process.Kill(); <-exited }()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-exited:
			return false, ""
		case <-deadline:
			t.Fatalf("memcached with auth file %q neither listened nor exited in 5s", raw)
		case <-time.After(5 * time.Millisecond):
		}
		if conn, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			_ = conn.Close()
			break
		}
	}
	for line := range bytes.Lines(raw) {
		user, pass, _ := strings.Cut(strings.TrimSuffix(string(line), "\n"), ":")
		if !logsIn(t, "127.0.0.1:"+port, user, pass) {
			return true, string(line)
		}
	}
	return true, ""
}

// logsIn tells whether memcached at addr takes user and pass.
func logsIn(t *testing.T, addr, user, pass string) bool {
	t.Helper()
	_, err := command(addr, user, pass, "")
	return err == nil
}

// TestCheckedAuthFileStartsRealMemcached: every auth file the check lets
// through starts the real memcached and each of its entries logs in, for the
// table's files and for generated ones over the characters memcached's
// parser cares about, past its limits of entries and line length too.
func TestCheckedAuthFileStartsRealMemcached(t *testing.T) {
	bin := memcachedBinary(t)
	nine := ""
	for i := range MaxAuthEntries + 1 {
		nine += fmt.Sprintf("user%d:pass%d\n", i, i)
	}
	files := []string{"app:secret\n", "app:secret", "a:1\nb:2\n", "a:x:y\n", "a:1\r\n", "a:1\n\n", "\n", "a:", ":",
		nine, "u:" + strings.Repeat("p", MaxAuthLine-2) + "\n", "u:" + strings.Repeat("p", MaxAuthLine-1) + "\n", "a b:c\n", "a:b c\n"}
	rng := rand.New(rand.NewPCG(26, 1))
	// Files made of user:password lines, now and then with what breaks
	// one: a carriage return, a space, an empty line or user, a missing
	// newline, too many lines, a long line.
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "upUP09:-"[rng.IntN(8)]
		}
		return string(b)
	}
	for range 200 {
		var f strings.Builder
		for range 1 + rng.IntN(10) {
			line := word(1+rng.IntN(3)) + ":" + word(1+rng.IntN(5))
			switch rng.IntN(16) {
			case 4:
				line = word(2) + ":"
			case 5:
				line = ":" + word(2)
			case 0:
				line += "\r"
			case 1:
				line = " " + line
			case 2:
				line = ""
			case 3:
				line += strings.Repeat("p", 250)
			}
			f.WriteString(line + "\n")
		}
		out := f.String()
		if rng.IntN(8) == 0 {
			out = strings.TrimSuffix(out, "\n")
		}
		files = append(files, out)
	}
	passed, refusedByBoth, stricter := 0, 0, 0
	for _, f := range files {
		checked := checkAuth([]byte(f)) == nil
		starts, locked := memcachedStarts(t, bin, []byte(f))
		switch {
		case checked && !starts:
			t.Errorf("the check passes %q, which memcached refuses", f)
		case checked && locked != "":
			t.Errorf("the check passes %q, whose entry %q cannot log in", f, locked)
		case checked:
			passed++
		case starts:
			stricter++
		default:
			refusedByBoth++
		}
	}
	t.Logf("%d files: %d passed, started and logged in with every entry, %d refused by both, %d refused by the check only", len(files), passed, refusedByBoth, stricter)
	if passed < 20 {
		t.Errorf("only %d files passed the check: the generator must exercise the accepting side", passed)
	}
}

// FuzzRefreshAnswer: whatever memcached answers to refresh_certs, the
// reloader reads at most a bounded line and succeeds only on OK.
func FuzzRefreshAnswer(f *testing.F) {
	for _, s := range []string{"OK\r\n", "OK\n", "ERROR\r\n", "CLIENT_ERROR unauthenticated\r\n", "\xff\xfe\r\n", strings.Repeat("x", 4096), ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		err := refreshAnswer(bufio.NewReaderSize(bytes.NewReader(answer), maxAnswer))
		line, _, found := bytes.Cut(answer, []byte("\n"))
		ok := found && string(bytes.TrimRight(line, "\r")) == "OK"
		if (err == nil) != ok {
			t.Fatalf("%q: %v", answer, err)
		}
		// At most maxAnswer bytes of the answer, quoted (4 characters a byte at worst).
		if err != nil && len(err.Error()) > 4*maxAnswer+200 {
			t.Fatalf("an unbounded message: %d bytes", len(err.Error()))
		}
	})
}

// command sends one memcached text command to addr, after a login when user
// is set, and returns its answer up to and including the line that ends it.
func command(addr, user, pass, cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	r := bufio.NewReader(conn)
	if user != "" {
		token := user + " " + pass
		if _, err := fmt.Fprintf(conn, "set auth 0 0 %d\r\n%s\r\n", len(token), token); err != nil {
			return "", err
		}
		if line, err := r.ReadString('\n'); err != nil {
			return "", fmt.Errorf("login: %w", err)
		} else if line != "STORED\r\n" {
			return "", fmt.Errorf("login: %q", line)
		}
	}
	if cmd == "" {
		return "", nil
	}
	if _, err := fmt.Fprint(conn, cmd); err != nil {
		return "", err
	}
	var out strings.Builder
	for {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if err != nil || line == "END\r\n" || line == "STORED\r\n" || strings.HasPrefix(line, "ERROR") || strings.HasPrefix(line, "CLIENT_ERROR") {
			return out.String(), err
		}
	}
}

// keepsItsCache stores a key in memcached at addr and returns a check that
// it is still there: a memcached that was restarted starts empty.
func keepsItsCache(t *testing.T, g Gomega, addr, user, pass string) func(user, pass string) {
	t.Helper()
	g.Expect(command(addr, user, pass, "set kept 0 0 5\r\nhello\r\n")).To(Equal("STORED\r\n"))
	return func(user, pass string) {
		t.Helper()
		g.Expect(command(addr, user, pass, "get kept\r\n")).To(Equal("VALUE kept 0 5\r\nhello\r\nEND\r\n"), "the same memcached, its cache whole")
	}
}
