package payment_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stipend-mcp/stipend/payment"
)

func TestCleanFailureReason(t *testing.T) {
	long := strings.Repeat("é", payment.MaxFailureReasonLen+100)
	for _, tt := range []struct {
		name, in, want string
	}{
		{"Plain", "card declined", "card declined"},
		{"Empty", "", ""},
		{"NUL", "card\x00declined\x00", "card declined"},
		{"Newlines", "  line one\r\n\tline two \n", "line one line two"},
		{"Escape", "red\x1b[31mtext", "red [31mtext"},
		{"C1", "a\u0085b", "a b"},
		{"BidiOverride", "paid\u202egnp.exe", "paid gnp.exe"},
		{"InvalidUTF8", "a\xffb", "a\uFFFDb"},
		{"AtTheLimit", long[:2*payment.MaxFailureReasonLen], long[:2*payment.MaxFailureReasonLen]},
		{"OverTheLimit", long, long[:2*(payment.MaxFailureReasonLen-1)] + "…"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := payment.CleanFailureReason(tt.in)
			if got != tt.want {
				t.Errorf("CleanFailureReason(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > payment.MaxFailureReasonLen {
				t.Errorf("CleanFailureReason(%q): %d characters, want at most %d", tt.in, n, payment.MaxFailureReasonLen)
			}
		})
	}
}
