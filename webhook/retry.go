package webhook

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultSchedule is the wait before each retry: after the first failed
// attempt 5 s, then 5 min, 30 min, 2 h, 5 h, 10 h and 10 h. A delivery whose
// eighth attempt fails is dead (about 27.6 hours after it was first tried).
var DefaultSchedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// jittered spreads d uniformly over ±fraction of itself, so deliveries that
// failed together (an endpoint outage) do not all retry in the same instant.
func jittered(d time.Duration, fraction float64) time.Duration {
	if fraction <= 0 || d <= 0 {
		return d
	}
	f := 1 + fraction*(2*rand.Float64()-1)
	return time.Duration(float64(d) * f)
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date,
// relative to now. It returns 0 when the header is absent or unusable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(365*24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
