package memcached_test

import (
	"encoding/json"
	"errors"
)

var errTest = errors.New("boom")

// roundTrip decodes an apply configuration into its API type, the way the
// API server reads the apply request.
func roundTrip(in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}
