package jsonlog_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/internal/jsonlog"
)

// TestHandler_LikeJSONHandler: every record, whether Handler writes it
// itself or hands it to slog.JSONHandler, comes out as slog.JSONHandler
// writes it, with slog's own keys and with renamed ones (the way cmd/stipend
// named them with a ReplaceAttr before).
func TestHandler_LikeJSONHandler(t *testing.T) {
	at := time.Date(2026, 12, 5, 9, 30, 1, 123456789, time.FixedZone("x", 3600))
	records := map[string]func() slog.Record{
		"AccessLog": func() slog.Record {
			r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
			r.AddAttrs(slog.String("requestId", "a1b2c3-1z"), slog.String("method", "POST"), slog.String("route", "/v1/consume"),
				slog.Int("status", 200), slog.Float64("durationMs", 0.412), slog.Int64("bytesOut", 311),
				slog.String("keyId", "host"), slog.String("role", "host"))
			return r
		},
		"Error500": func() slog.Record {
			r := slog.NewRecord(at, slog.LevelError, "request", 0)
			r.AddAttrs(slog.String("route", "unmatched"), slog.Int("status", 500))
			return r
		},
		"Kinds": func() slog.Record {
			r := slog.NewRecord(at.UTC(), slog.LevelWarn+1, "kinds <&>", 0)
			r.AddAttrs(slog.Uint64("u", math.MaxUint64), slog.Int64("i", math.MinInt64), slog.Bool("b", true),
				slog.Duration("d", 1500*time.Millisecond), slog.Time("t", at), slog.String("", "empty key"))
			return r
		},
		"NoTime": func() slog.Record {
			r := slog.NewRecord(time.Time{}, slog.LevelDebug, "m", 0)
			r.AddAttrs(slog.Int("n", 1))
			return r
		},
		"NoAttrs": func() slog.Record { return slog.NewRecord(at, slog.LevelInfo, "", 0) },
		"Escapes": func() slog.Record { r := slog.NewRecord(at, slog.LevelInfo, "quote \" and \\ é\n", 0); return r },
		"EscapedAttr": func() slog.Record {
			r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
			r.AddAttrs(slog.String("k\t", "v\x00\xff"))
			return r
		},
		"Any": func() slog.Record {
			r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
			r.AddAttrs(slog.Any("err", errors.New("boom")), slog.Any("m", map[string]int{"a": 1}), slog.Any("nil", nil))
			return r
		},
		"Group": func() slog.Record {
			r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
			r.AddAttrs(slog.Group("g", slog.Int("a", 1), slog.String("b", "x")), slog.Group("empty"))
			return r
		},
		"BadFloats": func() slog.Record {
			r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
			r.AddAttrs(slog.Float64("nan", math.NaN()), slog.Float64("inf", math.Inf(-1)))
			return r
		},
		"FarYear": func() slog.Record {
			r := slog.NewRecord(at.AddDate(9000, 0, 0), slog.LevelInfo, "m", 0)
			return r
		},
	}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 0.001, 0.412, 12.5, 1234.567, 1e-6, 9.99e-7, 1e-7, 1.5e-300,
		1e20, 1e21, 123456789e15, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1 + 0.2, -3.25e-9, 2.5e100}
	for _, f := range floats {
		records["Float"+strings.ReplaceAll(strings.ReplaceAll(slog.Float64Value(f).String(), ".", "_"), "-", "m")] = func() slog.Record {
			r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
			r.AddAttrs(slog.Float64("f", f))
			return r
		}
	}
	configs := []struct {
		name string
		opts jsonlog.Options
		want *slog.HandlerOptions
	}{
		{"SlogKeys", jsonlog.Options{}, &slog.HandlerOptions{Level: slog.LevelDebug}},
		{"CloudKeys", jsonlog.CloudLogging(slog.LevelDebug),
			&slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				if len(groups) > 0 {
					return a
				}
				switch a.Key {
				case slog.LevelKey:
					return slog.String("severity", jsonlog.Severity(a.Value.Any().(slog.Level)))
				case slog.MessageKey:
					a.Key = "message"
				}
				return a
			}}},
	}
	for _, cfg := range configs {
		if cfg.opts.Level == nil {
			cfg.opts.Level = slog.LevelDebug
		}
		for name, record := range records {
			var got, want bytes.Buffer
			if err := jsonlog.New(&got, cfg.opts).Handle(context.Background(), record()); err != nil {
				t.Fatalf("%s/%s: Handle: %v", cfg.name, name, err)
			}
			if err := slog.NewJSONHandler(&want, cfg.want).Handle(context.Background(), record()); err != nil {
				t.Fatalf("%s/%s: slog.JSONHandler.Handle: %v", cfg.name, name, err)
			}
			if got.String() != want.String() {
				t.Errorf("%s/%s:\n got %s\nwant %s", cfg.name, name, got.String(), want.String())
			}
		}
		// Loggers derived with With and WithGroup write as slog's do.
		var got, want bytes.Buffer
		slog.New(jsonlog.New(&got, cfg.opts)).With("a", 1).WithGroup("g").Info("m", "b", 2)
		slog.New(slog.NewJSONHandler(&want, cfg.want)).With("a", 1).WithGroup("g").Info("m", "b", 2)
		if g, w := stripTime(got.String()), stripTime(want.String()); g != w {
			t.Errorf("%s/With: got %s, want %s", cfg.name, g, w)
		}
	}
}

func stripTime(line string) string {
	_, rest, _ := strings.Cut(line, `",`)
	return rest
}

// TestHandler_Enabled: the level bounds what is written.
func TestHandler_Enabled(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(jsonlog.New(&buf, jsonlog.Options{Level: slog.LevelWarn}))
	l.Info("dropped")
	l.Warn("kept")
	if got := buf.String(); strings.Contains(got, "dropped") || !strings.Contains(got, "kept") {
		t.Errorf("with level WARN, Info and Warn wrote %q, want the Warn line only", got)
	}
}

// TestHandler_Concurrent: records written by Handler and by the
// slog.JSONHandler beside it, from many goroutines, come out as whole lines
// (run with -race: the writer is not safe for concurrent use).
func TestHandler_Concurrent(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(jsonlog.New(&buf, jsonlog.Options{}))
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				if i%2 == 0 {
					l.Info("plain", "n", i)
				} else {
					l.Info("any", "err", errors.New("e"))
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, `{"time":`) || !strings.HasSuffix(line, "}") {
			t.Fatalf("line %q is not one whole record", line)
		}
	}
}

// BenchmarkAccessLog: the access log line of a request, by Handler and by
// slog.JSONHandler with the ReplaceAttr it replaces (cmd/stipend's keys).
func BenchmarkAccessLog(b *testing.B) {
	rename := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.LevelKey {
			return slog.String("severity", jsonlog.Severity(a.Value.Any().(slog.Level)))
		}
		if len(groups) == 0 && a.Key == slog.MessageKey {
			a.Key = "message"
		}
		return a
	}
	handlers := []struct {
		name string
		h    slog.Handler
	}{
		{"jsonlog", jsonlog.New(io.Discard, jsonlog.CloudLogging(slog.LevelInfo))},
		{"slog.JSONHandler", slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{ReplaceAttr: rename})},
	}
	for _, h := range handlers {
		b.Run(h.name, func(b *testing.B) {
			l := slog.New(h.h)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("requestId", "a1b2c3-1z"), slog.String("method", "POST"),
					slog.String("route", "/v1/consume"), slog.Int("status", 200), slog.Float64("durationMs", 0.412),
					slog.Int64("bytesOut", 311), slog.String("keyId", "host"), slog.String("role", "host"))
			}
		})
	}
}
