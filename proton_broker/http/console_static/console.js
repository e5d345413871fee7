// The proton-broker web console: a single page drawn from the JSON API under /console/api/
// (docs/console.md), routed on the URL's hash so every view has a link and the server
// serves one file. Plain JavaScript, no framework and no build step: the page must work
// from a fresh clone. uPlot (vendor/, a global) draws the plots.
//
// Two rules hold everywhere below:
// - Server text reaches the page only as text (textContent, text nodes, attribute values);
//   never as HTML, so a queue named "<img onerror=...>" is just a name.
// - The CSRF token lives in memory only (state.csrf) and goes with every POST, PUT and
//   DELETE; the session cookie itself is HttpOnly, out of this script's reach.

import {
  $,
  append,
  confirmAction,
  figures,
  fmtBytes,
  fmtDuration,
  fmtNumber,
  fmtRate,
  fmtTime,
  fmtValue,
  h,
  readField,
  table,
  typeOf,
  valueField,
} from "./dom.js";

const POLL_MS = 2000; // how often a view refreshes its figures and plots
const API = "api/"; // relative to /console/, where index.html is served

// Everything the page knows, on window so the browser tests can read the plotted data
// (consoleState.plots.depth.data) the way a user reads the plot.
const state = {
  user: null,
  csrf: null,
  anonymous: false, // whether the server lets this client in without a password
  wanted: "#/overview", // where to go after logging in
  generation: 0, // bumped on each navigation, so late answers for an old view are dropped
  timers: new Set(), // the pending polls of the view on screen
  plots: {},
};
window.consoleState = state;

// ---------------------------------------------------------------------------------------
// The API: JSON both ways; an error answer becomes an ApiError carrying the server's text.

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = {};
  if (method !== "GET") {
    // The server refuses a state change without both (CSRF); login needs neither token.
    headers["Content-Type"] = "application/json";
    if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
  }
  const response = await fetch(API + path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { error: text };
  }
  if (!response.ok) {
    const error = new ApiError(response.status, (data && data.error) || response.statusText);
    error.data = data;
    // An expired session on any view but the login itself: back to the login form.
    if (response.status === 401 && !path.startsWith("session") && !path.startsWith("login")) {
      loggedOut("Your session has ended; please log in again.");
    }
    throw error;
  }
  return data;
}

// ---------------------------------------------------------------------------------------
// Views, timers and plots. A view registers its pollers and plots; navigating away stops
// and destroys them, so a hidden view never keeps asking the server.

function resetView() {
  state.generation += 1;
  for (const timer of state.timers) clearTimeout(timer);
  state.timers.clear();
  for (const plot of Object.values(state.plots)) plot.destroy();
  state.plots = {};
  const view = $("#view");
  view.replaceChildren();
  return view;
}

// Run fn now and every POLL_MS after it finishes (not on a fixed clock, so a slow answer
// never piles requests up), until the view changes.
function poll(fn) {
  const generation = state.generation;
  const tick = async () => {
    if (generation !== state.generation) return;
    try {
      await fn();
    } catch (error) {
      if (generation === state.generation && error.status !== 401) showStatus(error.message);
    }
    if (generation !== state.generation) return;
    const timer = setTimeout(() => {
      state.timers.delete(timer);
      tick();
    }, POLL_MS);
    state.timers.add(timer);
  };
  tick();
  return generation;
}

// Whether an answer that has just arrived is still for the view on screen.
function current(generation) {
  return generation === state.generation;
}

function showStatus(message) {
  const status = $("#status");
  if (status) status.textContent = message || "";
}

const COLOURS = ["#2a6fdb", "#d9534f", "#3c9a5f", "#a05cc4"];

// A time plot in `container`, kept as state.plots[key]; `labels` name the series after t.
function makePlot(key, container, title, labels) {
  const width = Math.max(container.clientWidth - 8, 320);
  const options = {
    title,
    width,
    height: 220,
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max || 0, 1)] } },
    series: [
      {},
      ...labels.map((label, i) => ({ label, stroke: COLOURS[i], width: 2, spanGaps: false })),
    ],
  };
  const data = [[], ...labels.map(() => [])];
  const plot = new uPlot(options, data, container);
  state.plots[key] = plot;
  return plot;
}

function setPlot(key, data) {
  const plot = state.plots[key];
  if (plot) plot.setData(data);
}

window.addEventListener("resize", () => {
  for (const plot of Object.values(state.plots)) {
    const width = Math.max(plot.root.parentElement.clientWidth - 8, 320);
    plot.setSize({ width, height: 220 });
  }
});

function queueLink(name) {
  return h("a", { href: `#/queues/${encodeURIComponent(name)}`, "data-test": "queue-link" }, name);
}

// ---------------------------------------------------------------------------------------
// Login.

async function boot() {
  state.wanted = location.hash && location.hash !== "#/login" ? location.hash : "#/overview";
  let session;
  try {
    session = await api("GET", "session");
  } catch (error) {
    if (error.status !== 401) throw error;
    state.anonymous = Boolean(error.data && error.data.anonymous);
    renderLogin("");
    return;
  }
  loggedIn(session);
}

function loggedIn(session) {
  state.user = session.user;
  state.csrf = session.csrf;
  $("#whoami").textContent = session.user;
  $("#nav").hidden = false;
  $("#account").hidden = false;
  const target = state.wanted;
  state.wanted = "#/overview";
  if (location.hash === target || (!location.hash && target === "#/overview")) route();
  else location.hash = target;
}

function loggedOut(message) {
  state.wanted = location.hash && location.hash !== "#/login" ? location.hash : "#/overview";
  state.user = null;
  state.csrf = null;
  $("#nav").hidden = true;
  $("#account").hidden = true;
  // Ask again whether anonymous is allowed: the policy may depend on where we are.
  api("GET", "session")
    .then(loggedIn)
    .catch((error) => {
      state.anonymous = Boolean(error.data && error.data.anonymous);
      renderLogin(message);
    });
}

function renderLogin(message) {
  const view = resetView();
  const error = h("p", { id: "login-error", class: "error", role: "alert" }, message);
  const user = h("input", { id: "login-user", name: "user", autocomplete: "username" });
  const password = h("input", {
    id: "login-password",
    name: "password",
    type: "password",
    autocomplete: "current-password",
  });
  const submit = async (body) => {
    error.textContent = "";
    try {
      loggedIn(await api("POST", "login", body));
    } catch (e) {
      error.textContent = e.message;
    }
  };
  const form = h(
    "form",
    {
      id: "login-form",
      class: "card narrow",
      onsubmit: (event) => {
        event.preventDefault();
        submit({ user: user.value, password: password.value });
      },
    },
    h("h1", {}, "Log in"),
    h("label", {}, "User", user),
    h("label", {}, "Password", password),
    h("button", { type: "submit", id: "login-button" }, "log in"),
    state.anonymous &&
      h(
        "button",
        { type: "button", id: "login-anonymous", onclick: () => submit({}) },
        "continue as anonymous",
      ),
    error,
  );
  view.append(form);
  user.focus();
}

$("#logout-button").addEventListener("click", async () => {
  try {
    await api("POST", "logout", {});
  } finally {
    loggedOut(""); // logging in again comes back to this page
  }
});

// ---------------------------------------------------------------------------------------
// Overview: the broker's figures and two live plots (rates, messages queued).

function renderOverview() {
  const view = resetView();
  const figs = h("div", { id: "overview-figures" });
  const rates = h("div", { class: "plot", id: "plot-rates" });
  const messages = h("div", { class: "plot", id: "plot-messages" });
  view.append(
    h("h1", {}, "Overview"),
    figs,
    h("section", { class: "plots" }, rates, messages),
    h("p", { id: "status", class: "error" }),
  );
  makePlot("rates", rates, "messages per second", ["in", "out"]);
  makePlot("messages", messages, "messages queued", ["queued"]);
  const generation = poll(async () => {
    const o = await api("GET", "overview");
    if (!current(generation)) return;
    const store = o.store || {};
    const memory = o.memory || {};
    figs.replaceChildren(
      figures([
        ["version", o.version, "ov-version"],
        ["uptime", fmtDuration(o.uptime), "ov-uptime"],
        ["connections", fmtNumber(o.connections), "ov-connections"],
        ["queues", fmtNumber(o.queues), "ov-queues"],
        ["exchanges", fmtNumber(o.exchanges), "ov-exchanges"],
        ["messages queued", fmtNumber(o.messages), "ov-messages"],
        ["bytes queued", fmtBytes(o.bytes), "ov-bytes"],
        ["rate in", fmtRate(o.rate_in), "ov-rate-in"],
        ["rate out", fmtRate(o.rate_out), "ov-rate-out"],
        ["store", store.kind + (store.path ? ` (${store.path})` : ""), "ov-store"],
        ["store size", fmtBytes(store.size), "ov-store-size"],
        ["disk free", fmtBytes(store.disk_free), "ov-disk-free"],
        ["memory (RSS)", fmtBytes(memory.rss), "ov-memory"],
        ["memory limit", memory.max_memory ? fmtBytes(memory.max_memory) : "none", "ov-max-memory"],
      ]),
    );
    const s = o.series || { t: [], in: [], out: [], depth: [] };
    setPlot("rates", [s.t, s.in, s.out]);
    setPlot("messages", [s.t, s.depth]);
    showStatus("");
  });
}

// ---------------------------------------------------------------------------------------
// Queues: a filterable, sortable table; the filter goes to the server (it may hold many
// more queues than the page shows), the sort stays here.

const QUEUE_COLUMNS = [
  ["name", "name"],
  ["type", "type"],
  ["durable", "durable"],
  ["depth", "depth", "num"],
  ["bytes", "bytes", "num"],
  ["consumers", "consumers", "num"],
  ["rate_in", "rate in", "num"],
  ["rate_out", "rate out", "num"],
  ["overflow", "overflow"],
  ["alternate", "alternate"],
];

const queuesView = { filter: "", sort: { key: "name", descending: false } };

function compare(a, b) {
  // null (no rate yet) sorts below every figure, whichever way.
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  if (typeof a === "string") return a.localeCompare(b);
  return a < b ? -1 : 1;
}

function renderQueues() {
  const view = resetView();
  let answer = { total: 0, queues: [] };
  const count = h("span", { id: "queues-count" });
  const holder = h("div", { id: "queues-holder" });
  const draw = () => {
    const { key, descending } = queuesView.sort;
    const rows = [...answer.queues].sort((a, b) => compare(a[key], b[key]) * (descending ? -1 : 1));
    const onSort = (column) => {
      const sort = queuesView.sort;
      queuesView.sort = { key: column, descending: sort.key === column ? !sort.descending : false };
      draw();
    };
    holder.replaceChildren(
      table("queues-table", QUEUE_COLUMNS, rows.map(queueRow), onSort, queuesView.sort),
    );
    count.textContent = `${rows.length} of ${answer.total} queues`;
  };
  let generation;
  const load = async () => {
    const query = new URLSearchParams({ filter: queuesView.filter });
    const got = await api("GET", `queues?${query}`);
    if (!current(generation)) return;
    answer = got;
    draw();
    showStatus("");
  };
  let debounce = null;
  const filter = h("input", {
    id: "queue-filter",
    type: "search",
    placeholder: "filter by name",
    value: queuesView.filter,
    oninput: (event) => {
      queuesView.filter = event.target.value;
      clearTimeout(debounce);
      debounce = setTimeout(() => load().catch((e) => showStatus(e.message)), 200);
    },
  });
  view.append(
    h("h1", {}, "Queues"),
    h(
      "div",
      { class: "toolbar" },
      filter,
      count,
      h("a", { href: "#/create", class: "button", id: "create-link" }, "create queue"),
    ),
    holder,
    h("p", { id: "status", class: "error" }),
  );
  generation = poll(load);
}

function queueRow(q) {
  const yes = (b) => (b ? "yes" : "no");
  const type = q.type + (q.groups ? " + groups" : "");
  return h(
    "tr",
    { "data-queue": q.name },
    h("td", {}, queueLink(q.name)),
    h("td", {}, type),
    h("td", {}, yes(q.durable)),
    h("td", { class: "num", "data-test": "depth" }, fmtNumber(q.depth)),
    h("td", { class: "num" }, fmtBytes(q.bytes)),
    h("td", { class: "num" }, fmtNumber(q.consumers)),
    h("td", { class: "num" }, fmtRate(q.rate_in)),
    h("td", { class: "num" }, fmtRate(q.rate_out)),
    h("td", {}, q.overflow),
    h("td", {}, q.alternate || "–"),
  );
}

// ---------------------------------------------------------------------------------------
// One queue: plots, attributes, and the actions (browse, send, purge, delete, edit).

// Attributes shown again in sections of their own, when the queue has them.
const GROUP_ATTRIBUTES = ["messageGroupType", "messageGroupKeyOverride", "messageGroupCount"];
const SEQUENCE_ATTRIBUTES = [
  "earliestSequenceNumber",
  "nextSequenceNumber",
  "lvqKey",
  "lvqKeyCount",
];

function renderQueue(name) {
  const view = resetView();
  const path = `queues/${encodeURIComponent(name)}`;
  const summary = h("div", { id: "queue-figures" });
  const extra = h("div", { id: "queue-extra" });
  const attributes = h("div", { id: "queue-attributes-holder" });
  const edit = h("div", { id: "queue-edit" });
  const depth = h("div", { class: "plot", id: "plot-depth" });
  const rates = h("div", { class: "plot", id: "plot-queue-rates" });
  const error = h("p", { id: "queue-error", class: "error", role: "alert" });
  view.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/queues" }, "Queues"), " / "),
    h("h1", { id: "queue-name" }, name),
    summary,
    h("section", { class: "plots" }, depth, rates),
    h("section", { class: "actions" }, queueActions(name, path, error)),
    error,
    h(
      "div",
      { class: "columns" },
      h("section", {}, h("h2", {}, "Attributes"), attributes),
      h("section", {}, extra, edit),
    ),
    h("p", { id: "status", class: "error" }),
  );
  makePlot("depth", depth, "depth (messages)", ["depth"]);
  makePlot("rates", rates, "messages per second", ["in", "out"]);
  let editBuilt = false;
  const generation = poll(async () => {
    let q;
    try {
      q = await api("GET", path);
    } catch (e) {
      if (e.status !== 404 || !current(generation)) throw e;
      view.replaceChildren(
        h("h1", {}, name),
        h("p", { id: "queue-missing", class: "error" }, e.message || "no such queue"),
        h("a", { href: "#/queues" }, "back to the queues"),
      );
      state.generation += 1; // stop polling a queue that is gone
      return;
    }
    if (!current(generation)) return;
    drawQueue(q, summary, attributes, extra);
    if (!editBuilt) {
      const options = await queueOptions();
      if (!current(generation)) return;
      editBuilt = true;
      edit.replaceChildren(
        editForm(path, q, options, () => {
          editBuilt = false;
        }),
      );
    }
    const s = q.series || { t: [], depth: [], in: [], out: [] };
    setPlot("depth", [s.t, s.depth]);
    setPlot("rates", [s.t, s.in, s.out]);
    showStatus("");
  });
}

function drawQueue(q, summary, attributes, extra) {
  const a = q.attributes || {};
  summary.replaceChildren(
    figures([
      ["type", a["qpid-type"], "q-type"],
      ["durable", a.durable ? "yes" : "no", "q-durable"],
      ["depth", fmtNumber(a.queueDepthMessages), "q-depth"],
      ["bytes", fmtBytes(a.queueDepthBytes), "q-bytes"],
      ["consumers", fmtNumber(a.consumerCount), "q-consumers"],
      ["enqueued", fmtNumber(a.totalEnqueuedMessages), "q-enqueued"],
      ["dequeued", fmtNumber(a.totalDequeuedMessages), "q-dequeued"],
    ]),
  );
  const present = (names) => names.filter((n) => a[n] !== undefined && a[n] !== null);
  const grouped = a.messageGroupType && a.messageGroupType !== "NONE";
  const sequence = present(SEQUENCE_ATTRIBUTES);
  extra.replaceChildren();
  append(extra, [
    Array.isArray(q.consumers) && [h("h2", {}, "Consumers"), consumerTable(q.consumers)],
    grouped && [
      h("h2", {}, "Message groups"),
      attributeTable("queue-groups", a, present(GROUP_ATTRIBUTES)),
      groupTable(a.messageGroups),
    ],
    sequence.length > 0 && [
      h("h2", {}, "Sequence history"),
      attributeTable("queue-sequence", a, sequence),
    ],
  ]);
  attributes.replaceChildren(attributeTable("queue-attributes", a, Object.keys(a).sort()));
}

// The links taking from (or browsing) the queue, with the connection each is on.
function consumerTable(consumers) {
  if (!consumers.length) return h("p", { id: "queue-no-consumers" }, "none");
  return table(
    "queue-consumers",
    [
      ["connection", "connection"],
      ["user", "user"],
      ["link", "link"],
      ["browse", "browses"],
      ["credit", "credit", "num"],
      ["unsettled", "unsettled", "num"],
      ["delivered", "delivered", "num"],
    ],
    consumers.map((c) =>
      h(
        "tr",
        { "data-link": c.link },
        h("td", {}, fmtValue(c.connection)),
        h("td", {}, fmtValue(c.user)),
        h("td", {}, fmtValue(c.link)),
        h("td", {}, c.browse ? "yes" : "no"),
        h("td", { class: "num" }, fmtNumber(c.credit)),
        h("td", { class: "num" }, fmtNumber(c.unsettled)),
        h("td", { class: "num" }, fmtNumber(c.delivered)),
      ),
    ),
  );
}

// messageGroups: one row per group with messages on the queue, and who holds it.
function groupTable(groups) {
  if (!Array.isArray(groups) || !groups.length) return null;
  return table(
    "queue-group-list",
    [
      ["groupId", "group"],
      ["messageCount", "messages", "num"],
      ["acquiredMessages", "acquired", "num"],
      ["consumer", "consumer"],
    ],
    groups.map((g) =>
      h(
        "tr",
        { "data-group": fmtValue(g.groupId) },
        h("td", {}, fmtValue(g.groupId)),
        h("td", { class: "num" }, fmtNumber(g.messageCount)),
        h("td", { class: "num" }, fmtNumber(g.acquiredMessages)),
        h("td", {}, fmtValue(g.consumer)),
      ),
    ),
  );
}

function attributeTable(id, attributes, names) {
  return h(
    "table",
    { id, class: "attributes" },
    h(
      "tbody",
      {},
      names.map((n) =>
        h("tr", { "data-attr": n }, h("th", {}, n), h("td", {}, fmtValue(attributes[n]))),
      ),
    ),
  );
}

function queueActions(name, path, error) {
  const browse = h("div", { id: "browse-results" });
  const count = h("input", { id: "browse-count", type: "number", min: 1, max: 100, value: 20 });
  const fail = (e) => {
    error.textContent = e.message;
  };
  return [
    h(
      "div",
      { class: "toolbar" },
      h("label", {}, "first ", count, " messages"),
      h(
        "button",
        {
          type: "button",
          id: "browse-button",
          onclick: () => {
            error.textContent = "";
            api("GET", `${path}/messages?count=${Number(count.value) || 20}`)
              .then((got) => browse.replaceChildren(...messageCards(got.messages)))
              .catch(fail);
          },
        },
        "browse",
      ),
      h(
        "button",
        {
          type: "button",
          id: "purge-button",
          class: "danger",
          onclick: async () => {
            const answer = await confirmAction(`Purge every available message of ${name}?`);
            if (!answer.ok) return;
            error.textContent = "";
            try {
              const got = await api("POST", `${path}/purge`, {});
              $("#action-result").textContent = `purged ${got.purged} messages`;
              browse.replaceChildren();
            } catch (e) {
              fail(e);
            }
          },
        },
        "purge",
      ),
      h(
        "button",
        {
          type: "button",
          id: "delete-button",
          class: "danger",
          onclick: async () => {
            const answer = await confirmAction(
              `Delete the queue ${name}?`,
              "force: delete it even if it holds messages",
            );
            if (!answer.ok) return;
            error.textContent = "";
            try {
              await api("DELETE", path + (answer.force ? "?force=true" : ""));
              location.hash = "#/queues";
            } catch (e) {
              fail(e);
            }
          },
        },
        "delete",
      ),
      h("span", { id: "action-result", role: "status" }),
    ),
    sendForm(path, error),
    browse,
  ];
}

// The send form: application properties as key=value lines (values are sent as strings).
function sendForm(path, error) {
  const body = h("textarea", { id: "send-body", rows: 3, placeholder: "message body" });
  const type = h("input", { id: "send-content-type", value: "text/plain" });
  const props = h("textarea", { id: "send-properties", rows: 2, placeholder: "key=value" });
  const durable = h("input", { id: "send-durable", type: "checkbox" });
  const result = h("span", { id: "send-result", role: "status" });
  return h(
    "details",
    { id: "send-section" },
    h("summary", {}, "send a test message"),
    h(
      "form",
      {
        id: "send-form",
        onsubmit: async (event) => {
          event.preventDefault();
          error.textContent = "";
          result.textContent = "";
          const properties = {};
          for (const line of props.value.split("\n")) {
            if (!line.trim()) continue;
            const at = line.indexOf("=");
            if (at < 1) {
              error.textContent = `not key=value: ${line}`;
              return;
            }
            properties[line.slice(0, at).trim()] = line.slice(at + 1).trim();
          }
          try {
            const got = await api("POST", `${path}/messages`, {
              body: body.value,
              content_type: type.value || null,
              properties,
              durable: durable.checked,
            });
            result.textContent = `sent, sequence ${got.sequence}`;
          } catch (e) {
            error.textContent = e.message;
          }
        },
      },
      h("label", {}, "body", body),
      h("label", {}, "content type", type),
      h("label", {}, "application properties (key=value lines)", props),
      h("label", { class: "inline" }, durable, " durable"),
      h("button", { type: "submit", id: "send-button" }, "send"),
      result,
    ),
  );
}

function messageCards(messages) {
  if (!messages.length) return [h("p", { id: "browse-empty" }, "The queue holds no messages.")];
  return messages.map((m) =>
    h(
      "article",
      { class: "message-card", "data-sequence": m.sequence },
      h(
        "h3",
        {},
        `#${m.sequence}`,
        h(
          "span",
          { class: "muted" },
          ` ${m.content_type || "no content type"}, ${m.body_encoding || "body"}, ${fmtBytes(m.body_size)}`,
        ),
      ),
      // Withheld where $management would not show it (plain HTTP from elsewhere): say why.
      m.withheld
        ? h("p", { class: "muted", "data-test": "message-withheld" }, m.withheld)
        : h("pre", { class: "body", "data-test": "message-body" }, m.body),
      section("header", m.header),
      section("properties", m.properties),
      section("application properties", m.application_properties, "application-properties"),
      section("annotations", m.annotations),
    ),
  );
}

function section(title, map, test) {
  const entries = Object.entries(map || {}).filter(([, v]) => v !== null && v !== undefined);
  if (!entries.length) return null;
  return h(
    "div",
    { class: "section", "data-test": test || title },
    h("h4", {}, title),
    h(
      "dl",
      {},
      entries.map(([k, v]) => [h("dt", {}, k), h("dd", {}, fmtValue(v))]),
    ),
  );
}

// The settings form, one field per attribute the server says may change on a live queue;
// only the fields the operator changed are sent, and the server's refusal is shown as is.
function editForm(path, q, options, rebuilt) {
  const editable = q.editable || [];
  const a = q.attributes || {};
  const error = h("p", { id: "edit-error", class: "error", role: "alert" });
  const result = h("span", { id: "edit-result", role: "status" });
  // An attribute the create form also offers takes that option's type and choices.
  const option = (name) => options.get(name) || { name, type: typeOf(a[name]) };
  const fields = editable.map((name) => [name, valueField(`edit-${name}`, option(name), a[name])]);
  return h(
    "form",
    {
      id: "edit-form",
      onsubmit: async (event) => {
        event.preventDefault();
        error.textContent = "";
        result.textContent = "";
        const changed = {};
        try {
          for (const [name, field] of fields) {
            const value = readField(field);
            if (JSON.stringify(value) !== JSON.stringify(a[name] ?? null)) changed[name] = value;
          }
          if (!Object.keys(changed).length) {
            result.textContent = "nothing changed";
            return;
          }
          await api("PUT", path, { options: changed });
          // The form is drawn again from the queue's new attributes on the next refresh.
          $("#action-result").textContent = `saved ${Object.keys(changed).join(", ")}`;
          rebuilt();
        } catch (e) {
          error.textContent = e.message;
        }
      },
    },
    h("h2", {}, "Settings"),
    editable.length ? null : h("p", {}, "Nothing can change on a live queue."),
    fields.map(([name, field]) => h("label", {}, name, field)),
    editable.length ? h("button", { type: "submit", id: "edit-button" }, "save") : null,
    result,
    error,
  );
}

// ---------------------------------------------------------------------------------------
// Create a queue: the name and one field per option the server offers.

// The options a queue takes, by name (asked once: they change only with the broker).
let knownOptions = null;
async function queueOptions() {
  if (!knownOptions) {
    const got = await api("GET", "options");
    knownOptions = new Map(got.options.map((o) => [o.name, o]));
  }
  return knownOptions;
}

async function renderCreate() {
  const view = resetView();
  const generation = state.generation;
  const error = h("p", { id: "form-error", class: "error", role: "alert" });
  view.append(h("h1", {}, "Create a queue"), error);
  let options;
  try {
    options = [...(await queueOptions()).values()];
  } catch (e) {
    if (current(generation)) error.textContent = e.message;
    return;
  }
  if (!current(generation)) return;
  const name = h("input", { id: "create-name", name: "name", required: true });
  const fields = options.map((o) => [o.name, valueField(`opt-${o.name}`, o, null)]);
  const form = h(
    "form",
    {
      id: "create-form",
      class: "card",
      onsubmit: async (event) => {
        event.preventDefault();
        error.textContent = "";
        const chosen = {};
        try {
          for (const [option, field] of fields) {
            const value = readField(field);
            if (value !== null) chosen[option] = value;
          }
          await api("POST", "queues", { name: name.value, options: chosen });
          location.hash = `#/queues/${encodeURIComponent(name.value)}`;
        } catch (e) {
          error.textContent = e.message;
        }
      },
    },
    h("label", {}, "name", name),
    h(
      "div",
      { class: "options" },
      options.map((o, i) =>
        h(
          "label",
          {
            title: (o.aliases || []).length ? `also: ${o.aliases.join(", ")}` : null,
          },
          h("span", {}, o.name, h("span", { class: "muted" }, ` (${o.type})`)),
          fields[i][1],
          h("small", {}, o.help),
        ),
      ),
    ),
    h("button", { type: "submit", id: "create-button" }, "create"),
  );
  view.insertBefore(form, error);
}

// ---------------------------------------------------------------------------------------
// Exchanges and bindings, connections, logs: tables refreshed every POLL_MS.

function renderExchanges() {
  const view = resetView();
  const exchanges = h("div", { id: "exchanges-holder" });
  const bindings = h("div", { id: "bindings-holder" });
  const subscriptions = h("div", { id: "subscriptions-holder" });
  view.append(
    h("h1", {}, "Exchanges"),
    exchanges,
    h("h2", {}, "Bindings"),
    bindings,
    h("h2", {}, "Subscriptions"),
    subscriptions,
    h("p", { id: "status", class: "error" }),
  );
  const generation = poll(async () => {
    const [e, b, u] = await Promise.all([
      api("GET", "exchanges"),
      api("GET", "bindings"),
      api("GET", "subscriptions"),
    ]);
    if (!current(generation)) return;
    exchanges.replaceChildren(
      table(
        "exchanges-table",
        [
          ["name", "name"],
          ["type", "type"],
          ["durable", "durable"],
          ["bindings", "bindings", "num"],
          ["routed", "routed", "num"],
          ["dropped", "dropped", "num"],
        ],
        e.exchanges.map((x) =>
          h(
            "tr",
            { "data-exchange": x.name },
            h("td", {}, x.name || "(default)"),
            h("td", {}, x.type),
            h("td", {}, x.durable ? "yes" : "no"),
            h("td", { class: "num" }, fmtNumber(x.bindings)),
            h("td", { class: "num" }, fmtNumber(x.routed)),
            h("td", { class: "num" }, fmtNumber(x.dropped)),
          ),
        ),
      ),
    );
    bindings.replaceChildren(
      table(
        "bindings-table",
        [
          ["exchange", "exchange"],
          ["queue", "queue"],
          ["key", "binding key"],
          ["arguments", "arguments"],
        ],
        b.bindings.map((x) =>
          h(
            "tr",
            {},
            h("td", {}, x.exchange),
            h("td", {}, queueLink(x.queue)),
            h("td", {}, x.key),
            h("td", {}, fmtValue(x.arguments)),
          ),
        ),
      ),
    );
    subscriptions.replaceChildren(
      table(
        "subscriptions-table",
        [
          ["name", "subscription queue"],
          ["exchange", "exchange"],
          ["keys", "binding keys"],
          ["links", "receivers", "num"],
          ["durable", "durable"],
          ["depth", "depth", "num"],
        ],
        u.subscriptions.map((x) =>
          h(
            "tr",
            { "data-subscription": x.name },
            h("td", {}, queueLink(x.name)),
            h("td", {}, fmtValue(x.exchange)),
            h("td", {}, x.keys.join(", ")),
            h("td", { class: "num" }, fmtNumber(x.links)),
            h("td", {}, x.durable ? "yes" : "no"),
            h("td", { class: "num" }, fmtNumber(x.depth)),
          ),
        ),
      ),
    );
    showStatus("");
  });
}

function renderConnections() {
  const view = resetView();
  const holder = h("div", { id: "connections-holder" });
  const error = h("p", { id: "connection-error", class: "error", role: "alert" });
  view.append(h("h1", {}, "Connections"), error, holder, h("p", { id: "status", class: "error" }));
  let load;
  const close = async (c) => {
    const answer = await confirmAction(`Close the connection from ${c.address} (${c.container})?`);
    if (!answer.ok) return;
    try {
      await api("DELETE", `connections/${encodeURIComponent(c.id)}`);
      error.textContent = "";
      await load();
    } catch (e) {
      error.textContent = e.message;
    }
  };
  let generation;
  load = async () => {
    const got = await api("GET", "connections");
    if (!current(generation)) return;
    holder.replaceChildren(
      table(
        "connections-table",
        [
          ["address", "address"],
          ["user", "user"],
          ["container", "container"],
          ["links", "links", "num"],
          ["opened", "opened"],
          ["messages_in", "messages in", "num"],
          ["messages_out", "messages out", "num"],
          ["bytes_in", "bytes in", "num"],
          ["bytes_out", "bytes out", "num"],
          ["rate_in", "in", "num"],
          ["rate_out", "out", "num"],
          ["close", ""],
        ],
        got.connections.map((c) =>
          h(
            "tr",
            { "data-connection": c.id, "data-container": c.container },
            h("td", {}, c.address),
            h("td", {}, c.user || "–"),
            h("td", {}, c.container),
            h("td", { class: "num" }, fmtNumber(c.links)),
            h("td", {}, fmtTime(c.opened)),
            h("td", { class: "num" }, fmtNumber(c.messages_in)),
            h("td", { class: "num" }, fmtNumber(c.messages_out)),
            h("td", { class: "num", "data-test": "bytes-in" }, fmtBytes(c.bytes_in)),
            h("td", { class: "num", "data-test": "bytes-out" }, fmtBytes(c.bytes_out)),
            h("td", { class: "num", "data-test": "rate-in" }, fmtRate(c.rate_in)),
            h("td", { class: "num", "data-test": "rate-out" }, fmtRate(c.rate_out)),
            h(
              "td",
              {},
              h(
                "button",
                {
                  type: "button",
                  class: "danger close-connection",
                  "data-test": `close-${c.id}`,
                  onclick: () => close(c),
                },
                "close",
              ),
            ),
          ),
        ),
      ),
    );
    showStatus("");
  };
  generation = poll(load);
}

function renderLogs() {
  const view = resetView();
  const holder = h("div", { id: "logs-holder" });
  let code = "";
  let generation;
  const load = async () => {
    const got = await api("GET", `logs?${new URLSearchParams({ code })}`);
    if (!current(generation)) return;
    // Newest first: the operator looks for what just happened.
    const records = [...got.records].reverse();
    holder.replaceChildren(
      table(
        "logs-table",
        [
          ["time", "time"],
          ["level", "level"],
          ["code", "code"],
          ["logger", "logger"],
          ["message", "message"],
        ],
        records.map((r) =>
          h(
            "tr",
            { class: `level-${String(r.level).toLowerCase()}` },
            h("td", { class: "nowrap" }, fmtTime(r.time)),
            h("td", {}, r.level),
            h("td", { class: "nowrap" }, r.code || ""),
            h("td", {}, r.logger),
            h("td", { class: "message" }, r.message),
          ),
        ),
      ),
    );
    showStatus("");
  };
  let debounce = null;
  const filter = h("input", {
    id: "log-filter",
    type: "search",
    placeholder: "code prefix, e.g. MST-",
    oninput: (event) => {
      code = event.target.value.trim();
      clearTimeout(debounce);
      debounce = setTimeout(() => load().catch((e) => showStatus(e.message)), 200);
    },
  });
  view.append(
    h("h1", {}, "Logs"),
    h("div", { class: "toolbar" }, filter),
    holder,
    h("p", { id: "status", class: "error" }),
  );
  generation = poll(load);
}

// ---------------------------------------------------------------------------------------
// The router: the hash names the view; #/queues/NAME has the name URI-encoded (queue
// names may hold "/" and "#").

function route() {
  const hash = location.hash || "#/overview";
  if (!state.user) {
    if (hash !== "#/login") state.wanted = hash;
    renderLogin("");
    return;
  }
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", hash.startsWith(link.getAttribute("href")));
  }
  if (hash.startsWith("#/queues/")) {
    renderQueue(decodeURIComponent(hash.slice("#/queues/".length)));
    return;
  }
  const views = {
    "#/overview": renderOverview,
    "#/queues": renderQueues,
    "#/create": renderCreate,
    "#/exchanges": renderExchanges,
    "#/connections": renderConnections,
    "#/logs": renderLogs,
  };
  (views[hash] || renderOverview)();
}

window.addEventListener("hashchange", () => {
  if (state.user || location.hash === "#/login") route();
  else state.wanted = location.hash;
});

boot().catch((error) => {
  resetView().append(
    h("p", { class: "error", id: "boot-error" }, `The console could not start: ${error.message}`),
  );
});
