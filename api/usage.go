package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/usage"
)

func (s *Server) registerUsage(g group) {
	readers := s.auth(apikey.RoleBilling, apikey.RoleReader)
	g.GET("/accounts/:agentId/balance", getBy(agentParam, s.store.Balance), readers)
	g.GET("/accounts/:agentId/usage", s.getUsage, readers)
}

// usageAnswer is the body of GET /v1/accounts/{agentId}/usage: the query
// as it was read (defaults filled in) and one page of its buckets, whose
// starts and ends are shown in the query's time zone.
type usageAnswer struct {
	AgentID string        `json:"agentId"`
	From    time.Time     `json:"from"`
	To      time.Time     `json:"to"`
	GroupBy usage.GroupBy `json:"groupBy"`
	TZ      string        `json:"tz"`
	List[usage.Bucket]
}

func (s *Server) getUsage(c echo.Context) error {
	agent, p, err := agentPage(c)
	if err != nil {
		return err
	}
	q, err := s.usageQuery(c, agent)
	if err != nil {
		return err
	}
	items, next, err := s.store.Usage(storeCtx(c), q, p)
	if errors.Is(err, store.ErrInvalid) {
		return Invalid("cursor", "is not a cursor this service returned for this query")
	}
	if err != nil {
		return err
	}
	if items == nil {
		items = []usage.Bucket{}
	}
	for i := range items {
		if b := &items[i]; b.Start != nil {
			start, end := b.Start.In(q.Location), b.End.In(q.Location)
			b.Start, b.End = &start, &end
		}
	}
	return c.JSON(http.StatusOK, usageAnswer{
		AgentID: agent, From: q.From, To: q.To, GroupBy: q.GroupBy, TZ: q.Location.String(),
		List: List[usage.Bucket]{Items: items, NextCursor: next},
	})
}

// usageQuery reads ?from=&to=&groupBy=&tz= with their defaults (to: now;
// from: usage.DefaultRange before to; groupBy: day; tz: UTC) and checks
// them as every store does (usage.Query.Normalize).
func (s *Server) usageQuery(c echo.Context, agent string) (usage.Query, error) {
	q := usage.Query{AgentID: agent, GroupBy: usage.ByDay, Location: time.UTC, To: s.now()}
	var err error
	if v := c.QueryParam("to"); v != "" {
		if q.To, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return q, Invalid("to", "must be an RFC 3339 date-time")
		}
	}
	q.From = q.To.Add(-usage.DefaultRange)
	if v := c.QueryParam("from"); v != "" {
		if q.From, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return q, Invalid("from", "must be an RFC 3339 date-time")
		}
	}
	if v := c.QueryParam("groupBy"); v != "" {
		q.GroupBy = usage.GroupBy(v)
	}
	if v := c.QueryParam("tz"); v != "" {
		// LoadLocation also reads "Local", the server's own zone, which
		// is no name a client can mean.
		loc, err := time.LoadLocation(v)
		if err != nil || v == "Local" {
			return q, Invalid("tz", "must be an IANA time zone name, such as Europe/Berlin or UTC")
		}
		q.Location = loc
	}
	return q, fieldErrorOf(q.Normalize())
}
