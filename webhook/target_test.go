package webhook_test

import (
	"net/netip"
	"testing"

	"github.com/stipend-mcp/stipend/webhook"
)

func TestPublicAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true},
		{"2606:4700:4700::1111", true},
		{"127.0.0.1", false},
		{"127.9.9.9", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false}, // cloud metadata
		{"100.64.0.1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"fc00::1", false},
		{"fe80::1", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"64:ff9b::a00:1", false},
		{"2002:a00:1::1", false},
		{"::127.0.0.1", false},                          // IPv4-compatible
		{"::a9fe:a9fe", false},                          // IPv4-compatible 169.254.169.254
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false}, // Teredo
	} {
		if got := webhook.PublicAddr(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("PublicAddr(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}
