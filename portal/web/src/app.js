// The wallet as an MCP App (ui://stipend/wallet, SEP-1865): the host renders
// this document in a sandboxed frame and sends it the result of the tool
// call it belongs to. The gate's wallet tool answers a portal session
// minted for the calling agent under _meta "io.stipend/portal-session";
// for any other result (such as a payment_required refusal) the app calls
// the wallet tool itself, through the host. It never sees the gate's key.
import { App } from "@modelcontextprotocol/ext-apps";
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { ApiError, makeApi } from "./api.js";
import { h } from "./dom.js";
import { mountWallet } from "./wallet.js";

const META = "io.stipend/portal-session";
const root = document.getElementById("wallet");
const app = new App({ name: "Stipend wallet", version: "1.0.0" }, {});
let mounted = false;

function sessionOf(result) {
  const s = result && result._meta && result._meta[META];
  return s && s.token && s.api ? s : null;
}

async function show(portal) {
  const api = makeApi(portal.api, portal.token);
  let session;
  try {
    session = await api.get("/v1/portal/session");
  } catch (e) {
    const gone = e instanceof ApiError && e.status === 401;
    root.replaceChildren(h("p", { class: "notice error", role: "alert", "data-testid": gone ? "expired" : "error" }, gone ? "This wallet session has expired. Ask again to see your wallet." : `The wallet could not load: ${e.message}`));
    root.setAttribute("data-ready", "true");
    return;
  }
  mounted = true;
  await mountWallet(root, {
    api,
    session,
    openLink: async (url) => {
      await app.openLink({ url });
    },
    onExpired: () => {
      root.replaceChildren(h("p", { class: "notice error", role: "alert", "data-testid": "expired" }, "This wallet session has expired. Ask again to see your wallet."));
    },
  });
}

app.ontoolresult = async (result) => {
  if (mounted) return;
  let portal = sessionOf(result);
  if (!portal) {
    const minted = await app.callServerTool({ name: "wallet", arguments: {} });
    portal = sessionOf(minted);
  }
  if (!portal) {
    root.replaceChildren(h("p", { class: "notice error", role: "alert", "data-testid": "error" }, "The wallet is not available for this call."));
    root.setAttribute("data-ready", "true");
    return;
  }
  await show(portal);
};

app.connect();
