package unit_test

import (
	"testing"

	"github.com/stipend-mcp/stipend/store/internal/unit"
)

func TestInboundKey(t *testing.T) {
	if got, want := unit.InboundKey("stripe", "evt_123"), "stripe__evt_123"; got != want {
		t.Errorf("InboundKey = %q, want %q", got, want)
	}
	for _, pair := range [][2]string{{"stripe", "a/b"}, {"a__b", "c"}, {"h", "x"}, {"stripe", ""}} {
		got := unit.InboundKey(pair[0], pair[1])
		if len(got) != 67 || got[:3] != "h__" {
			t.Errorf("InboundKey(%q, %q) = %q, want a hashed key", pair[0], pair[1], got)
		}
	}
	if unit.InboundKey("a__b", "c") == unit.InboundKey("a", "b__c") {
		t.Error("ambiguous sources share a key")
	}
}
