package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
)

// The steps most handlers share: read the path parameter and the body,
// call the store, answer its document.

// withBody reads a request on the document the path parameter name names
// and its JSON body B: the parameter is checked first, then the body is
// read with decode (s.decode, or s.decodeOptional where it may be absent).
func withBody[B any](c echo.Context, name string, decode func(echo.Context, any) error) (string, *B, error) {
	id, err := pathParam(c, name)
	if err != nil {
		return "", nil, err
	}
	b := new(B)
	if err := decode(c, b); err != nil {
		return "", nil, err
	}
	return id, b, nil
}

// answer returns err, or answers status with v.
func answer(c echo.Context, status int, v any, err error) error {
	if err != nil {
		return err
	}
	return c.JSON(status, v)
}

// getByParam is the handler of GET on the document the path parameter name
// names (an agent's account, a payment…): 200 with what get reads.
func getByParam[T any](name string, get func(context.Context, string) (T, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := pathParam(c, name)
		if err != nil {
			return err
		}
		doc, err := get(storeCtx(c), id)
		return answer(c, http.StatusOK, doc, err)
	}
}
