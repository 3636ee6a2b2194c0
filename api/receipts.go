package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
)

func (s *Server) registerReceipts(g group) {
	readers := s.auth(apikey.RoleBilling, apikey.RoleReader)
	g.GET("/receipts/:id", s.getReceipt, readers)
	g.GET("/accounts/:agentId/receipts", s.listReceipts, readers)
}

func (s *Server) getReceipt(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	r, err := s.store.GetReceipt(storeCtx(c), id)
	if err != nil {
		return absentAs(err, "receipt")
	}
	if err := ownedBy(c, r.AgentID, "receipt"); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) listReceipts(c echo.Context) error {
	agent, p, err := agentPage(c)
	if err != nil {
		return err
	}
	items, next, err := s.store.ListReceipts(storeCtx(c), agent, p)
	return answerList(c, items, next, err)
}
