// Command tbctl is the Go half of the real-cluster testbed (test/testbed):
//
//	tbctl pki     — the cluster's CA, serving and client certificates, kubeconfigs
//	tbctl image   — an OCI image archive (for `ctr images import`) from host files
//	tbctl forward — a loopback TCP port on the host forwarded into the testbed's
//	                network namespace (how host tools reach the apiserver)
//	tbctl htpasswd — the registry's per-cluster credentials (REGISTRY=1)
//	tbctl push    — an image archive pushed to the testbed's registry, its digest printed
//
// The shell scripts beside it drive the processes; everything that is easier
// to get right in Go than in openssl/tar/socat invocations lives here.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "pki":
		err = runPKI(os.Args[2:])
	case "image":
		err = runImage(os.Args[2:])
	case "forward":
		err = runForward(os.Args[2:])
	case "htpasswd":
		err = runHtpasswd(os.Args[2:])
	case "push":
		err = runPush(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tbctl %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: tbctl pki|image|forward|htpasswd|push [flags] (-h for each)")
	os.Exit(2)
}
