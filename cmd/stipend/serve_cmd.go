package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// serveCmd is `stipend serve`: it runs Main until ctx is done (SIGTERM or
// SIGINT in main), then drains in-flight requests and exits 0.
func serveCmd(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	m := NewMain()
	m.Stdout, m.Stderr = stdout, stderr
	if err := m.ParseFlags(args, env); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "stipend serve: %v\n", err)
		if _, ok := errors.AsType[*UsageError](err); ok {
			fmt.Fprintln(stderr)
			printUsage(stderr)
		}
		return 2
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "stipend serve: %v\n", err)
		_ = m.Close()
		return 1
	}
	exit := 0
	select {
	case <-ctx.Done():
		m.Logger.Info("shutting down: draining in-flight requests", "timeout", m.Config.ShutdownTimeout.String())
	case err := <-m.serveErr:
		// The server stopped by itself; hand the error back for Close.
		m.serveErr <- err
		m.Logger.Error("http server stopped", "err", err)
		exit = 1
	}
	if err := m.Close(); err != nil {
		m.Logger.Error("shutdown", "err", err)
		return 1
	}
	m.Logger.Info("stopped")
	return exit
}
