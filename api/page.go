package api

import (
	"errors"
	"fmt"
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

// listOf answers a list, turning a store's Invalid (a malformed cursor)
// into a 400 naming the cursor.
func listOf[T any](items []T, next string, err error) (List[T], error) {
	if errors.Is(err, store.ErrInvalid) {
		return List[T]{}, Invalid("cursor", "is not a cursor this service returned for this list")
	}
	if err != nil {
		return List[T]{}, err
	}
	if items == nil {
		items = []T{}
	}
	return List[T]{Items: items, NextCursor: next}, nil
}
