package main

import (
	"io"
	"log/slog"

	"github.com/stipend-mcp/stipend/internal/jsonlog"
)

// newLogger returns a JSON logger on w whose records Cloud Logging reads
// without configuration: the level is written as "severity" (DEBUG, INFO,
// WARNING, ERROR) and the message as "message" (jsonlog.CloudLogging).
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(jsonlog.New(w, jsonlog.CloudLogging(level)))
}
