package field_test

import (
	"errors"
	"testing"

	"github.com/stipend-mcp/stipend/field"
)

var errSentinel = errors.New("sentinel")

func TestWithin(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		err        error
		wantField  string
		wantReason string
	}{
		{"Nested", "cost", &field.Error{Field: "cents", Reason: "too big", Err: errSentinel}, "cost.cents", "too big"},
		{"WholeInner", "cost", &field.Error{Reason: "malformed JSON", Err: errSentinel}, "cost", "malformed JSON"},
		{"NoPath", "", &field.Error{Field: "cents", Reason: "too big", Err: errSentinel}, "cents", "too big"},
		{"Other", "cost", errSentinel, "cost", "sentinel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := field.Within(tt.path, tt.err)
			var fe *field.Error
			if !errors.As(err, &fe) || fe.Field != tt.wantField || fe.Reason != tt.wantReason {
				t.Fatalf("Within(%q, %v) = %#v, want field %q reason %q", tt.path, tt.err, err, tt.wantField, tt.wantReason)
			}
			if !errors.Is(err, errSentinel) {
				t.Errorf("Within(%q, %v) = %v, want it to match the sentinel", tt.path, tt.err, err)
			}
		})
	}
	if err := field.Within("cost", nil); err != nil {
		t.Errorf("Within(cost, nil) = %v, want nil", err)
	}
}

func TestError_Error(t *testing.T) {
	for _, tt := range []struct {
		err  *field.Error
		want string
	}{
		{&field.Error{Field: "cost.cents", Reason: "must be positive"}, "cost.cents: must be positive"},
		{&field.Error{Reason: "malformed JSON"}, "malformed JSON"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%#v.Error() = %q, want %q", tt.err, got, tt.want)
		}
	}
}
