// Command paidtools is an example MCP server whose tools are paid through
// Stipend: echo is free, forecast, history and hourly are priced (see
// prices). Every tools/call passes the mcpgate gate, which holds the price
// before the tool runs and charges the calling agent only when the tool
// succeeds (hourly: what it reports it cost).
//
// Configuration (environment):
//
//	STIPEND_URL          Stipend's base URL (default http://127.0.0.1:8080)
//	STIPEND_HOST_KEY     an API key with the host role (required)
//	PAIDTOOLS_SERVICE    the Stipend service name of these tools (default "weather")
//	PAIDTOOLS_AGENT_ID   charge every call to this agent (one agent per process,
//	                     as with stdio); otherwise the request's or the
//	                     initialize request's _meta "io.stipend/agent-id"
//	PAIDTOOLS_ADDR       serve streamable HTTP on this address (such as
//	                     127.0.0.1:8090, path /mcp); otherwise serve stdio
//	PAIDTOOLS_STATELESS  "true" serves stateless streamable HTTP (MCP 2026-07-28:
//	                     no sessions, so any instance behind one address can
//	                     answer any request); a retry is recognised only by the
//	                     client's _meta "io.stipend/idempotency-key"
//	PAIDTOOLS_FAIL_OPEN  "true" runs calls uncharged while Stipend is down
//	PAIDTOOLS_PURCHASE_URL  where agents' owners buy credits, shown on refusals
//	PAIDTOOLS_PRICES     a JSON price table replacing the built-in one, such as
//	                     {"echo":{"free":true},"forecast":{"cost":{"cents":7,"currency":"USD"},"policy":"before"}};
//	                     a tool left out of it is refused; "policy" is "on_success"
//	                     (the default) or "before"
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/mcpgate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Logs go to stderr: with stdio, stdout carries the protocol.
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, os.Getenv, log); err != nil {
		log.Error("paidtools", "err", err)
		os.Exit(1)
	}
}

// config is the example's configuration, read from the environment.
type config struct {
	stipendURL  string
	hostKey     string
	service     string
	agentID     string
	addr        string
	failOpen    bool
	stateless   bool
	purchaseURL string
	// prices replaces the built-in price table when not nil.
	prices map[string]mcpgate.Price
}

func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		stipendURL:  getenv("STIPEND_URL"),
		hostKey:     getenv("STIPEND_HOST_KEY"),
		service:     getenv("PAIDTOOLS_SERVICE"),
		agentID:     getenv("PAIDTOOLS_AGENT_ID"),
		addr:        getenv("PAIDTOOLS_ADDR"),
		purchaseURL: getenv("PAIDTOOLS_PURCHASE_URL"),
	}
	if c.stipendURL == "" {
		c.stipendURL = "http://127.0.0.1:8080"
	}
	if c.service == "" {
		c.service = "weather"
	}
	if c.hostKey == "" {
		return c, errors.New("STIPEND_HOST_KEY is required (an API key with the host role)")
	}
	if v := getenv("PAIDTOOLS_FAIL_OPEN"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("PAIDTOOLS_FAIL_OPEN: %q is not a boolean", v)
		}
		c.failOpen = b
	}
	if v := getenv("PAIDTOOLS_STATELESS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("PAIDTOOLS_STATELESS: %q is not a boolean", v)
		}
		c.stateless = b
	}
	if v := getenv("PAIDTOOLS_PRICES"); v != "" {
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		err := dec.Decode(&c.prices)
		if _, end := dec.Token(); err == nil && (c.prices == nil || !errors.Is(end, io.EOF)) {
			err = errors.New("want one JSON object of tool names and prices")
		}
		if err != nil {
			return c, fmt.Errorf("PAIDTOOLS_PRICES: %w", err)
		}
	}
	return c, nil
}

// newGate builds the gate of c, charging through a Stipend client.
func newGate(c config, log *slog.Logger, opts ...client.Option) (*mcpgate.Gate, error) {
	stipend, err := client.New(c.stipendURL, c.hostKey, append([]client.Option{client.WithUserAgent("paidtools")}, opts...)...)
	if err != nil {
		return nil, err
	}
	table := prices
	if c.prices != nil {
		table = c.prices
	}
	cfg := mcpgate.Config{
		Stipend: stipend, Service: c.service, Prices: table,
		FailOpen: c.failOpen, PurchaseURL: c.purchaseURL, Logger: log,
	}
	if c.agentID != "" {
		agent := c.agentID
		cfg.AgentID = func(context.Context, *mcp.CallToolRequest) (string, error) { return agent, nil }
	}
	return mcpgate.New(cfg)
}

func run(ctx context.Context, getenv func(string) string, log *slog.Logger) error {
	c, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	g, err := newGate(c, log)
	if err != nil {
		return err
	}
	s := newServer(g)
	if c.addr == "" {
		log.Info("paidtools: serving MCP on stdio", "stipend", c.stipendURL, "service", c.service)
		return s.Run(ctx, mcpgate.Transport(&mcp.StdioTransport{}))
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	return serveHTTP(ctx, ln, s, &mcp.StreamableHTTPOptions{Stateless: c.stateless}, log)
}

// serveHTTP serves s as streamable HTTP at /mcp on ln, with opts, until ctx ends.
func serveHTTP(ctx context.Context, ln net.Listener, s *mcp.Server, opts *mcp.StreamableHTTPOptions, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpgate.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("paidtools: serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
