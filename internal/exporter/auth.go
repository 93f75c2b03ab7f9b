package exporter

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Credentials are one entry of memcached's auth file (-Y).
type Credentials struct {
	Username, Password string
}

// ReadAuthFile returns the first entry of an auth file: memcached's format
// is one "username:password" line per entry, the password running to the
// end of the line.
func ReadAuthFile(file string) (Credentials, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return Credentials{}, err
	}
	for line := range bytes.Lines(raw) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			continue
		}
		user, pass, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(user) == 0 {
			return Credentials{}, fmt.Errorf("%s: the first entry is not username:password", file)
		}
		return Credentials{Username: string(user), Password: string(pass)}, nil
	}
	return Credentials{}, fmt.Errorf("%s holds no entry", file)
}

// Authenticate logs a text-protocol connection in: memcached takes the
// credentials as the data of a set of any key, and answers STORED.
func Authenticate(rw *bufio.ReadWriter, c Credentials) error {
	token := c.Username + " " + c.Password
	if _, err := rw.WriteString("set auth 0 0 " + strconv.Itoa(len(token)) + "\r\n" + token + "\r\n"); err != nil {
		return fmt.Errorf("sending credentials: %w", err)
	}
	if err := rw.Flush(); err != nil {
		return fmt.Errorf("sending credentials: %w", err)
	}
	line, err := readLine(rw.Reader)
	if err != nil {
		return fmt.Errorf("reading the answer to the credentials: %w", err)
	}
	if line != "STORED" {
		return errors.New("memcached refused the credentials of " + c.Username + ": " + line)
	}
	return nil
}
