// The usage chart: uPlot over GET /v1/accounts/{agentId}/usage buckets of
// hours or days, with the same numbers as a table for screen readers.
import uPlot from "uplot";
import { fractionDigits, h, money } from "./dom.js";

// currencyOf picks the currency the chart shows: the first one charged.
function currencyOf(buckets) {
  for (const b of buckets) for (const a of b.amounts || []) return a.currency;
  return "";
}

// renderChart draws buckets (time buckets) into box, replacing what it held.
export function renderChart(box, buckets, groupBy) {
  box.replaceChildren();
  if (box._plot) box._plot.destroy();
  if (buckets.length === 0) {
    box.append(h("p", { class: "empty" }, "No usage in this range."));
    return;
  }
  const currency = currencyOf(buckets);
  const d = currency ? fractionDigits(currency) : 0;
  const xs = buckets.map((b) => Date.parse(b.start) / 1000);
  const spent = buckets.map((b) => {
    const a = (b.amounts || []).find((m) => m.currency === currency);
    return a ? a.cents / 10 ** d : 0;
  });
  const calls = buckets.map((b) => b.count);
  const width = Math.max(280, Math.min(box.clientWidth || 640, 900));
  const opts = {
    width,
    height: 220,
    title: currency ? `Spent per ${groupBy} (${currency})` : `Calls per ${groupBy}`,
    series: [
      {},
      currency
        ? { label: `Spent (${currency})`, stroke: "#1d4ed8", fill: "rgba(29,78,216,0.15)", width: 2 }
        : { label: "Calls", stroke: "#1d4ed8", width: 2 },
      ...(currency ? [{ label: "Calls", stroke: "#b45309", width: 2, scale: "calls" }] : []),
    ],
    axes: [{}, { label: currency || "calls" }, ...(currency ? [{ side: 1, scale: "calls", grid: { show: false } }] : [])],
    scales: { x: { time: true } },
  };
  const data = currency ? [xs, spent, calls] : [xs, calls];
  const figure = h("figure", { class: "chart", "aria-label": opts.title });
  box.append(figure);
  box._plot = new uPlot(opts, data, figure);
  box.append(
    h(
      "table",
      { class: "usage-table", "data-testid": "usage-table" },
      h("caption", {}, `Usage per ${groupBy}`),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, groupBy === "hour" ? "Hour" : "Day"), h("th", { scope: "col" }, "Calls"), h("th", { scope: "col" }, "Spent"))),
      h(
        "tbody",
        {},
        buckets.map((b) =>
          h(
            "tr",
            {},
            h("td", {}, new Date(b.start).toLocaleString(undefined, groupBy === "hour" ? { dateStyle: "short", timeStyle: "short" } : { dateStyle: "medium" })),
            h("td", {}, String(b.count)),
            h("td", {}, (b.amounts || []).map(money).join(", ") || (b.units ? `${b.units} units` : "—")),
          ),
        ),
      ),
    ),
  );
}
