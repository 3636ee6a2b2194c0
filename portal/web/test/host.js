// The test's MCP Apps host: renders a ui:// resource as hosts do (a
// sandboxed frame without same-origin, the resource's CSP with its
// connectDomains) and speaks the host side of SEP-1865 through the
// ext-apps AppBridge. Tool calls go to the host's backend (the Go test's
// MCP client) through window.hostCallTool, links to window.hostOpenLink.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

window.startHost = async (html, toolResult, connectDomains, agent) => {
  const csp = `default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src ${connectDomains.join(" ")}`;
  const doc = html.replace("<head>", `<head><meta http-equiv="Content-Security-Policy" content="${csp}">`);
  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts allow-forms");
  iframe.setAttribute("title", "Stipend wallet");
  iframe.style.cssText = "width:100%;height:1500px;border:0";
  iframe.srcdoc = doc;
  document.body.replaceChildren(iframe);
  const bridge = new AppBridge(null, { name: "stipend-test-host", version: "1.0.0" }, { openLinks: {}, serverTools: {} });
  bridge.oncalltool = async (params) => window.hostCallTool(agent, params);
  bridge.onopenlink = async ({ url }) => {
    await window.hostOpenLink(url);
    return {};
  };
  bridge.oninitialized = async () => {
    await bridge.sendToolInput({ arguments: {} });
    await bridge.sendToolResult(toolResult);
  };
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
};
