// Package jsonlog is the service's slog handler: slog.JSONHandler's
// output, written without its per-record reflection for the records the
// service writes most (the access log line of every request: strings,
// integers, a float), and by slog.JSONHandler itself for every other.
//
// slog.JSONHandler writes a float64 through encoding/json (reflection, an
// encoder from a pool) and calls ReplaceAttr for every attribute, the
// built-in ones included; the access log line paid both on every request.
// Handler renames the level and message keys itself (Options), so no
// ReplaceAttr is needed for that, and writes a record whose attributes are
// all strings, integers, booleans, durations, finite floats and times of
// plain printable ASCII as slog.JSONHandler would, byte for byte (a test
// holds the two equal).
package jsonlog

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
)

// Options are a Handler's options.
type Options struct {
	// Level is the minimum level written (slog.HandlerOptions.Level).
	Level slog.Leveler
	// LevelKey and MessageKey name the level and message members; empty
	// means slog's ("level", "msg").
	LevelKey, MessageKey string
	// LevelName names a level; nil means slog.Level.String.
	LevelName func(slog.Level) string
}

// Handler is a slog.Handler writing one JSON object per line, as
// slog.JSONHandler does.
type Handler struct {
	w     *lockedWriter
	opts  Options
	inner slog.Handler // slog.JSONHandler on w, with opts as ReplaceAttr
}

// New returns a Handler writing to w.
func New(w io.Writer, opts Options) *Handler {
	ho := &slog.HandlerOptions{Level: opts.Level}
	lw := &lockedWriter{w: w}
	h := &Handler{w: lw, opts: opts}
	if opts.LevelKey != "" || opts.MessageKey != "" || opts.LevelName != nil {
		ho.ReplaceAttr = h.replaceBuiltIns
	}
	if h.opts.LevelKey == "" {
		h.opts.LevelKey = slog.LevelKey
	}
	if h.opts.MessageKey == "" {
		h.opts.MessageKey = slog.MessageKey
	}
	if h.opts.LevelName == nil {
		h.opts.LevelName = slog.Level.String
	}
	h.inner = slog.NewJSONHandler(lw, ho)
	return h
}

// replaceBuiltIns names the level and the message as opts say, for the
// records slog.JSONHandler writes.
func (h *Handler) replaceBuiltIns(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		return slog.String(h.opts.LevelKey, h.opts.LevelName(a.Value.Any().(slog.Level)))
	case slog.MessageKey:
		a.Key = h.opts.MessageKey
	}
	return a
}

// Enabled reports whether level is at least Options.Level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// WithAttrs and WithGroup return slog.JSONHandler's, on the same writer.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler { return h.inner.WithAttrs(as) }

// WithGroup returns slog.JSONHandler's, on the same writer.
func (h *Handler) WithGroup(name string) slog.Handler { return h.inner.WithGroup(name) }

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Handle writes r.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !plainRecord(&r) {
		return h.inner.Handle(ctx, r)
	}
	bp := buffers.Get().(*[]byte)
	b := append((*bp)[:0], '{')
	if !r.Time.IsZero() {
		b = append(b, `"time":"`...)
		b = r.Time.Round(0).AppendFormat(b, time.RFC3339Nano)
		b = append(b, `",`...)
	}
	b = appendString(b, h.opts.LevelKey)
	b = append(b, ':')
	b = appendString(b, h.opts.LevelName(r.Level))
	b = append(b, ',')
	b = appendString(b, h.opts.MessageKey)
	b = append(b, ':')
	b = appendString(b, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b = append(b, ',')
		b = appendString(b, a.Key)
		b = append(b, ':')
		b = appendValue(b, a.Value)
		return true
	})
	b = append(b, "}\n"...)
	_, err := h.w.Write(b)
	if cap(b) <= 16<<10 {
		*bp = b
		buffers.Put(bp)
	}
	return err
}

// plainRecord reports whether Handle writes r itself: a message, level
// name and attributes that need no escaping, attributes of the kinds
// appendValue writes (no group, no LogValuer, no empty attribute), times in
// the years slog.JSONHandler writes.
func plainRecord(r *slog.Record) bool {
	if !plain(r.Message) || !r.Time.IsZero() && !plainYear(r.Time) {
		return false
	}
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		ok = plain(a.Key) && plainValue(a.Value)
		return ok
	})
	return ok
}

func plainValue(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindString:
		return plain(v.String())
	case slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindDuration:
		return true
	case slog.KindFloat64:
		f := v.Float64()
		return !math.IsNaN(f) && !math.IsInf(f, 0)
	case slog.KindTime:
		return plainYear(v.Time())
	}
	return false
}

func plainYear(t time.Time) bool { y := t.Year(); return y >= 0 && y < 10000 }

// plain reports whether s is printable ASCII without '"' or '\', which JSON
// writes as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendString appends s, which is plain, as a JSON string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendValue appends v, which is plainValue, as slog.JSONHandler does.
func appendValue(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return appendString(b, v.String())
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		return strconv.AppendInt(b, int64(v.Duration()), 10)
	case slog.KindFloat64:
		return appendFloat(b, v.Float64())
	case slog.KindTime:
		b = append(b, '"')
		b = v.Time().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"')
	}
	panic("jsonlog: not a plain value: " + v.Kind().String())
}

// appendFloat appends a finite f as encoding/json writes a float64 (which
// slog.JSONHandler uses): like ES6, the shortest representation, in
// exponent form below 1e-6 and from 1e21 on, with a two-digit exponent
// trimmed of its leading zero.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// lockedWriter serializes the writes of Handle and of the slog.JSONHandler
// beside it, as slog.JSONHandler does its own.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// CloudLogging are the options of records Cloud Logging reads without
// configuration: the level written as "severity" (DEBUG, INFO, WARNING,
// ERROR) and the message as "message"; level is the minimum written.
func CloudLogging(level slog.Leveler) Options {
	return Options{Level: level, LevelKey: "severity", MessageKey: "message", LevelName: Severity}
}

// Severity names a slog level as Cloud Logging does.
func Severity(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARNING"
	case l >= slog.LevelInfo:
		return "INFO"
	default:
		return "DEBUG"
	}
}
