"""Stipend for MCP servers in Python.

A Gate charges each tool call of an MCP server to Stipend: an MCPServer of
the official SDK (mcp 2.x) or a FastMCP server (fastmcp 4.x). It is the twin
of the Go gate (mcpgate) and the TypeScript gate (@stipend-mcp/stipend): the
same prices, policies, idempotency keys, refusals and _meta, so one call
retried through any of them is charged once. StipendClient calls Stipend's
REST API (httpx, with the Go client's retries).
"""

from .amount import Amount, cents, cents_or_units, report_cost, units_used
from .client import Account, Caps, Membership, Money, Page, PortalSession, Problem, StipendClient, StipendError, WalletMembership
from .gate import META, SUPPORTED_SDKS, CallInfo, Gate, default_agent_id
from .key import arguments_json, idempotency_key, request_stamp
from .price import Policy, Price, credits, credits_or_units, describe_terms, free, units
from .refusal import Refusal, RefusalKind, refusal_text
from .wallet import META_PORTAL_SESSION, WALLET_MIME_TYPE, WALLET_TOOL_NAME, WALLET_URI

__all__ = [
    "META",
    "META_PORTAL_SESSION",
    "SUPPORTED_SDKS",
    "WALLET_MIME_TYPE",
    "WALLET_TOOL_NAME",
    "WALLET_URI",
    "Account",
    "Amount",
    "CallInfo",
    "Caps",
    "Gate",
    "Membership",
    "Money",
    "Page",
    "Policy",
    "PortalSession",
    "Price",
    "Problem",
    "Refusal",
    "RefusalKind",
    "StipendClient",
    "StipendError",
    "WalletMembership",
    "arguments_json",
    "cents",
    "cents_or_units",
    "credits",
    "credits_or_units",
    "default_agent_id",
    "describe_terms",
    "free",
    "idempotency_key",
    "refusal_text",
    "report_cost",
    "request_stamp",
    "units",
    "units_used",
]
