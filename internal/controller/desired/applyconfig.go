package desired

import (
	"encoding/json"
	"fmt"
)

// mustConvert turns a user-supplied API struct (affinity, tolerations, ...)
// into its apply configuration. Apply configurations mirror their types'
// JSON field for field, so the round trip cannot fail for a value that the
// API server already decoded; a failure is a programming error.
func mustConvert[T any](in any) *T {
	raw, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("marshalling %T: %v", in, err))
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		panic(fmt.Sprintf("converting %T to its apply configuration: %v", in, err))
	}
	return out
}
