package portal

import (
	"embed"
	"io/fs"
)

// The built wallet (portal/web, `npm run build`), committed and embedded so
// that the binary serves it with no other step. assets_test.go rebuilds it
// and fails when this copy is stale.
//
//go:generate npm --prefix web ci --no-audit --no-fund
//go:generate npm --prefix web run build
//go:embed dist
var dist embed.FS

// Assets returns the page's files: portal.html, portal.js, portal.css and
// wallet.html.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}

// WalletHTML is the wallet as an MCP App: one self-contained HTML document,
// served as the resource ui://stipend/wallet (mimeType WalletMIMEType).
func WalletHTML() []byte {
	b, err := fs.ReadFile(dist, "dist/wallet.html")
	if err != nil {
		panic(err) // embedded above
	}
	return b
}

// The MCP App's resource (SEP-1865).
const (
	WalletURI      = "ui://stipend/wallet"
	WalletMIMEType = "text/html;profile=mcp-app"
)
