// h builds an element: text children are text nodes, so data from the API
// is never parsed as HTML.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// fractionDigits is how many minor-unit digits currency has (USD 2, JPY 0).
export function fractionDigits(currency) {
  try {
    return new Intl.NumberFormat("en", { style: "currency", currency }).resolvedOptions().maximumFractionDigits;
  } catch {
    return 2;
  }
}

// money formats {cents, currency}.
export function money(m) {
  if (!m || !m.currency) return "—";
  const d = fractionDigits(m.currency);
  return new Intl.NumberFormat(undefined, { style: "currency", currency: m.currency }).format(m.cents / 10 ** d);
}

// toMinor reads an amount typed in major units ("12.50") as minor units.
export function toMinor(text, currency) {
  const d = fractionDigits(currency);
  const m = /^\s*(\d{1,12})(?:[.,](\d+))?\s*$/.exec(text);
  if (!m) return null;
  const frac = (m[2] || "").padEnd(d, "0");
  if (frac.length > d) return null;
  return Number(m[1]) * 10 ** d + (d ? Number(frac) : 0);
}

// toMajor shows minor units as typed in major units ("12.50").
export function toMajor(m) {
  const d = fractionDigits(m.currency);
  return (m.cents / 10 ** d).toFixed(d);
}

export function when(iso) {
  if (!iso) return "—";
  return new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}
