package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/store"
)

// List is the body of every list answer.
type List[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// page reads ?limit= (1–100, default 100) and ?cursor=.
func page(c echo.Context) (store.Page, error) {
	p := store.Page{Cursor: c.QueryParam("cursor")}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxPageSize {
			return p, Invalid("limit", fmt.Sprintf("must be an integer between 1 and %d", store.MaxPageSize))
		}
		p.Limit = n
	}
	if len(p.Cursor) > 1024 {
		return p, Invalid("cursor", "is not a cursor this service returned")
	}
	return p, nil
}

// answerList answers a page of a list (an empty page as []), turning a
// store's Invalid (a cursor of another list, or malformed) into a 400
// naming the cursor.
func answerList[T any](c echo.Context, items []T, next string, err error) error {
	if errors.Is(err, store.ErrInvalid) {
		return Invalid("cursor", "is not a cursor this service returned for this list")
	}
	if err != nil {
		return err
	}
	if items == nil {
		items = []T{}
	}
	return c.JSON(http.StatusOK, List[T]{Items: items, NextCursor: next})
}

// agentPage reads the :agentId path parameter and the page of a list of
// one agent's rows.
func agentPage(c echo.Context) (string, store.Page, error) {
	agent, err := agentParam(c)
	if err != nil {
		return "", store.Page{}, err
	}
	p, err := page(c)
	return agent, p, err
}
