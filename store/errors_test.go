package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stipend-mcp/stipend/store"
)

func TestError_Classification(t *testing.T) {
	err := fmt.Errorf("get payment: %w", store.Errorf(store.CodeNotFound, "payment %s", "p1"))
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrNotFound) = false, want true", err)
	}
	if errors.Is(err, store.ErrConflict) {
		t.Errorf("errors.Is(%v, ErrConflict) = true, want false", err)
	}
	if got := store.CodeOf(err); got != store.CodeNotFound {
		t.Errorf("CodeOf = %q, want %q", got, store.CodeNotFound)
	}
	if got := store.CodeOf(errors.New("boom")); got != store.CodeInternal {
		t.Errorf("CodeOf(plain error) = %q, want %q", got, store.CodeInternal)
	}
	cause := errors.New("rpc error")
	wrapped := store.Wrap(store.CodeUnavailable, cause, "commit")
	if !errors.Is(wrapped, cause) || !errors.Is(wrapped, store.ErrUnavailable) {
		t.Errorf("Wrap lost its cause or code: %v", wrapped)
	}
}

func TestInboundKey(t *testing.T) {
	if got, want := store.InboundKey("stripe", "evt_123"), "stripe__evt_123"; got != want {
		t.Errorf("InboundKey = %q, want %q", got, want)
	}
	for _, pair := range [][2]string{{"stripe", "a/b"}, {"a__b", "c"}, {"h", "x"}, {"stripe", ""}} {
		got := store.InboundKey(pair[0], pair[1])
		if len(got) != 67 || got[:3] != "h__" {
			t.Errorf("InboundKey(%q, %q) = %q, want a hashed key", pair[0], pair[1], got)
		}
	}
	if store.InboundKey("a__b", "c") == store.InboundKey("a", "b__c") {
		t.Error("ambiguous sources share a key")
	}
}

func TestIsUncertain(t *testing.T) {
	lost := &store.Error{Code: store.CodeUnavailable, Message: "commit", Uncertain: true}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("x"), false},
		{"definite store error", store.Errorf(store.CodeUnavailable, "read"), false},
		{"uncertain", lost, true},
		{"uncertain, wrapped by a store error", store.Wrap(store.CodeUnavailable, lost, "consume"), true},
		{"uncertain, wrapped by fmt", fmt.Errorf("grant: %w", lost), true},
	} {
		if got := store.IsUncertain(tt.err); got != tt.want {
			t.Errorf("IsUncertain(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
