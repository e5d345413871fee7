// Building blocks of the console's pages that know nothing of the broker: the DOM builder,
// figures as an operator reads them, tables, the confirmation dialog and the typed form
// fields. Server text goes into the page only as text (text nodes, attribute values),
// never parsed as HTML.

// ---------------------------------------------------------------------------------------
// The DOM builder. h("td", {class: "num"}, "12") makes <td class="num">12</td>; strings
// become text nodes, so nothing the server says is parsed as HTML.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "value" || key === "checked") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function $(selector) {
  return document.querySelector(selector);
}

// ---------------------------------------------------------------------------------------
// Formatting: figures as an operator reads them.

export function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i += 1;
  }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

export function fmtRate(x) {
  return x === null || x === undefined ? "–" : `${Number(x).toFixed(1)}/s`;
}

export function fmtNumber(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en");
}

export function fmtDuration(seconds) {
  let s = Math.floor(seconds || 0);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const hms = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60]
    .map((v) => String(v).padStart(2, "0"))
    .join(":");
  return d ? `${d}d ${hms}` : hms;
}

export function fmtTime(epoch) {
  if (!epoch) return "–";
  const d = new Date(epoch * 1000);
  const pad = (v, n = 2) => String(v).padStart(n, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

// Any attribute value as one line of text (maps and lists as JSON).
export function fmtValue(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

// ---------------------------------------------------------------------------------------
// Tables, figures and the one confirmation dialog.

// Resolves to {ok, force} once the operator answers the one confirmation dialog.
export function confirmAction(message, forceText) {
  const dialog = $("#confirm-dialog");
  $("#confirm-message").textContent = message;
  $("#confirm-force").checked = false;
  $("#confirm-force-label").hidden = !forceText;
  $("#confirm-force-text").textContent = forceText || "";
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => resolve({ ok: dialog.returnValue === "ok", force: $("#confirm-force").checked }),
      { once: true },
    );
    dialog.returnValue = "";
    dialog.showModal();
  });
}

// A table from rows of cells; `columns` are [key, heading, className?].
export function table(id, columns, rows, onSort, sort) {
  const headings = columns.map(([key, heading, cls]) => {
    const marker = sort && sort.key === key ? (sort.descending ? " ▼" : " ▲") : "";
    return h(
      "th",
      {
        class: cls,
        "data-sort": key,
        onclick: onSort ? () => onSort(key) : null,
        "aria-sort": marker ? (sort.descending ? "descending" : "ascending") : null,
      },
      heading + marker,
    );
  });
  return h(
    "table",
    { id, class: onSort ? "sortable" : null },
    h("thead", {}, h("tr", {}, headings)),
    h("tbody", {}, rows),
  );
}

// A definition list of figures: [[label, value, id], ...].
export function figures(items) {
  return h(
    "dl",
    { class: "figures" },
    items.map(([label, value, id]) =>
      h("div", { class: "figure" }, h("dt", {}, label), h("dd", { id }, value)),
    ),
  );
}

// ---------------------------------------------------------------------------------------
// Form fields typed by a queue option's type (GET options), read back as the API takes them.

// The option types whose values are figures.
const NUMERIC = new Set(["int", "float", "number"]);

export function typeOf(value) {
  if (value === null || value === undefined) return "auto"; // unset: read what is typed
  if (typeof value === "boolean") return "bool";
  if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
  if (value && typeof value === "object") return "map";
  return "str";
}

// A form field for an option ({name, type, choices} from GET options, or a type guessed
// from the current value). Figures are text boxes, not number inputs: whatever the
// operator types goes to the server, so a wrong value gets the server's own reason, the
// one an attach would get.
export function valueField(id, { name, type, choices }, value) {
  const listed = type === "bool" ? ["true", "false"] : [...(choices || [])];
  if (listed.length) {
    const selected = value === null || value === undefined ? "" : String(value);
    // A current value the list lacks stays selectable, so saving leaves it as it is.
    if (selected && !listed.includes(selected)) listed.push(selected);
    return h(
      "select",
      { id, name, "data-type": type },
      ["", ...listed].map((v) =>
        h("option", { value: v, selected: v === selected }, v || "(not set)"),
      ),
    );
  }
  if (type === "map" || type === "list") {
    return h("textarea", {
      id,
      name,
      rows: 2,
      "data-type": type,
      placeholder: "JSON",
      value: value === null || value === undefined ? "" : JSON.stringify(value),
    });
  }
  return h("input", {
    id,
    name,
    "data-type": type,
    inputmode: NUMERIC.has(type) ? "decimal" : null,
    value: value === null || value === undefined ? "" : String(value),
  });
}

// The field's value as the API takes it: null when empty; a figure when it reads as one;
// otherwise the text as typed (the server then says what is wrong with it).
export function readField(field, type = field.dataset.type) {
  const text = field.value.trim();
  if (text === "") return null;
  if (type === "bool") return text === "true";
  if (type === "auto") {
    if (text === "true" || text === "false") return text === "true";
    if (/^[[{]/.test(text)) type = "map";
    else type = "float";
  }
  if (type === "map" || type === "list") {
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(`${field.name}: not JSON`);
    }
  }
  if (NUMERIC.has(type) && /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(text)) {
    return Number(text);
  }
  return text;
}
