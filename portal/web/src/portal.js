// The /portal page: takes the session's token out of the URL at once
// (?session=…), keeps it in this tab's sessionStorage only, and mounts the
// wallet with it.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { ApiError, makeApi } from "./api.js";
import { h } from "./dom.js";
import { mountWallet } from "./wallet.js";

const KEY = "stipend.portal.token";

function takeToken() {
  const url = new URL(window.location.href);
  const fromUrl = url.searchParams.get("session");
  if (fromUrl) {
    sessionStorage.setItem(KEY, fromUrl);
    url.searchParams.delete("session");
    history.replaceState(null, "", url.pathname + (url.search === "?" ? "" : url.search) + url.hash);
  }
  return sessionStorage.getItem(KEY);
}

function showGone(root) {
  sessionStorage.removeItem(KEY);
  root.replaceChildren(
    h("h1", {}, "Wallet"),
    h("p", { class: "notice error", role: "alert", "data-testid": "expired" }, "This wallet link has expired or was revoked. Ask the service you use for a new link."),
  );
  root.setAttribute("data-ready", "true");
}

async function main() {
  const root = document.getElementById("wallet");
  const token = takeToken();
  if (!token) {
    root.replaceChildren(h("h1", {}, "Wallet"), h("p", { class: "notice", role: "alert", "data-testid": "no-session" }, "Open this page with the link the service you use gave you."));
    root.setAttribute("data-ready", "true");
    return;
  }
  const params = new URLSearchParams(window.location.search);
  const api = makeApi("", token);
  let session;
  try {
    session = await api.get("/v1/portal/session");
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return showGone(root);
    root.replaceChildren(h("p", { class: "notice error", role: "alert" }, `The wallet could not load: ${e.message}`));
    return;
  }
  const framed = window.top !== window.self;
  await mountWallet(root, {
    api,
    session,
    // Stripe Checkout refuses to be framed: when embedded, it opens in a new tab.
    openLink: async (url) => {
      if (framed) window.open(url, "_blank", "noopener,noreferrer");
      else window.location.assign(url);
    },
    onExpired: () => showGone(root),
  });
  const back = params.get("checkout");
  if (back) {
    const status = root.querySelector('[data-testid="status"]');
    status.textContent = back === "success" ? "Thank you: your payment is being confirmed; the balance shows it in a moment." : "Checkout was cancelled; nothing was charged.";
  }
}

main();
