package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// runForward listens on an address of the host's network namespace (meant to
// be loopback) and forwards every connection to an address inside another
// network namespace. No interface or route joins the two namespaces: the
// dialing socket is created by a thread that has entered the target namespace.
func runForward(args []string) error {
	fs := flag.NewFlagSet("forward", flag.ExitOnError)
	netns := fs.String("netns", "", "path of the target network namespace (/run/netns/NAME)")
	listen := fs.String("listen", "127.0.0.1:16443", "host address to listen on")
	target := fs.String("target", "", "address to dial inside the namespace")
	_ = fs.Parse(args)
	if *netns == "" || *target == "" {
		return errors.New("-netns and -target are required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	dial, err := dialerIn(*netns)
	if err != nil {
		return err
	}
	log.Printf("forwarding %s -> %s in %s", ln.Addr(), *target, *netns)
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer func() { _ = c.Close() }()
			u, err := dial(*target)
			if err != nil {
				log.Printf("dial %s: %v", *target, err)
				return
			}
			defer func() { _ = u.Close() }()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(u, c)
			go pipe(c, u)
			<-done
			<-done
		}()
	}
}

type dialReq struct {
	addr  string
	reply chan dialResp
}
type dialResp struct {
	conn net.Conn
	err  error
}

// dialerIn starts a goroutine locked to an OS thread that has joined the
// namespace; it never unlocks, so the thread is never reused for other work.
func dialerIn(nsPath string) (func(string) (net.Conn, error), error) {
	reqs := make(chan dialReq)
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ready <- err
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		_ = unix.Close(fd)
		if err != nil {
			ready <- fmt.Errorf("setns %s: %w", nsPath, err)
			return
		}
		ready <- nil
		for r := range reqs {
			c, err := net.Dial("tcp", r.addr)
			r.reply <- dialResp{c, err}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return func(addr string) (net.Conn, error) {
		r := dialReq{addr: addr, reply: make(chan dialResp, 1)}
		reqs <- r
		resp := <-r.reply
		return resp.conn, resp.err
	}, nil
}
