// Package faulttest checks a backend's translation of its errors into
// store codes (internal/fsfault, internal/pgfault) from a table of the
// backend's errors. Only tests import it.
package faulttest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stipend-mcp/stipend/internal/fault"
)

// Case is one backend error and what its translation must be.
type Case struct {
	Name string
	Err  error
	// Read and Write are the codes the error gets from a call that wrote
	// nothing and from a sent write.
	Read, Write fault.Code
	// Uncertain is whether the sent write's answer was lost (a read never
	// is).
	Uncertain bool
}

// Translation is a backend's pair of translations.
type Translation struct {
	Read, Write func(err error, format string, args ...any) error
}

// Run checks every case as a subtest: the codes of Read and Write, that
// only a write can be Uncertain and as the case says, and that both keep
// the cause. Then it checks that nil translates to nil and that an error
// that already is a store error (Uncertain or not, wrapped or not) comes
// back unchanged.
func Run(t *testing.T, tr Translation, cases []Case) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			for _, c := range []struct {
				call          string
				err           error
				want          fault.Code
				wantUncertain bool
			}{
				{"Read", tr.Read(tt.Err, "read %s", "row"), tt.Read, false},
				{"Write", tr.Write(tt.Err, "write %s", "row"), tt.Write, tt.Uncertain},
			} {
				if got := fault.CodeOf(c.err); got != c.want {
					t.Errorf("%s(%v): code %q, want %q", c.call, tt.Err, got, c.want)
				}
				if got := fault.IsUncertain(c.err); got != c.wantUncertain {
					t.Errorf("%s(%v): uncertain %v, want %v (only a sent write can be)", c.call, tt.Err, got, c.wantUncertain)
				}
				if !errors.Is(c.err, tt.Err) {
					t.Errorf("%s(%v) = %v: the cause is lost", c.call, tt.Err, c.err)
				}
			}
		})
	}
	if got := tr.Read(nil, "x"); got != nil {
		t.Errorf("Read(nil) = %v, want nil", got)
	}
	if got := tr.Write(nil, "x"); got != nil {
		t.Errorf("Write(nil) = %v, want nil", got)
	}
	lost := &fault.Error{Code: fault.CodeUnavailable, Message: "commit", Uncertain: true}
	for _, err := range []error{lost, fmt.Errorf("consume: %w", lost), fault.Errorf(fault.CodeConflict, "payment is failed")} {
		if got := tr.Read(err, "read"); got != err {
			t.Errorf("Read(%v) = %v, want it unchanged", err, got)
		}
		if got := tr.Write(err, "write"); got != err {
			t.Errorf("Write(%v) = %v, want it unchanged", err, got)
		}
	}
}
