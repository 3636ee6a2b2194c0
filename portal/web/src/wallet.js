// The wallet: one agent's balance, usage, consumptions and receipts, a
// Checkout top-up and the auto top-up settings, read and changed through
// the portal session's routes. The /portal page (portal.js) and the MCP
// App (app.js) both mount it.
import { ApiError } from "./api.js";
import { renderChart, usageRange } from "./chart.js";
import { h, money, toMajor, toMinor, when } from "./dom.js";
import { verifyReceipt } from "./receipts.js";

const CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD"];

// mountWallet renders the wallet of session into root.
//   api: makeApi(...) of the session's token
//   session: GET /v1/portal/session's answer (agentId, expiresAt, checkout)
//   openLink(url): opens the Checkout page (a new tab, or the MCP host's link)
//   onExpired(): the token stopped working (expired or revoked)
export async function mountWallet(root, { api, session, openLink, onExpired }) {
  const agent = encodeURIComponent(session.agentId);
  const acct = `/v1/accounts/${agent}`;
  const status = h("p", { class: "status", role: "status", "aria-live": "polite", "data-testid": "status" });

  async function guarded(fn) {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) {
        onExpired();
        return undefined;
      }
      status.textContent = e.message;
      status.className = "status error";
      return undefined;
    }
  }

  // Balance
  const balanceBox = h("div", { "data-testid": "balance" });
  async function loadBalance() {
    const b = await api.get(`${acct}/balance`);
    const rows = [];
    for (const c of b.credits || []) {
      rows.push(h("tr", {}, h("th", { scope: "row" }, `Credits (${c.currency})`), h("td", { "data-testid": `available-${c.currency}` }, money(c.available)), h("td", {}, money(c.held))));
    }
    for (const q of b.quotas || []) {
      rows.push(h("tr", {}, h("th", { scope: "row" }, `Calls on ${q.service === "*" ? "any service" : q.service}`), h("td", {}, `${q.available} of ${q.limit}`), h("td", {}, String(q.held))));
    }
    for (const s of b.subscriptions || []) {
      rows.push(h("tr", {}, h("th", { scope: "row" }, `Subscription to ${s.scope.service === "*" ? "any service" : s.scope.service}`), h("td", {}, s.endsAt ? `until ${when(s.endsAt)}` : "unlimited"), h("td", {}, "—")));
    }
    balanceBox.replaceChildren(
      rows.length === 0
        ? h("p", { class: "empty" }, "Nothing to spend yet: top up below.")
        : h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "What"), h("th", { scope: "col" }, "Available"), h("th", { scope: "col" }, "Held"))), h("tbody", {}, rows)),
    );
  }

  // Usage
  const groupBy = h("select", { id: "usage-groupby" }, h("option", { value: "day" }, "Day"), h("option", { value: "hour" }, "Hour"));
  // Member: who spent, the breakdown of a shared wallet (docs/api.md, "Shared wallets").
  const breakdownBy = h("select", { id: "usage-breakdown" }, h("option", { value: "tool" }, "Tool"), h("option", { value: "service" }, "Service"), h("option", { value: "member" }, "Member"));
  const breakdownLabel = { tool: "Tool", service: "Service", member: "Member" };
  const chartBox = h("div", { class: "chart-box", "data-testid": "chart" });
  const breakdownBox = h("div", { "data-testid": "breakdown" });
  async function loadUsage() {
    const g = groupBy.value;
    const r = usageRange(g);
    const range = `from=${encodeURIComponent(r.from.toISOString())}&to=${encodeURIComponent(r.to.toISOString())}&tz=${encodeURIComponent(r.tz)}`;
    const [series, parts] = await Promise.all([
      api.get(`${acct}/usage?groupBy=${g}&${range}&limit=100`),
      api.get(`${acct}/usage?groupBy=${breakdownBy.value}&${range}&limit=100`),
    ]);
    renderChart(chartBox, series.items, g, r);
    breakdownBox.replaceChildren(
      parts.items.length === 0
        ? h("p", { class: "empty" }, "No calls yet.")
        : h(
            "table",
            {},
            h("caption", {}, `Usage by ${breakdownBy.value}`),
            h("thead", {}, h("tr", {}, h("th", { scope: "col" }, breakdownLabel[breakdownBy.value]), h("th", { scope: "col" }, "Calls"), h("th", { scope: "col" }, "Spent"))),
            h("tbody", {}, parts.items.map((b) => h("tr", {}, h("td", {}, b.memberId || (b.tool ? `${b.service} / ${b.tool}` : b.service)), h("td", {}, String(b.count)), h("td", {}, (b.amounts || []).map(money).join(", ") || (b.units ? `${b.units} units` : "—"))))),
          ),
    );
  }
  groupBy.addEventListener("change", () => guarded(loadUsage));
  breakdownBy.addEventListener("change", () => guarded(loadUsage));

  // Consumptions (newest last, as listed; the latest page)
  const consumptionBox = h("div", { "data-testid": "consumptions" });
  async function loadConsumptions() {
    const page = await api.get(`${acct}/consumptions?limit=100`);
    const items = page.items.slice().reverse();
    consumptionBox.replaceChildren(
      items.length === 0
        ? h("p", { class: "empty" }, "No calls yet.")
        : h(
            "table",
            {},
            h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "When"), h("th", { scope: "col" }, "Tool"), h("th", { scope: "col" }, "Charged"), h("th", { scope: "col" }, "Refund"))),
            h(
              "tbody",
              {},
              items.map((c) =>
                h(
                  "tr",
                  {},
                  h("td", {}, when(c.occurredAt)),
                  h("td", {}, `${c.service} / ${c.tool}`),
                  h("td", {}, c.cost && c.cost.currency ? money(c.cost) : `${c.units} unit${c.units === 1 ? "" : "s"}`),
                  h("td", { class: c.refund ? "refunded" : "" }, c.refund ? `refunded ${c.refund.cost && c.refund.cost.currency ? money(c.refund.cost) : `${c.refund.units} units`}` : "—"),
                ),
              ),
            ),
          ),
    );
  }

  // Receipts, each verified against the server's JWKS
  const receiptBox = h("div", { "data-testid": "receipts" });
  async function loadReceipts() {
    const [page, jwks] = await Promise.all([api.get(`${acct}/receipts?limit=100`), api.get("/.well-known/jwks.json")]);
    const items = page.items.slice().reverse();
    if (items.length === 0) {
      receiptBox.replaceChildren(h("p", { class: "empty" }, "No receipts yet."));
      return;
    }
    const checks = await Promise.all(items.map((r) => verifyReceipt(r, jwks)));
    receiptBox.replaceChildren(
      h(
        "ul",
        { class: "receipts" },
        items.map((r, i) => {
          const v = checks[i];
          return h(
            "li",
            { class: v.ok ? "receipt ok" : "receipt bad", "data-testid": "receipt", "data-verified": v.ok ? "true" : "false" },
            h("span", { class: "amount" }, `${r.kind === "refund" ? "Refund" : "Payment"} ${money(r.amount)}`),
            h("span", { class: "date" }, when(r.issuedAt)),
            v.ok
              ? h("span", { class: "verdict" }, "✓ Verified, signed by key ", h("code", {}, v.kid))
              : h("span", { class: "verdict", role: "alert" }, `✗ NOT verified: ${v.reason}${v.kid ? ` (key ${v.kid})` : ""}`),
            h("span", { class: "id" }, "Receipt ", h("code", {}, r.id)),
          );
        }),
      ),
    );
  }

  // Top-up through Stripe Checkout
  const topUpAmount = h("input", { id: "topup-amount", inputmode: "decimal", value: "10.00", autocomplete: "off", required: true });
  const topUpCurrency = h("select", { id: "topup-currency" }, CURRENCIES.map((c) => h("option", { value: c }, c)));
  const saveCard = h("input", { id: "topup-save", type: "checkbox" });
  const topUpButton = h("button", { type: "submit" }, "Top up");
  const topUpForm = h(
    "form",
    { class: "row", "data-testid": "topup-form" },
    h("label", { for: "topup-amount" }, "Amount"),
    topUpAmount,
    h("label", { for: "topup-currency" }, "Currency"),
    topUpCurrency,
    h("span", { class: "check" }, saveCard, h("label", { for: "topup-save" }, "Save my card for auto top-up")),
    topUpButton,
  );
  topUpForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    guarded(async () => {
      const cents = toMinor(topUpAmount.value, topUpCurrency.value);
      if (!cents) {
        status.textContent = "Enter an amount such as 10.00.";
        status.className = "status error";
        topUpAmount.focus();
        return;
      }
      topUpButton.disabled = true;
      try {
        const co = await api.send("POST", `${acct}/checkout`, { amount: { cents, currency: topUpCurrency.value }, saveForTopUp: saveCard.checked }, crypto.randomUUID());
        status.className = "status";
        status.replaceChildren("Checkout started: ", h("a", { href: co.url, target: "_blank", rel: "noopener noreferrer", "data-testid": "checkout-link" }, "pay on Stripe"), ".");
        await openLink(co.url);
      } finally {
        topUpButton.disabled = false;
      }
    });
  });
  const topUpSection = session.checkout
    ? topUpForm
    : h("p", { class: "notice", "data-testid": "topup-unavailable" }, "Top-up is not available here: this Stipend server has no Stripe account configured. Ask the service you use to add credits.");

  // Auto top-up
  const autoBox = h("div", { "data-testid": "autotopup" });
  async function loadAuto() {
    let t;
    try {
      t = await api.get(`${acct}/topup`);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 404) throw e;
      t = { enabled: false };
    }
    const s = t.settings;
    const cur = s ? s.amount.currency : "USD";
    const major = (m, dflt) => (m ? toMajor(m) : dflt);
    const threshold = h("input", { id: "auto-threshold", inputmode: "decimal", value: major(s && s.threshold, "5.00"), required: true });
    const amount = h("input", { id: "auto-amount", inputmode: "decimal", value: major(s && s.amount, "20.00"), required: true });
    const cap = h("input", { id: "auto-cap", inputmode: "decimal", value: major(s && s.dailyCap, "100.00"), required: true });
    const currency = h("select", { id: "auto-currency" }, CURRENCIES.map((c) => h("option", { value: c, selected: c === cur }, c)));
    const form = h(
      "form",
      { class: "grid" },
      h("label", { for: "auto-threshold" }, "When available credits fall below"),
      threshold,
      h("label", { for: "auto-amount" }, "add"),
      amount,
      h("label", { for: "auto-cap" }, "but at most, per day,"),
      cap,
      h("label", { for: "auto-currency" }, "Currency"),
      currency,
      h("div", { class: "row" }, h("button", { type: "submit" }, t.enabled ? "Save auto top-up" : "Turn on auto top-up"), t.enabled ? h("button", { type: "button", class: "secondary", onclick: () => guarded(disableAuto) }, "Turn off") : null),
    );
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      guarded(async () => {
        const c = currency.value;
        const body = {
          threshold: { cents: toMinor(threshold.value, c), currency: c },
          amount: { cents: toMinor(amount.value, c), currency: c },
          dailyCap: { cents: toMinor(cap.value, c), currency: c },
          scope: { service: "*" },
        };
        if ([body.threshold, body.amount, body.dailyCap].some((m) => m.cents === null)) {
          status.textContent = "Enter amounts such as 5.00.";
          status.className = "status error";
          return;
        }
        try {
          await api.send("PUT", `${acct}/topup`, body);
        } catch (e) {
          if (e instanceof ApiError && e.status === 409) {
            status.textContent = "Auto top-up needs a saved card: top up once with “Save my card for auto top-up” ticked.";
            status.className = "status error";
            return;
          }
          throw e;
        }
        status.textContent = "Auto top-up is on.";
        status.className = "status";
        await loadAuto();
      });
    });
    autoBox.replaceChildren(
      h("p", { "data-testid": "autotopup-state" }, t.enabled ? `On: below ${money(s.threshold)}, add ${money(s.amount)} (at most ${money(s.dailyCap)} a day).` : t.disabledReason ? `Off (${t.disabledReason}).` : "Off."),
      form,
    );
  }
  async function disableAuto() {
    await api.send("DELETE", `${acct}/topup`);
    status.textContent = "Auto top-up is off.";
    status.className = "status";
    await loadAuto();
  }

  const refresh = h("button", { type: "button", class: "secondary", onclick: () => guarded(loadAll) }, "Refresh");
  async function loadAll() {
    await Promise.all([loadBalance(), loadUsage(), loadConsumptions(), loadReceipts(), loadAuto()]);
  }

  root.replaceChildren(
    h(
      "header",
      {},
      h("h1", {}, "Wallet"),
      h("p", { class: "who" }, "Agent ", h("code", { "data-testid": "agent" }, session.agentId), ` · this link works until ${when(session.expiresAt)}`),
      refresh,
    ),
    status,
    h("section", { "aria-labelledby": "h-balance" }, h("h2", { id: "h-balance" }, "Balance"), balanceBox),
    h("section", { "aria-labelledby": "h-topup" }, h("h2", { id: "h-topup" }, "Top up"), topUpSection),
    h(
      "section",
      { "aria-labelledby": "h-usage" },
      h("h2", { id: "h-usage" }, "Usage"),
      h("div", { class: "row" }, h("label", { for: "usage-groupby" }, "Per"), groupBy, h("label", { for: "usage-breakdown" }, "Breakdown by"), breakdownBy),
      chartBox,
      breakdownBox,
    ),
    h("section", { "aria-labelledby": "h-calls" }, h("h2", { id: "h-calls" }, "Calls"), consumptionBox),
    h("section", { "aria-labelledby": "h-receipts" }, h("h2", { id: "h-receipts" }, "Receipts"), h("p", { class: "hint" }, "Each receipt is checked here, in your browser, against the keys the server publishes."), receiptBox),
    h("section", { "aria-labelledby": "h-auto" }, h("h2", { id: "h-auto" }, "Auto top-up"), autoBox),
  );
  await guarded(loadAll);
  root.setAttribute("data-ready", "true");
}
