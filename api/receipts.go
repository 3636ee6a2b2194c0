package api

import (
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/receipt"
)

func (s *Server) registerReceipts(g group) {
	readers := s.auth(apikey.RoleBilling, apikey.RoleReader)
	g.GET("/receipts/:id", s.getReceipt, readers)
	g.GET("/accounts/:agentId/receipts", s.listReceipts, readers)
}

func (s *Server) getReceipt(c echo.Context) error {
	return getOwned(c, "receipt", s.store.GetReceipt, func(r *receipt.Signed) string { return r.AgentID })
}

func (s *Server) listReceipts(c echo.Context) error {
	agent, p, err := agentPage(c)
	if err != nil {
		return err
	}
	items, next, err := s.store.ListReceipts(storeCtx(c), agent, p)
	return answerList(c, items, next, err)
}
