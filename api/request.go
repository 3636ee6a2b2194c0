package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/idempotency"
)

// The steps most handlers share: read the path parameter and the body,
// call the store, answer its document.

// withBody reads a request's first part with first (the path parameter:
// agentParam, idParam; or idempotencyKey) and, once that is good, its JSON
// body B with decode (s.decode, or s.decodeOptional where it may be absent).
func withBody[B any](c echo.Context, first func(echo.Context) (string, error), decode func(echo.Context, any) error) (string, *B, error) {
	v, err := first(c)
	if err != nil {
		return "", nil, err
	}
	b := new(B)
	if err := decode(c, b); err != nil {
		return "", nil, err
	}
	return v, b, nil
}

// idParam returns the :id path parameter, unescaped and checked.
func idParam(c echo.Context) (string, error) { return pathParam(c, "id") }

// idempotencyKey returns the request's Idempotency-Key, checked.
func idempotencyKey(c echo.Context) (string, error) { return idempotency.ParseKey(c.Request().Header) }

// createdStatus is the status of an answer to a call that creates a
// document idempotently: 201 when this call created it, 200 when it
// answers what an earlier call with the same key created.
func createdStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// answer returns err, or answers status with v.
func answer(c echo.Context, status int, v any, err error) error {
	if err != nil {
		return err
	}
	return c.JSON(status, v)
}

// getBy is the handler of GET on the document param names (agentParam:
// an agent's account, balance, top-up; idParam: a payment, a delivery):
// 200 with what get reads.
func getBy[T any](param func(echo.Context) (string, error), get func(context.Context, string) (T, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := param(c)
		if err != nil {
			return err
		}
		doc, err := get(storeCtx(c), id)
		return answer(c, http.StatusOK, doc, err)
	}
}
