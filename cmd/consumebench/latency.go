package main

import (
	"io"
	"net"
	"time"
)

// startLatencyProxy listens on a free loopback port and forwards every
// connection to upstream, delivering each chunk delay after it arrived, in
// each direction: a round trip costs 2 × delay more, however much is in
// flight (the delay does not limit throughput), as a network between
// Cloud Run and Firestore would.
func startLatencyProxy(upstream string, delay time.Duration) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return // closed
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				down.Close()
				continue
			}
			go delayed(up, down, delay)
			go delayed(down, up, delay)
		}
	}()
	return ln, nil
}

// delayed copies from src to dst, each chunk delay after it was read, in
// order; it closes both when either side ends.
func delayed(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{buf[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	defer dst.Close()
	defer src.Close()
	for c := range q {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.b); err != nil {
			_, _ = io.Copy(io.Discard, src)
			return
		}
	}
}
