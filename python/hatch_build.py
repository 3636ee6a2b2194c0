"""Puts the wallet MCP App (portal/dist/wallet.html, built by portal/web) into the package as stipend_mcp/wallet.html.

A hatchling build hook (pyproject.toml [tool.hatch.build.hooks.custom]): from
the repository, both the sdist and the wheel get a copy of the file; a wheel
built from the sdist finds the copy the sdist carries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class WalletAppHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        app = Path(self.root).parent / "portal" / "dist" / "wallet.html"
        shipped = Path(self.root) / "src" / "stipend_mcp" / "wallet.html"
        if app.is_file():
            target = "stipend_mcp/wallet.html" if self.target_name == "wheel" else "src/stipend_mcp/wallet.html"
            build_data["force_include"][str(app)] = target
        elif not shipped.is_file():
            raise FileNotFoundError(f"the wallet app is missing: neither {app} nor {shipped} exists")
