package webhook

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
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
	return fmt.Sprintf("refused to connect to %s, %s (private targets are not allowed)", e.Addr, NonPublicReason(e.Addr))
}

// nonPublic lists special-purpose ranges that netip's predicates do not
// cover, each with what it is.
var nonPublic = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address`},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address, which may embed a private IPv4 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address, which may embed a private IPv4 address"},
	{netip.MustParsePrefix("fec0::/10"), "a deprecated site-local address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address (deprecated), which embeds any IPv4 address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address, which embeds an IPv4 address"},
}

// NonPublicReason says why a is not a public unicast address a webhook may
// be sent to when private targets are not allowed ("a loopback address",
// "a private address …"), or returns "" when it is public. It is the one
// classification of addresses: the dial-time check and registration
// (CheckTarget) both use it. Not public are loopback, private (RFC 1918,
// fc00::/7), link-local (169.254.0.0/16 holds cloud metadata servers;
// fe80::/10), multicast, unspecified and other special-purpose ranges.
// IPv4-mapped IPv6 addresses are judged as their IPv4 address.
func NonPublicReason(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "not a valid IP address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address (RFC 1918, fc00::/7)"
	case a.IsLinkLocalUnicast():
		return "a link-local address (169.254.0.0/16 holds cloud metadata servers)"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast() || a.IsLinkLocalMulticast():
		return "a multicast address"
	case !a.IsGlobalUnicast():
		return "not a global unicast address"
	}
	for _, r := range nonPublic {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	return ""
}

// PublicAddr reports whether a is a public unicast address a webhook may
// be sent to when private targets are not allowed (NonPublicReason is "").
func PublicAddr(a netip.Addr) bool { return NonPublicReason(a) == "" }

// CheckTarget returns why an endpoint URL may not be registered when private
// targets are not allowed, or nil. Refused are a host that is an IP address
// NonPublicReason refuses, "localhost" and names under ".localhost" (RFC
// 6761: they resolve to loopback), and a host whose last label is a number
// ("127.1", "2130706433", "0x7f.1"): no public name ends in one, and some
// resolvers read such a host as an IPv4 address. The URL's scheme, port and
// shape are store.Endpoint.Validate's to check.
//
// CheckTarget does not resolve the name. An answer at registration would
// prove nothing about later deliveries: a name's DNS can change at any
// time (DNS rebinding makes that deliberate: public at registration,
// 169.254.169.254 when the request is sent), and resolving would also tell
// the caller which internal names exist. The guard that holds is the
// dial-time check, which judges every address actually dialled; this one
// refuses, early and with a reason, what no DNS answer could make public.
func CheckTarget(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("is not a URL")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if a, err := netip.ParseAddr(host); err == nil {
		if why := NonPublicReason(a); why != "" {
			return fmt.Errorf("host %s is %s; private targets are not allowed", u.Hostname(), why)
		}
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return fmt.Errorf("host %s is a localhost name, which resolves to loopback; private targets are not allowed", u.Hostname())
	}
	labels := strings.Split(host, ".")
	if numericLabel.MatchString(labels[len(labels)-1]) {
		return fmt.Errorf("host %s ends in a number, which some resolvers read as an IPv4 address: give the address in dotted-decimal form or a DNS name", u.Hostname())
	}
	return nil
}

// numericLabel matches a DNS label that is a decimal, octal or hex number.
var numericLabel = regexp.MustCompile(`^(?:[0-9]+|0x[0-9a-f]*)$`)

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
			if NonPublicReason(ap.Addr()) != "" {
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
