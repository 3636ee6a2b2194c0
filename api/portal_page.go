package api

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/portal"
)

// registerPortalPage serves the end user's page at /portal and its assets
// at /portal/assets/…, from the files embedded in the binary (package
// portal). The page holds no data: it reads everything with the session's
// token, which it takes out of its URL on load.
func (s *Server) registerPortalPage(e group) {
	assets := portal.Assets()
	e.GET("/portal", func(c echo.Context) error {
		page, err := fs.ReadFile(assets, "portal.html")
		if err != nil {
			return err
		}
		s.portalHeaders(c.Response().Header())
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		return c.HTMLBlob(http.StatusOK, page)
	})
	e.GET("/portal/assets/:name", func(c echo.Context) error {
		name := c.Param("name")
		b, err := fs.ReadFile(assets, name)
		if err != nil || strings.HasSuffix(name, ".html") {
			return NotFound("no such asset")
		}
		s.portalHeaders(c.Response().Header())
		c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
		return c.Blob(http.StatusOK, contentType(name), b)
	})
}

// portalHeaders are the headers of the page and its assets: a strict
// Content-Security-Policy (nothing but this origin; framed only by
// Config.PortalFrameAncestors), no Referer (the first load's URL carries
// the token), no MIME sniffing.
func (s *Server) portalHeaders(h http.Header) {
	ancestors := "'none'"
	if len(s.frameAncestors) > 0 {
		ancestors = strings.Join(s.frameAncestors, " ")
	} else {
		h.Set("X-Frame-Options", "DENY")
	}
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors "+ancestors)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// checkPortalConfig refuses a Config.PublicURL that is not an http(s)
// origin and a frame ancestor that could break out of its CSP directive.
func checkPortalConfig(publicURL string, ancestors []string) error {
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
			strings.TrimSuffix(u.Path, "/") != "" {
			return fmt.Errorf("api: Config.PublicURL %q: want an origin such as https://billing.example.com", publicURL)
		}
	}
	for _, a := range ancestors {
		if a == "" || strings.ContainsAny(a, " ;,\t\r\n'\"") && a != "'self'" {
			return fmt.Errorf("api: Config.PortalFrameAncestors %q: want origins such as https://app.example.com, or 'self'", a)
		}
	}
	return nil
}
