package fault_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stipend-mcp/stipend/internal/fault"
)

func TestError_Classification(t *testing.T) {
	err := fmt.Errorf("get payment: %w", fault.Errorf(fault.CodeNotFound, "payment %s", "p1"))
	if !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrNotFound) = false, want true", err)
	}
	if errors.Is(err, fault.ErrConflict) {
		t.Errorf("errors.Is(%v, ErrConflict) = true, want false", err)
	}
	if got := fault.CodeOf(err); got != fault.CodeNotFound {
		t.Errorf("CodeOf = %q, want %q", got, fault.CodeNotFound)
	}
	if got := fault.CodeOf(errors.New("boom")); got != fault.CodeInternal {
		t.Errorf("CodeOf(plain error) = %q, want %q", got, fault.CodeInternal)
	}
	if got := fault.CodeOf(nil); got != "" {
		t.Errorf("CodeOf(nil) = %q, want \"\"", got)
	}
	cause := errors.New("rpc error")
	wrapped := fault.Wrap(fault.CodeUnavailable, cause, "commit")
	if !errors.Is(wrapped, cause) || !errors.Is(wrapped, fault.ErrUnavailable) {
		t.Errorf("Wrap lost its cause or code: %v", wrapped)
	}
}

func TestIsUncertain(t *testing.T) {
	lost := &fault.Error{Code: fault.CodeUnavailable, Message: "commit", Uncertain: true}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("x"), false},
		{"definite error", fault.Errorf(fault.CodeUnavailable, "read"), false},
		{"uncertain", lost, true},
		{"uncertain, wrapped by an *Error", fault.Wrap(fault.CodeUnavailable, lost, "consume"), true},
		{"uncertain, wrapped by fmt", fmt.Errorf("grant: %w", lost), true},
	} {
		if got := fault.IsUncertain(tt.err); got != tt.want {
			t.Errorf("IsUncertain(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
