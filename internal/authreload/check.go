package authreload

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// CheckAuthFile refuses an auth file memcached would refuse, or would read
// differently from what it says, or that would let nobody in, with a
// message that says which line is wrong. memcached's own words on a bad file
// are "has a malformed entry" and an exit, and past its limits it says
// nothing: it reads MaxAuthEntries entries and ignores the rest, and ignores
// a line longer than MaxAuthLine bytes. This check runs before it, in the
// pod's auth-check init container and before each reload, so the pod status
// or the reloader's log says what to fix. The rules are memcached's format
// ("user:password" a line, the password running to the end of the line)
// kept to what can log in: a user name and a password, no empty line, no carriage return
// (a file saved with CRLF line ends), no space (the login takes user and
// password as two words), and a newline at the end of every line, the last
// one too (memcached drops the last character of a line without one).
func CheckAuthFile(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := checkAuth(raw); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// memcached 1.6.18's limits on an auth file, measured: the ninth entry and
// a line of 256 bytes cannot log in.
const (
	MaxAuthEntries = 8
	MaxAuthLine    = 255
)

func checkAuth(raw []byte) error {
	if len(raw) == 0 {
		return errors.New("the auth file is empty: nobody could log in")
	}
	n := 0
	for line := range bytes.Lines(raw) {
		n++
		body, hasNewline := bytes.CutSuffix(line, []byte("\n"))
		user, pass, ok := bytes.Cut(body, []byte(":"))
		switch {
		case n > MaxAuthEntries:
			return fmt.Errorf("the file has more than %d entries: memcached reads the first %d and ignores the rest", MaxAuthEntries, MaxAuthEntries)
		case len(body) > MaxAuthLine:
			return fmt.Errorf("line %d is %d bytes: memcached ignores lines longer than %d", n, len(body), MaxAuthLine)
		case !hasNewline:
			return fmt.Errorf("line %d does not end with a newline: memcached drops the last character of such a line", n)
		case bytes.IndexByte(body, ' ') >= 0:
			return fmt.Errorf("line %d has a space: memcached's login takes the user and password as two words, so it could never log in", n)
		case len(body) == 0:
			return fmt.Errorf("line %d is empty: memcached refuses empty lines", n)
		case !ok:
			return fmt.Errorf("line %d has no ':': each line is user:password", n)
		case len(user) == 0:
			return fmt.Errorf("line %d has no user name", n)
		case len(pass) == 0:
			return fmt.Errorf("line %d has no password: memcached's login needs one", n)
		case bytes.IndexByte(body, '\r') >= 0:
			return fmt.Errorf("line %d holds a carriage return: save the file with Unix line ends", n)
		}
	}
	return nil
}
