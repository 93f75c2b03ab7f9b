// Package nfqueuext builds the nftables expression that sends a packet to an
// nfqueue through the xtables NFQUEUE target (nft_compat), for kernels built
// without the native nft queue expression (CONFIG_NFT_QUEUE unset, as on the
// testbed's VMs, where kube-network-policies' own rules fail to load with
// ENOENT). The build patches kube-network-policies to call Target where it
// made an expr.Queue (patch.sh).
package nfqueuext

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// nfqFlagBypass is NFQ_FLAG_BYPASS: accept the packet when no program
// listens on the queue (fail open) instead of dropping it.
const nfqFlagBypass = 0x01

// Target is `NFQUEUE --queue-num num [--queue-bypass]`, revision 3 of the
// target, the same verdict as nft's `queue num N [bypass]`.
func Target(num uint16, bypass bool) *expr.Target {
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: infoV3(num, bypass)}
}

// infoV3 is struct xt_NFQ_info_v3 {u16 queuenum; u16 queues_total; u16
// flags;} in host byte order (the kernel reads it as a C struct), padded to
// 8 bytes: nft_compat rejects a payload not padded to XT_ALIGN, and xt.Unknown
// passes its bytes as they are.
func infoV3(num uint16, bypass bool) *xt.Unknown {
	info := make(xt.Unknown, 8)
	binary.NativeEndian.PutUint16(info[0:], num)
	// One queue: the xtables target rejects queues_total 0.
	binary.NativeEndian.PutUint16(info[2:], 1)
	if bypass {
		binary.NativeEndian.PutUint16(info[4:], nfqFlagBypass)
	}
	return &info
}
