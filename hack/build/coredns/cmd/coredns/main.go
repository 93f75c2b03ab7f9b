// Command coredns is CoreDNS with only the plugins the testbed's node DNS uses:
// the full plugin set (every cloud provider's DNS API) takes ~11 minutes to
// compile on two cores, this one a fraction of that. The directive order is
// CoreDNS's own (core/dnsserver/zdirectives.go); plugins not linked in are
// simply unavailable in the Corefile.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() { coremain.Run() }
