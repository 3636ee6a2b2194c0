// The usage chart: uPlot over GET /v1/accounts/{agentId}/usage buckets of
// hours or days (in the browser's time zone), every hour or day of the
// range shown (empty ones as zero), with the same numbers as a table for
// screen readers.
import uPlot from "uplot";
import { fractionDigits, h, money } from "./dom.js";

// usageRange is the range the chart covers, in the browser's time zone:
// the last 30 days by day (from local midnight), or the last 48 hours by
// hour. The API's query takes the same zone (tz), so its buckets start at
// these steps.
export function usageRange(groupBy, now = new Date()) {
  const from = new Date(now);
  if (groupBy === "hour") {
    from.setMinutes(0, 0, 0);
    from.setHours(from.getHours() - 47);
  } else {
    from.setHours(0, 0, 0, 0);
    from.setDate(from.getDate() - 29);
  }
  return { from, to: now, tz: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC" };
}

// steps lists the start of every hour or day from from to to.
function steps(groupBy, from, to) {
  const out = [];
  for (const t = new Date(from); t < to; groupBy === "hour" ? t.setHours(t.getHours() + 1) : t.setDate(t.getDate() + 1)) {
    out.push(t.getTime());
  }
  return out;
}

// currencyOf picks the currency the chart shows: the first one charged.
function currencyOf(buckets) {
  for (const b of buckets) for (const a of b.amounts || []) return a.currency;
  return "";
}

// renderChart draws buckets (time buckets of range) into box, replacing
// what it held.
export function renderChart(box, buckets, groupBy, range) {
  if (box._plot) box._plot.destroy();
  if (box._resize) box._resize.disconnect();
  box._plot = box._resize = null;
  box.replaceChildren();
  if (buckets.length === 0) {
    box.append(h("p", { class: "empty" }, "No usage in this range."));
    return;
  }
  const currency = currencyOf(buckets);
  const d = currency ? fractionDigits(currency) : 0;
  const byStart = new Map(buckets.map((b) => [Date.parse(b.start), b]));
  const xs = steps(groupBy, range.from, range.to);
  const spent = xs.map((x) => {
    const a = ((byStart.get(x) || {}).amounts || []).find((m) => m.currency === currency);
    return a ? a.cents / 10 ** d : 0;
  });
  const calls = xs.map((x) => (byStart.get(x) || { count: 0 }).count);
  const title = currency ? `Spent per ${groupBy} (${currency}) and calls` : `Calls per ${groupBy}`;
  const bars = uPlot.paths.bars({ size: [0.7, 24] });
  const opts = {
    width: Math.max(260, box.clientWidth || 640),
    height: 220,
    title,
    series: [
      {},
      currency
        ? { label: `Spent (${currency})`, stroke: "#1d4ed8", fill: "rgba(29,78,216,0.55)", width: 1, paths: bars, points: { show: false } }
        : { label: "Calls", stroke: "#1d4ed8", fill: "rgba(29,78,216,0.55)", width: 1, paths: bars, points: { show: false } },
      ...(currency ? [{ label: "Calls", stroke: "#b45309", width: 2, scale: "calls", points: { show: true, size: 5 } }] : []),
    ],
    axes: [{}, { label: currency || "calls" }, ...(currency ? [{ side: 1, scale: "calls", grid: { show: false } }] : [])],
    scales: {
      x: { time: true, range: [xs[0] / 1000 - 1800, xs[xs.length - 1] / 1000 + (groupBy === "hour" ? 3600 : 86400)] },
      calls: { range: (u, min, max) => [0, Math.max(1, Math.ceil(max * 1.25))] },
    },
  };
  const seconds = xs.map((x) => x / 1000);
  const data = currency ? [seconds, spent, calls] : [seconds, calls];
  const figure = h("figure", { class: "chart", "aria-label": title });
  box.append(figure);
  box._plot = new uPlot(opts, data, figure);
  box._resize = new ResizeObserver(() => {
    const w = Math.max(260, box.clientWidth);
    if (box._plot && Math.abs(box._plot.width - w) > 2) box._plot.setSize({ width: w, height: 220 });
  });
  box._resize.observe(box);
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
