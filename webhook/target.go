package webhook

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// RefusedError is the error of a connection the dispatcher refused to make:
// the endpoint's host resolved to a loopback, private or otherwise
// non-public address, and private targets are not allowed.
type RefusedError struct {
	Addr netip.Addr
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused to connect to non-public address %s (private targets are not allowed)", e.Addr)
}

// nonPublic lists special-purpose ranges that netip's predicates do not cover.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: may embed a private IPv4
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: may embed a private IPv4
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated): embeds any IPv4
	netip.MustParsePrefix("2001::/32"),       // Teredo: embeds an IPv4
}

// PublicAddr reports whether a is a public unicast address a webhook may
// be sent to when private targets are not allowed: not loopback, private
// (RFC 1918, fc00::/7), link-local (169.254.0.0/16 holds cloud metadata
// servers), multicast, unspecified or another special-purpose range.
// IPv4-mapped IPv6 addresses are judged as their IPv4 address.
func PublicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() ||
		a.IsLinkLocalUnicast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// newClient returns the HTTP client of a dispatcher. Redirects are never
// followed (a 3xx is a failed attempt). Unless allowPrivate, every
// connection is checked at dial time, after name resolution, against the
// IP address actually dialled, so a hostname that resolves (or re-resolves)
// to a private address is refused too. Proxies from the environment are not
// used: they would dial on the dispatcher's behalf, past the check.
func newClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("refused to connect to %q: not an IP address", address)
			}
			if !PublicAddr(ap.Addr()) {
				return &RefusedError{Addr: ap.Addr()}
			}
			return nil
		}
	}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0, // the per-attempt context bounds the whole exchange
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
