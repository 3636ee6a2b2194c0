package webhook_test

import (
	"net/netip"
	"strings"
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

func TestCheckTarget(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // a part of the reason; "" when accepted
	}{
		{"https://hooks.example/stipend", ""},
		{"https://8.8.8.8/x", ""},
		{"https://[2606:4700:4700::1111]:8443/x", ""},
		{"https://172.32.0.1/", ""},                 // just outside 172.16.0.0/12
		{"https://localhost.example.com/", ""},      // a public name that starts like localhost
		{"https://my-localhost/", ""},               // not under .localhost
		{"https://hooks.example:443/x?a=1#f", ""},   // a port in range
		{"https://xn--bcher-kva.example/", ""},      // an IDN name
		{"http://127.0.0.1:8080/hooks", "loopback"}, // the audit's cases first
		{"http://127.9.9.9/", "loopback"},
		{"http://[::1]/", "loopback"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://10.0.0.1/", "private"},
		{"http://192.168.1.20/", "private"},
		{"http://172.16.0.1/", "private"},
		{"http://172.31.255.254/", "private"},
		{"http://[fc00::1]/", "private"},
		{"http://[fd12:3456::1]/", "private"},
		{"http://[fe80::1]/", "link-local"},
		{"http://[fe80::1%25eth0]/", "link-local"},
		{"http://[::ffff:127.0.0.1]/", "loopback"},
		{"http://[::ffff:169.254.169.254]/", "link-local"},
		{"http://0.0.0.0/", "unspecified"},
		{"http://100.64.0.1/", "carrier-grade NAT"},
		{"http://localhost/", "localhost"},
		{"http://LocalHost:3000/", "localhost"},
		{"http://localhost./", "localhost"},
		{"http://api.localhost/", "localhost"},
		{"http://127.1/", "ends in a number"},
		{"http://2130706433/", "ends in a number"},
		{"http://0x7f000001/", "ends in a number"},
		{"http://0x7f.0.0.1/", "ends in a number"},
		{"http://0177.0.0.1/", "ends in a number"},
	} {
		err := webhook.CheckTarget(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckTarget(%s) = %v, want nil", tc.url, err)
		case tc.want != "" && err == nil:
			t.Errorf("CheckTarget(%s) = nil, want an error saying %q", tc.url, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("CheckTarget(%s) = %q, want it to say %q", tc.url, err, tc.want)
		}
	}
}
