package api

import (
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// checkQuery refuses a query string that net/url would read with
// parameters silently dropped or shadowed: a malformed percent-encoding
// (?limit=%ZZ), a ";" separator, or one parameter given twice. Each is a
// 400 naming the parameter, on every route, instead of an answer that
// ignored what the caller sent.
func checkQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if raw := c.Request().URL.RawQuery; raw != "" {
			if err := queryError(raw); err != nil {
				return err
			}
		}
		return next(c)
	}
}

func queryError(raw string) error {
	seen := map[string]bool{}
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return Invalid(k, "malformed percent-encoding in the parameter's name")
		}
		switch _, err := url.QueryUnescape(v); {
		case strings.Contains(pair, ";"):
			return Invalid(name, `the query separates parameters with "&", not ";"`)
		case err != nil:
			return Invalid(name, "malformed percent-encoding in the parameter's value")
		case seen[name]:
			return Invalid(name, "given more than once")
		}
		seen[name] = true
	}
	return nil
}
