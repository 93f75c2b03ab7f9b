package nfqueuext

import (
	"encoding/binary"
	"testing"
)

func TestInfoV3Layout(t *testing.T) {
	for _, tc := range []struct {
		num    uint16
		bypass bool
		flags  uint16
	}{{100, false, 0}, {65535, true, 1}} {
		info := *infoV3(tc.num, tc.bypass)
		if len(info) != 8 {
			t.Fatalf("len %d, want 8 (XT_ALIGN of 6 bytes)", len(info))
		}
		got := [3]uint16{
			binary.NativeEndian.Uint16(info[0:]),
			binary.NativeEndian.Uint16(info[2:]),
			binary.NativeEndian.Uint16(info[4:]),
		}
		if want := [3]uint16{tc.num, 1, tc.flags}; got != want {
			t.Errorf("queuenum, queues_total, flags = %v, want %v", got, want)
		}
		if info[6] != 0 || info[7] != 0 {
			t.Errorf("padding not zero: % x", info)
		}
	}
	if tg := Target(7, false); tg.Name != "NFQUEUE" || tg.Rev != 3 {
		t.Errorf("target %s rev %d, want NFQUEUE rev 3", tg.Name, tg.Rev)
	}
}
