package payment

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxFailureReasonLen is the most characters (Unicode code points) a
// payment's FailureReason holds.
const MaxFailureReasonLen = 500

// CleanFailureReason returns reason as a payment stores it, whoever gave it
// (POST /v1/payments/{id}/fail or a provider's cancellation): valid UTF-8
// (invalid bytes become U+FFFD), each run of white space, control and
// format characters (NUL, escape sequences, bidirectional overrides)
// replaced by one space, trimmed, and cut to MaxFailureReasonLen characters,
// the last of them "…" when it was cut.
func CleanFailureReason(reason string) string {
	reason = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(reason, "\uFFFD"))
	reason = strings.Join(strings.Fields(reason), " ")
	if utf8.RuneCountInString(reason) <= MaxFailureReasonLen {
		return reason
	}
	runes := []rune(reason)[:MaxFailureReasonLen-1]
	return strings.TrimRightFunc(string(runes), unicode.IsSpace) + "…"
}
