package authreload

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// CheckAuthFile refuses an auth file memcached would refuse, or that would
// let nobody in, with a message that says which line is wrong. memcached's
// own words on a bad file are "has a malformed entry" and an exit; this
// check runs before it, in the pod's auth-check init container, so the pod
// status says what to fix. The rules are memcached's format ("user:password"
// a line, the password running to the end of the line) kept stricter where
// memcached's parser is quirky: no empty line, no carriage return in a
// password (a file saved with CRLF line ends), and a last line without a
// newline needs a password.
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

func checkAuth(raw []byte) error {
	if len(raw) == 0 {
		return errors.New("the auth file is empty: nobody could log in")
	}
	n := 0
	for line := range bytes.Lines(raw) {
		n++
		body, hasNewline := bytes.CutSuffix(line, []byte("\n"))
		_, pass, ok := bytes.Cut(body, []byte(":"))
		switch {
		case len(body) == 0:
			return fmt.Errorf("line %d is empty: memcached refuses empty lines", n)
		case !ok:
			return fmt.Errorf("line %d has no ':': each line is user:password", n)
		case bytes.IndexByte(pass, '\r') >= 0:
			return fmt.Errorf("line %d holds a carriage return: save the file with Unix line ends", n)
		case !hasNewline && len(pass) == 0:
			return fmt.Errorf("line %d has no password", n)
		}
	}
	return nil
}
