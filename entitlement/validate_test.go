package entitlement_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
)

func TestValidInstant(t *testing.T) {
	minus1 := time.FixedZone("-01:00", -3600)
	plus1 := time.FixedZone("+01:00", 3600)
	for _, tt := range []struct {
		t    time.Time
		want bool
	}{
		{time.Date(9999, 12, 31, 22, 59, 59, 0, minus1), true},
		{time.Date(9999, 12, 31, 23, 0, 0, 0, minus1), false}, // year 10000 in UTC
		{time.Date(1, 1, 1, 1, 0, 0, 0, plus1), true},
		{time.Date(1, 1, 1, 0, 59, 59, 0, plus1), false}, // year 0 in UTC
		{time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), true},
	} {
		if got := entitlement.ValidInstant(tt.t); got != tt.want {
			t.Errorf("ValidInstant(%s) = %v, want %v", tt.t, got, tt.want)
		}
	}
}
