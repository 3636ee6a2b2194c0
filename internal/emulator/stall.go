package emulator

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Proxy is a loopback TCP proxy in front of the emulator that can stop
// forwarding, as a Firestore that stops answering does (an emulator paused
// with SIGSTOP, a network that drops everything): connections stay open and
// new ones are accepted, but no byte goes through until Resume. Clients of
// its Host see a real Firestore that stalls, not a mock.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	gate  chan struct{} // closed while forwarding
	conns []net.Conn
}

// NewProxy starts a proxy to the emulator (skipping tb as Host does) on a
// free loopback port; it forwards until Stall. Cleanup stops it.
func NewProxy(tb testing.TB) *Proxy {
	tb.Helper()
	upstream := Host(tb)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("emulator proxy: %v", err)
	}
	p := &Proxy{ln: ln, upstream: upstream, gate: make(chan struct{})}
	close(p.gate)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// Host is the proxy's host:port, to use as FIRESTORE_EMULATOR_HOST.
func (p *Proxy) Host() string { return p.ln.Addr().String() }

// Stall stops forwarding: what is sent either way waits in the proxy.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // stalled already
	}
}

// Resume forwards again, what waited first.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Client returns a Firestore client that talks to the emulator through the
// proxy, with the emulator's admin credentials (as the client's own
// emulator connection sends them). Cleanup closes it.
func (p *Proxy) Client(tb testing.TB) *firestore.Client {
	tb.Helper()
	conn, err := grpc.NewClient(p.Host(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(OwnerCredentials{}))
	if err != nil {
		tb.Fatalf("emulator proxy: %v", err)
	}
	client, err := firestore.NewClient(context.Background(), ProjectID, option.WithGRPCConn(conn))
	if err != nil {
		tb.Fatalf("emulator proxy: firestore.NewClient: %v", err)
	}
	tb.Cleanup(func() { client.Close() })
	return client
}

// OwnerCredentials are the emulator's admin credentials, for a gRPC
// connection a test dials itself: requests with them bypass the security
// rules, as the client library's own emulator connection does.
type OwnerCredentials struct{}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (OwnerCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the
// emulator speaks plain gRPC.
func (OwnerCredentials) RequireTransportSecurity() bool { return false }

func (p *Proxy) accept() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, down, up)
		p.mu.Unlock()
		go p.pump(up, down)
		go p.pump(down, up)
	}
}

// pump copies from src to dst, holding each chunk while the proxy stalls.
func (p *Proxy) pump(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			return
		}
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Resume()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
