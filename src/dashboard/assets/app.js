// punctual dashboard (API-6, DEL-12): a small page that talks to the /v1 JSON API of the
// origin that served it, with the session cookie of /ui/login (or no key at all on a
// server without one). Plain DOM, no framework, no build step, nothing loaded from
// elsewhere. Routes live in the URL fragment: #/overview, #/schedules, #/schedules/<id>,
// #/deliveries, #/deliveries/<id>, #/dead, #/recipients, #/import, #/limits.

const VIEWER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
// The states the API accepts, for the state filters: the server writes them into the page
// (<meta name="punctual-states">) from its own lists, so the page keeps no copy.
const STATES = JSON.parse(
  document.querySelector('meta[name="punctual-states"]')?.getAttribute("content") || "{}",
);
const DELIVERY_STATES = STATES.delivery ?? [];
const SCHEDULE_STATES = STATES.schedule ?? [];
const PAGES = [
  ["overview", "Overview"],
  ["schedules", "Schedules"],
  ["deliveries", "Deliveries"],
  ["dead", "Dead letters & in doubt"],
  ["recipients", "Recipients"],
  ["import", "Calendar import"],
  ["limits", "Rate limits & circuits"],
];

/** @type {{ authenticated: boolean, keyed: boolean, csrf: string | null, tenant: string | null, root: boolean } | null} */
let session = null;
/** Timer of the page being shown (the overview refreshes itself); cleared on navigation. */
let pageTimer = null;
let idCounter = 0;
/** A message to show once the page navigated to has been drawn. */
let nextFlash = null;

// --- DOM helpers ---------------------------------------------------------------------

/** Creates an element: `h("a", { href: "#/x", onclick: fn }, "text", child)`. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "value") {
      el.value = value;
    } else if (name === "checked") {
      el.checked = Boolean(value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** A labelled form control; returns the wrapping label (the control is its first input). */
function field(labelText, control, cls) {
  const id = control.id || `f${++idCounter}`;
  control.id = id;
  const label = h("label", { for: id, class: cls }, labelText);
  if (cls === "inline") label.prepend(control);
  else label.append(control);
  return label;
}

function select(name, options, value) {
  return h(
    "select",
    { name },
    options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)),
  );
}

/**
 * The filter form of the list at `page` (`#/schedules`): submitting it opens the list with
 * the fields that are filled in as its query.
 */
function filterForm(page, attrs, ...controls) {
  return h(
    "form",
    {
      class: "filters",
      ...attrs,
      onsubmit: (event) => {
        event.preventDefault();
        const next = new URLSearchParams();
        for (const [k, v] of new FormData(event.target)) if (v) next.set(k, String(v));
        location.hash = `${page}?${next}`;
      },
    },
    ...controls,
  );
}

/**
 * A table of `items`, one row each (`cells(item)`: its cells), or `empty` as a muted line
 * when there are none.
 */
function itemTable(items, empty, headers, cells) {
  return items.length === 0
    ? h("p", { class: "muted" }, empty)
    : table(
        headers,
        items.map((item) => h("tr", {}, cells(item))),
      );
}

function table(headers, rows, caption) {
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      {},
      caption ? h("caption", { class: "muted" }, caption) : null,
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          headers.map((x) => h("th", { scope: "col" }, x)),
        ),
      ),
      h("tbody", {}, rows),
    ),
  );
}

function stateBadge(state) {
  return h("span", { class: `state state-${state}` }, state);
}

function flash(message, isError = false) {
  const el = document.getElementById("flash");
  el.className = isError ? "error" : "";
  el.textContent = message;
}

/** Replaces the children of `el`, leaving out null/false (conditional parts). */
function fill(el, ...nodes) {
  el.replaceChildren(
    ...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false),
  );
}

function show(...nodes) {
  fill(document.getElementById("main"), ...nodes);
}

// --- time ----------------------------------------------------------------------------

function formatIn(iso, zone) {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  try {
    return new Intl.DateTimeFormat("en-GB", {
      timeZone: zone,
      year: "numeric",
      month: "short",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      timeZoneName: "short",
    }).format(date);
  } catch {
    return iso;
  }
}

/** A time in the viewer's zone, with the UTC instant as its machine-readable value. */
function when(iso, zone = VIEWER_ZONE) {
  if (!iso) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: iso, title: iso }, formatIn(iso, zone));
}

function age(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

// --- API -----------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code ?? null;
    this.issues = body?.error?.issues ?? [];
  }
}

/**
 * Calls the API of this origin. A write carries the session's CSRF token. `body` is sent
 * as JSON unless `contentType` names another type (then it is sent as it is).
 */
async function api(method, path, body, contentType) {
  const headers = {};
  if (body !== undefined) headers["content-type"] = contentType ?? "application/json";
  if (method !== "GET" && session?.csrf) headers["x-csrf-token"] = session.csrf;
  const res = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : contentType ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (res.status === 401 && path.startsWith("/v1/")) {
    session = { ...(session ?? {}), authenticated: false };
    renderLogin("Your session ended: log in again.");
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

function explain(err) {
  if (!(err instanceof ApiError)) return String(err?.message ?? err);
  const issues = err.issues.map((i) => `${i.field}: ${i.message}`).join("; ");
  return `${err.code ?? err.status}: ${err.message}${issues && !err.message.includes(issues) ? ` (${issues})` : ""}`;
}

/** Runs an action from a button: disables it meanwhile, reports the outcome. */
async function act(button, label, run) {
  if (button) button.disabled = true;
  try {
    await run();
    if (label) flash(label);
  } catch (err) {
    flash(explain(err), true);
  } finally {
    if (button) button.disabled = false;
  }
}

// --- session -------------------------------------------------------------------------

function renderWho() {
  const who = document.getElementById("who");
  if (!session?.authenticated) {
    who.replaceChildren();
    return;
  }
  const label = session.root ? `operator · tenant ${session.tenant}` : `tenant ${session.tenant}`;
  const out =
    session.csrf !== null
      ? h(
          "button",
          {
            class: "secondary",
            type: "button",
            onclick: async () => {
              await api("POST", "/ui/logout").catch(() => null);
              await boot();
            },
          },
          "Log out",
        )
      : null;
  const parts = [
    h("span", {}, label),
    out,
    !session.keyed && session.csrf === null
      ? h(
          "button",
          { class: "secondary", type: "button", onclick: () => renderLogin() },
          "Use a tenant key",
        )
      : null,
  ];
  who.replaceChildren(...parts.filter(Boolean));
}

function renderNav(current) {
  const nav = document.getElementById("nav");
  nav.replaceChildren(
    ...PAGES.map(([id, text]) =>
      h("a", { href: `#/${id}`, "aria-current": id === current ? "page" : undefined }, text),
    ),
  );
}

function renderLogin(message) {
  clearInterval(pageTimer);
  renderNav(null);
  renderWho();
  const input = h("input", {
    type: "password",
    name: "key",
    autocomplete: "current-password",
    required: true,
  });
  const form = h(
    "form",
    {
      class: "login",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          session = await api("POST", "/ui/login", { key: input.value });
          flash(`Logged in (tenant ${session.tenant}).`);
          renderWho();
          route();
        } catch (err) {
          flash(explain(err), true);
          input.focus();
        }
      },
    },
    h("h1", {}, "Log in"),
    h(
      "p",
      {},
      "Enter the operator's key (PUNCTUAL_API_KEY) or a tenant's API key. It is kept by the server for this browser session; the browser holds only a session cookie.",
    ),
    field("API key", input),
    h("p", {}, h("button", { type: "submit" }, "Log in")),
  );
  if (message) flash(message, true);
  show(form);
  input.focus();
}

// --- overview ------------------------------------------------------------------------

function chart(perMinute, nowIso) {
  const end = Math.floor(Date.parse(nowIso) / 60000) * 60000;
  const buckets = [];
  const byMinute = new Map(perMinute.map((m) => [Date.parse(m.minute), m]));
  for (let i = 59; i >= 0; i--) {
    const t = end - i * 60000;
    buckets.push({ t, m: byMinute.get(t) ?? null });
  }
  const maxSent = Math.max(1, ...buckets.map((b) => b.m?.sent ?? 0));
  const maxLate = Math.max(1, ...buckets.map((b) => b.m?.maxLatenessMs ?? 0));
  const W = 600;
  const H = 110;
  const bw = W / 60;
  const svgNs = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNs, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H + 16}`);
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  svg.setAttribute(
    "aria-label",
    "Deliveries sent per minute (bars) and their mean lateness (line) over the last hour",
  );
  const points = [];
  buckets.forEach((b, i) => {
    const sent = b.m?.sent ?? 0;
    const bh = (sent / maxSent) * (H - 10);
    const rect = document.createElementNS(svgNs, "rect");
    rect.setAttribute("class", "bar");
    rect.setAttribute("x", String(i * bw + 1));
    rect.setAttribute("y", String(H - bh));
    rect.setAttribute("width", String(bw - 2));
    rect.setAttribute("height", String(bh));
    svg.append(rect);
    const late = b.m?.avgLatenessMs ?? 0;
    points.push(`${i * bw + bw / 2},${H - (late / maxLate) * (H - 10)}`);
  });
  const line = document.createElementNS(svgNs, "polyline");
  line.setAttribute("class", "late");
  line.setAttribute("points", points.join(" "));
  svg.append(line);
  for (const [x, text] of [
    [2, "−60 min"],
    [W - 30, "now"],
  ]) {
    const t = document.createElementNS(svgNs, "text");
    t.setAttribute("x", String(x));
    t.setAttribute("y", String(H + 12));
    t.textContent = text;
    svg.append(t);
  }
  return svg;
}

async function renderOverview() {
  const [overview, status] = await Promise.all([
    api("GET", "/v1/overview"),
    session?.root ? api("GET", "/v1/status").catch(() => null) : Promise.resolve(null),
  ]);
  const d = overview.deliveries;
  const card = (n, label, href) =>
    h(
      "a",
      { class: "card", href },
      h("div", { class: "n" }, String(n)),
      h("div", { class: "l" }, label),
    );
  const sentHour = overview.perMinute.reduce((s, m) => s + m.sent, 0);
  const nowMs = Date.parse(overview.now);
  const instances = status
    ? h(
        "section",
        { "aria-labelledby": "h-instances" },
        h("h2", { id: "h-instances" }, "Instances"),
        itemTable(
          status.instances,
          "No instance seen in the last hour.",
          ["Instance", "Host", "Role", "Version", "Heartbeat age", "State"],
          (i) => [
            h("td", {}, h("code", {}, i.id)),
            h("td", {}, `${i.host} (pid ${i.pid})`),
            h("td", {}, i.role),
            h("td", {}, i.version),
            h("td", {}, age(nowMs - Date.parse(i.lastTickAt ?? i.lastPassAt ?? i.startedAt))),
            h(
              "td",
              {},
              i.stoppedAt
                ? stateBadge("stopped")
                : i.stale
                  ? stateBadge("stale")
                  : stateBadge("running"),
            ),
          ],
        ),
        h(
          "p",
          { class: "muted" },
          `Database: ${status.database.engine}. Ready: ${status.ready ? "yes" : "no"}.`,
        ),
      )
    : h(
        "p",
        { class: "muted" },
        "Instances and heartbeats are shown to the operator's key only (GET /v1/status).",
      );
  const minutesTable = h(
    "details",
    {},
    h("summary", {}, "Per-minute figures as a table"),
    table(
      ["Minute", "Sent", "Mean lateness", "Max lateness"],
      overview.perMinute.map((m) =>
        h(
          "tr",
          {},
          h("td", {}, when(m.minute)),
          h("td", { class: "num" }, String(m.sent)),
          h("td", { class: "num" }, `${m.avgLatenessMs} ms`),
          h("td", { class: "num" }, `${m.maxLatenessMs} ms`),
        ),
      ),
    ),
  );
  show(
    h("h1", {}, "Overview"),
    h(
      "p",
      { class: "muted" },
      `Tenant ${overview.tenant}, as of `,
      when(overview.now),
      ". Refreshes every 15 s.",
    ),
    h(
      "div",
      { class: "cards" },
      card(d.dueBacklog, "Due backlog", "#/deliveries?state=pending"),
      card(d.overdue, "Overdue (> 15 min)", "#/deliveries?state=pending"),
      card(d.inDoubt, "In doubt", "#/dead"),
      card(d.dead, "Dead letters", "#/dead"),
      card(sentHour, "Sent in the last hour", "#/deliveries?state=sent"),
    ),
    h("h2", {}, "Deliveries per minute and lateness, last hour"),
    chart(overview.perMinute, overview.now),
    minutesTable,
    instances,
  );
  clearInterval(pageTimer);
  pageTimer = setInterval(() => {
    if (location.hash.startsWith("#/overview") || location.hash === "") {
      renderOverview().catch(() => undefined);
    }
  }, 15000);
}

// --- schedules -----------------------------------------------------------------------

function ruleText(s) {
  if (s.rrule) return s.rrule;
  if (s.rdate.length) return `${s.rdate.length} dates`;
  return `once at ${s.dtstartLocal ?? s.dtstart} ${s.floating ? "(floating)" : s.tzid}`;
}

// --- server-side pages (API-3) -------------------------------------------------------

/** Rows per list page. */
const PAGE_SIZE = 100;
/** The cursors of the pages before the current one, per list and filter set. */
const pageTrails = new Map();

/** "M" of "N of M": exact, or the server's estimate, labelled as one. */
function totalText(total) {
  if (!total) return "?";
  const n = total.value.toLocaleString("en-US");
  return total.exact ? n : `about ${n} (estimated)`;
}

/**
 * One page of `path` with `query` (filters), the page's cursor from the hash parameter
 * `cursorParam`; answers the reply and the pager (count line with id `countId`, Previous /
 * Next links) to show with it. Two lists on one page each take their own `cursorParam`. `counted:
 * false` asks no total (for a list whose API has none): the line then says "1–100".
 */
async function serverPage(
  hashBase,
  path,
  query,
  params,
  { cursorParam = "cursor", countId = "list-count", counted = true } = {},
) {
  const filters = new URLSearchParams(query);
  const key = `${cursorParam} ${path}?${filters}`;
  const cursor = params.get(cursorParam) ?? "";
  const trail = pageTrails.get(key) ?? [];
  // Coming back to the first page, or to a page not reached through Next: start over.
  if (!cursor) trail.length = 0;
  else if (trail.length === 0) trail.push("");
  pageTrails.set(key, trail);
  const ask = new URLSearchParams(filters);
  ask.set("limit", String(PAGE_SIZE));
  // A list without a count (the recipients) says which rows it shows, not of how many.
  if (counted) ask.set("total", "true");
  if (cursor) ask.set("cursor", cursor);
  const reply = await api("GET", `${path}?${ask}`);
  const link = (to) => {
    const q = new URLSearchParams(params);
    q.delete(cursorParam);
    if (to) q.set(cursorParam, to);
    return `${hashBase}?${q}`;
  };
  const start = trail.length * PAGE_SIZE;
  const pager = h(
    "p",
    { class: "muted pager" },
    h(
      "span",
      { id: countId },
      reply.items.length === 0
        ? counted
          ? `0 of ${totalText(reply.total)}`
          : "0"
        : `${(start + 1).toLocaleString("en-US")}–${(start + reply.items.length).toLocaleString("en-US")}${counted ? ` of ${totalText(reply.total)}` : ""}`,
    ),
    " ",
    trail.length > 0
      ? h(
          "a",
          {
            href: link(trail[trail.length - 1]),
            onclick: () => {
              trail.pop();
            },
          },
          "Previous",
        )
      : null,
    " ",
    reply.nextCursor
      ? h(
          "a",
          {
            href: link(reply.nextCursor),
            onclick: () => {
              trail.push(cursor);
            },
          },
          "Next",
        )
      : null,
  );
  return { reply, pager };
}

async function renderSchedules(params) {
  const state = params.get("state") ?? "";
  const source = params.get("source") ?? "";
  const q = params.get("q") ?? "";
  const query = {};
  if (state) query.state = state;
  if (source) query.source = source;
  // The search runs on the server: titles and external ids, any case.
  if (q) query.q = q;
  const { reply, pager } = await serverPage("#/schedules", "/v1/schedules", query, params);
  const shown = reply.items;
  const sources = [...new Set([...shown.map((s) => s.source), source].filter(Boolean))].sort();
  const search = h("input", {
    type: "search",
    name: "q",
    value: q,
    placeholder: "title or external id",
  });
  const form = filterForm(
    "#/schedules",
    { role: "search" },
    field("Search", search),
    field("State", select("state", [["", "any"], ...SCHEDULE_STATES.map((s) => [s, s])], state)),
    field("Source", h("input", { name: "source", value: source, list: "sources", size: 14 })),
    h("datalist", { id: "sources" }, ...sources.map((s) => h("option", { value: s }))),
    h("button", { type: "submit" }, "Apply"),
    h("a", { href: "#/schedules/new" }, "New schedule"),
  );
  show(
    h("h1", {}, "Schedules"),
    form,
    pager,
    table(
      ["Schedule", "State", "Source", "Rule", "Zone", "Reminders"],
      shown.map((s) =>
        h(
          "tr",
          {},
          h(
            "td",
            {},
            h("a", { href: `#/schedules/${s.id}` }, s.title ?? h("code", {}, s.id.slice(0, 8))),
            s.title ? h("div", { class: "muted" }, h("code", {}, s.id.slice(0, 8))) : null,
          ),
          h("td", {}, stateBadge(s.state)),
          h(
            "td",
            {},
            s.source ?? "—",
            s.externalId ? h("div", { class: "muted" }, s.externalId) : null,
          ),
          h("td", {}, h("code", {}, ruleText(s))),
          // API-11: a floating schedule has no zone of its own (tzid null).
          h("td", {}, s.floating ? h("span", { class: "muted" }, "each recipient's") : s.tzid),
          h("td", { class: "num" }, String(s.reminders.length)),
        ),
      ),
    ),
  );
}

/** A button that POSTs to `path` (with `body`), says `done`, then runs `reload`. */
function actionButton(label, done, path, body, reload, attrs = {}) {
  return h(
    "button",
    {
      type: "button",
      ...attrs,
      onclick: (e) =>
        act(e.target, done, async () => {
          await api("POST", path, body);
          await reload();
        }),
    },
    label,
  );
}

function jsonArea(name, value, rows = 8) {
  return h("textarea", { name, rows, spellcheck: "false" }, JSON.stringify(value, null, 2));
}

function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${what} is not valid JSON: ${err.message}`);
  }
}

/**
 * The host a reminder's target sends to: a URL's host (webhook, Slack, Discord), an
 * e-mail address's domain; null for a target without either (a handler channel).
 */
function targetHost(target) {
  if (target && typeof target.url === "string") {
    try {
      return new URL(target.url).host.toLowerCase();
    } catch {
      return null;
    }
  }
  if (target && typeof target.to === "string" && target.to.includes("@")) {
    return target.to.split("@").pop().trim().toLowerCase();
  }
  return null;
}

/**
 * Whether this tenant sent to `host` before, by a cheap rule: one of the schedules the API
 * lists for this key (every state, cancelled ones too; at most 5 pages of 200, the
 * schedule list's own bound) has a reminder whose target is on that host. Past that bound
 * a host not found counts as new: the form asks once more, never less.
 */
async function hostUsedBefore(host) {
  let cursor = null;
  for (let page = 0; page < 5; page++) {
    const query = new URLSearchParams({ limit: "200" });
    if (cursor) query.set("cursor", cursor);
    const reply = await api("GET", `/v1/schedules?${query}`);
    if (reply.items.some((s) => s.reminders.some((r) => targetHost(r.target) === host))) {
      return true;
    }
    cursor = reply.nextCursor;
    if (!cursor) return false;
  }
  return false;
}

/**
 * The New-schedule form (API-6). It starts empty: examples are placeholders, never
 * values, so nothing is sent anywhere until the user typed a due time and a target. A
 * first send to a host this tenant never targeted waits on a confirm step that names the
 * host and the due time.
 */
function renderNewSchedule() {
  const dtstart = h("input", {
    name: "dtstart",
    required: true,
    placeholder: "2027-01-04T09:00:00 (in the zone) or 2027-01-04T08:00:00Z",
  });
  const tzid = h("input", { name: "tzid", placeholder: VIEWER_ZONE });
  const rrule = h("input", { name: "rrule", placeholder: "FREQ=DAILY;BYHOUR=9 (empty: once)" });
  const key = h("input", { name: "key", placeholder: "main" });
  const offset = h("input", { name: "offset", placeholder: "PT0S" });
  const channel = h("input", { name: "channel", placeholder: "webhook" });
  const target = h("textarea", {
    name: "target",
    rows: 3,
    required: true,
    spellcheck: "false",
    placeholder: '{ "url": "https://hooks.example.com/reminders" }',
  });
  const payload = h("textarea", {
    name: "payload",
    rows: 3,
    spellcheck: "false",
    placeholder: '{ "text": "Reminder" }',
  });
  const confirmBox = h("div", { class: "confirm", role: "alert", hidden: true });
  /** The request body from the fields; empty optional fields take the placeholder. */
  const bodyOf = () => {
    const due = dtstart.value.trim();
    if (!due) throw new Error("Start (DTSTART) is required: choose when the reminder is due.");
    if (!target.value.trim()) throw new Error("Target (JSON) is required.");
    return {
      dtstart: due,
      tzid: tzid.value.trim() || VIEWER_ZONE,
      ...(rrule.value.trim() ? { rrule: rrule.value.trim() } : {}),
      ...(payload.value.trim() ? { payload: parseJson(payload.value, "Payload") } : {}),
      reminders: [
        {
          key: key.value.trim() || "main",
          offset: offset.value.trim() || "PT0S",
          channel: channel.value.trim() || "webhook",
          target: parseJson(target.value, "Target"),
        },
      ],
    };
  };
  const create = async (body) => {
    const created = await api("POST", "/v1/schedules", body);
    nextFlash = `Schedule ${created.id} created.${created.warnings ? ` ${created.warnings.join(" ")}` : ""}`;
    location.hash = `#/schedules/${created.id}`;
  };
  const askFirst = (body, host) => {
    const due = `${body.dtstart}${/[zZ]$|[+-]\d\d:\d\d$/.test(body.dtstart) ? "" : ` in ${body.tzid}`}`;
    fill(
      confirmBox,
      h("h2", {}, `First send to ${host}`),
      h(
        "p",
        {},
        "No schedule of this tenant targets ",
        h("strong", {}, host),
        ` yet. Its first reminder is due ${due}${body.rrule ? `, then ${body.rrule}` : ""}: punctual will send to that host then.`,
      ),
      h(
        "p",
        {},
        h(
          "button",
          {
            type: "button",
            onclick: (e) => act(e.target, null, () => create(body)),
          },
          `Create and send to ${host}`,
        ),
        " ",
        h(
          "button",
          {
            type: "button",
            class: "secondary",
            onclick: () => {
              confirmBox.hidden = true;
              confirmBox.replaceChildren();
              submit.hidden = false;
            },
          },
          "Back",
        ),
      ),
    );
    confirmBox.hidden = false;
    submit.hidden = true;
  };
  const submit = h("button", { type: "submit" }, "Create schedule");
  const form = h(
    "form",
    {
      // An edit after the confirm step showed drops it: it named what was typed then.
      oninput: () => {
        if (confirmBox.hidden) return;
        confirmBox.hidden = true;
        confirmBox.replaceChildren();
        submit.hidden = false;
      },
      onsubmit: async (event) => {
        event.preventDefault();
        await act(event.submitter, null, async () => {
          const body = bodyOf();
          const host = targetHost(body.reminders[0].target);
          if (host && !(await hostUsedBefore(host))) {
            askFirst(body, host);
            return;
          }
          await create(body);
        });
      },
    },
    h("h1", {}, "New schedule"),
    h(
      "div",
      { class: "row" },
      field("Start (DTSTART: local time in the zone, or an instant with Z)", dtstart),
      field(`Time zone (empty: ${VIEWER_ZONE}, this browser's)`, tzid),
      field("Recurrence rule (RRULE)", rrule),
    ),
    h("h2", {}, "Reminder"),
    h(
      "div",
      { class: "row" },
      field("Key (empty: main)", key),
      field("Offset (ISO 8601, e.g. -PT15M; empty: PT0S)", offset),
      field("Channel (empty: webhook)", channel),
    ),
    field("Target (JSON)", target),
    field("Payload (JSON; empty: none)", payload),
    h("p", {}, submit),
    confirmBox,
  );
  show(form);
}

// --- explanation (OPS-16) ------------------------------------------------------------

/** Entries asked for per explain page; "Show more" continues with the reply's cursor. */
const EXPLAIN_PAGE = 500;
const DAY_MS = 86_400_000;
const EXPLAIN_VERDICT_CLASS = {
  sent: "sent",
  pending: "pending",
  deferred: "retry",
  skipped: "skipped",
  failed: "dead",
  in_doubt: "in_doubt",
  cancelled: "cancelled",
  not_planned: "not_planned",
};

/** A `datetime-local` value (the viewer's wall clock, to the minute) for an instant. */
function localInputValue(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

function verdictBadge(verdict) {
  return h(
    "span",
    { class: `state state-${EXPLAIN_VERDICT_CLASS[verdict] ?? verdict}` },
    verdict.replace("_", " "),
  );
}

/** What an event says beyond its type and time, as plain text. */
function eventDetail(e) {
  const parts = [];
  if (e.attempt !== undefined) parts.push(`attempt ${e.attempt}`);
  if (e.outcome) parts.push(`outcome ${e.outcome}`);
  if (e.status !== undefined) parts.push(`status ${e.status}`);
  if (e.settled === false) parts.push("not settled (lease lost)");
  if (e.reason) parts.push(`reason ${e.reason}`);
  if (e.until) parts.push(`until ${formatIn(e.until, VIEWER_ZONE)}`);
  if (e.leaseExpiresAt) parts.push(`lease until ${formatIn(e.leaseExpiresAt, VIEWER_ZONE)}`);
  if (e.digestId) parts.push(`digest ${e.digestId}`);
  if (e.items !== undefined) parts.push(`${e.items} items`);
  if (e.endedAt) parts.push(`ended ${formatIn(e.endedAt, VIEWER_ZONE)}`);
  return parts.join(", ");
}

/** The timeline of one entry: one row per event, oldest first. */
function eventsTable(events) {
  if (events.length === 0) {
    return h("p", { class: "muted" }, "No event recorded (no delivery row).");
  }
  return table(
    ["Event", "When", "By", "Details", "Error"],
    events.map((e) =>
      h(
        "tr",
        {},
        h("td", {}, e.type),
        h("td", {}, when(e.at)),
        h("td", {}, e.by ? h("code", {}, e.by) : "—"),
        h("td", {}, eventDetail(e) || "—"),
        h("td", {}, e.error ? h("code", {}, e.error.slice(0, 300)) : "—"),
      ),
    ),
  );
}

/**
 * Table rows for explain entries: one row per entry (occurrence, reminder, recipient,
 * verdict, reason) with a button that shows or hides the row of its timeline below it.
 */
function explainRows(entries, zone) {
  return entries.flatMap((e) => {
    const cells = 6;
    const detail = h(
      "tr",
      { class: "events", hidden: true },
      h("td", { colspan: String(cells) }, eventsTable(e.events)),
    );
    const label = `Events of ${e.reminderKey}${e.recipientId ? ` for ${e.recipientId}` : ""} at ${e.occurrenceAt}`;
    const toggle = h(
      "button",
      {
        type: "button",
        class: "secondary",
        "aria-expanded": "false",
        "aria-label": label,
        onclick: () => {
          detail.hidden = !detail.hidden;
          toggle.setAttribute("aria-expanded", String(!detail.hidden));
          toggle.textContent = `${detail.hidden ? "Show" : "Hide"} events (${e.events.length})`;
        },
      },
      `Show events (${e.events.length})`,
    );
    return [
      h(
        "tr",
        { class: "entry" },
        h("td", {}, when(e.occurrenceAt, zone)),
        h(
          "td",
          {},
          e.reminderKey,
          e.triggered ? h("div", { class: "muted" }, "triggered") : null,
          h("div", { class: "muted" }, "due ", when(e.dueAt, zone)),
        ),
        h("td", {}, e.recipientId ?? "—"),
        h(
          "td",
          {},
          verdictBadge(e.verdict),
          e.deliveryId !== null
            ? h(
                "div",
                { class: "muted" },
                h("a", { href: `#/deliveries/${e.deliveryId}` }, `#${e.deliveryId}`),
              )
            : null,
        ),
        h("td", {}, e.reason ? h("code", {}, e.reason) : "—"),
        h("td", {}, toggle),
      ),
      detail,
    ];
  });
}

const EXPLAIN_HEADERS = ["Occurrence", "Reminder", "Recipient", "Verdict", "Reason", "Timeline"];

/**
 * The "Why did it (not) fire?" section of a schedule's page (OPS-16): a window on the due
 * time the user picks (default the last 7 days and the next 7), the entries of
 * `GET /v1/schedules/{id}/explain` for it, page by page.
 */
function explainSection(scheduleId, zone) {
  const from = h("input", { type: "datetime-local", name: "from", required: true });
  const to = h("input", { type: "datetime-local", name: "to", required: true });
  const out = h("div", { id: "explain", "aria-live": "polite" });
  const load = async () => {
    const window = {
      from: new Date(from.value).toISOString(),
      to: new Date(to.value).toISOString(),
    };
    const body = h("tbody", {});
    const count = h("span", { id: "explain-count" });
    const more = h("p", {});
    let shown = 0;
    const page = async (cursor) => {
      const q = new URLSearchParams({ ...window, limit: String(EXPLAIN_PAGE) });
      if (cursor) q.set("cursor", cursor);
      const reply = await api(
        "GET",
        `/v1/schedules/${encodeURIComponent(scheduleId)}/explain?${q}`,
      );
      body.append(...explainRows(reply.entries, zone));
      shown += reply.entries.length;
      count.textContent = `${shown.toLocaleString("en-US")} ${shown === 1 ? "entry" : "entries"}${reply.nextCursor ? " so far" : ""}, due `;
      fill(
        more,
        reply.nextCursor
          ? h(
              "button",
              {
                type: "button",
                class: "secondary",
                onclick: (e) => act(e.target, null, () => page(reply.nextCursor)),
              },
              `Show ${EXPLAIN_PAGE} more`,
            )
          : null,
      );
      return reply;
    };
    const first = await page(null);
    fill(
      out,
      h(
        "p",
        { class: "muted" },
        count,
        when(first.from),
        " … ",
        when(first.to),
        first.complete ? "." : ". The stored rule no longer parses: only recorded rows are listed.",
      ),
      shown === 0
        ? h("p", { class: "muted" }, "Nothing was due or expected in this window.")
        : null,
      h(
        "div",
        { class: "scroll" },
        h(
          "table",
          { class: "explain" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              EXPLAIN_HEADERS.map((x) => h("th", { scope: "col" }, x)),
            ),
          ),
          body,
        ),
      ),
      more,
    );
  };
  const form = h(
    "form",
    {
      class: "filters",
      onsubmit: async (event) => {
        event.preventDefault();
        await act(event.submitter, null, load);
      },
    },
    field("Due from (your time)", from),
    field("Due before (your time)", to),
    h("button", { type: "submit" }, "Explain"),
  );
  const section = h(
    "section",
    { "aria-labelledby": "h-explain" },
    h("h2", { id: "h-explain" }, "Why did it (not) fire?"),
    h(
      "p",
      { class: "muted" },
      "Every reminder the rule expects in the window, and every one recorded there, with what became of it and why. Show events opens its timeline.",
    ),
    form,
    out,
  );
  // The default window is the server's: its own default starts 7 days before its now
  // (which may differ from this browser's clock); the window shown runs 14 days from there.
  api("GET", `/v1/schedules/${encodeURIComponent(scheduleId)}/explain?limit=1`)
    .then((reply) => {
      const start = Date.parse(reply.from);
      from.value = localInputValue(start);
      to.value = localInputValue(start + 14 * DAY_MS);
      return load();
    })
    .catch((err) => fill(out, h("p", { class: "error" }, explain(err))));
  return section;
}

/** The explanation of one delivery (`GET /v1/deliveries/{id}/explain`), as a section. */
async function deliveryExplainSection(id) {
  const reply = await api("GET", `/v1/deliveries/${encodeURIComponent(id)}/explain`).catch(
    (err) => ({ error: explain(err) }),
  );
  const e = reply.entry;
  return h(
    "section",
    { "aria-labelledby": "h-explain" },
    h("h2", { id: "h-explain" }, "Why did it (not) fire?"),
    reply.error
      ? h("p", { class: "muted" }, reply.error)
      : [
          h(
            "p",
            { id: "explain-verdict" },
            verdictBadge(e.verdict),
            e.reason ? [" ", h("code", {}, e.reason)] : null,
            e.recipientId ? ` for recipient ${e.recipientId}` : null,
            e.triggered ? " (triggered by an operator)" : null,
          ),
          eventsTable(e.events),
        ],
  );
}

/** Most recipient zones whose next occurrence the schedule page computes (one preview each). */
const MAX_ZONES_SHOWN = 50;

/**
 * API-11: a schedule's next occurrence per recipient zone, from
 * `GET /v1/schedules/{id}/recipient-zones` and one `POST /v1/preview` per zone: a floating
 * schedule's rule is read in each zone (the zone as `tzid`), another's in its own zone and
 * shown in each. Null for a schedule without recipients.
 */
async function recipientZonesSection(s, afterIso) {
  const zones = await api("GET", `/v1/schedules/${encodeURIComponent(s.id)}/recipient-zones`).catch(
    () => null,
  );
  if (!zones || zones.recipients === 0) return null;
  const shown = zones.zones.slice(0, MAX_ZONES_SHOWN);
  const nexts = await Promise.all(
    shown.map((z) =>
      api("POST", "/v1/preview", {
        dtstart: s.dtstart,
        tzid: zones.floating ? z.tzid : s.tzid,
        rrule: s.rrule,
        rdate: s.rdate,
        exdate: s.exdate,
        endsAt: s.endsAt,
        dst: s.dst,
        after: afterIso,
        count: 1,
      }).then(
        (occurrences) => ({ instant: occurrences[0]?.instant ?? null }),
        (err) => ({ error: explain(err) }),
      ),
    ),
  );
  return h(
    "section",
    { id: "recipient-zones", "aria-labelledby": "h-recipient-zones" },
    h("h2", { id: "h-recipient-zones" }, "Next occurrence per recipient zone"),
    h(
      "p",
      { class: "muted" },
      `${zones.recipients.toLocaleString("en-US")} recipients in ${zones.zones.length} zones. `,
      zones.floating
        ? "Floating: the start and rule are read in each recipient's own zone, so each zone has its own instant."
        : `Not floating: every recipient gets the same instant (the rule is read in ${s.tzid}), shown here in each zone.`,
      zones.zones.length > shown.length ? ` The ${shown.length} largest zones are shown.` : "",
    ),
    table(
      [
        "Recipient zone",
        "Recipients",
        "Next occurrence (in that zone)",
        `In ${VIEWER_ZONE} (yours)`,
      ],
      shown.map((z, i) => {
        const next = nexts[i];
        return h(
          "tr",
          {},
          h("td", {}, z.tzid),
          h("td", { class: "num" }, z.recipients.toLocaleString("en-US")),
          next.error
            ? h("td", { colspan: "2", class: "muted" }, next.error)
            : next.instant === null
              ? h("td", { colspan: "2", class: "muted" }, "No occurrence after now.")
              : [h("td", {}, when(next.instant, z.tzid)), h("td", {}, when(next.instant))],
        );
      }),
    ),
  );
}

async function renderSchedule(id) {
  const s = await api("GET", `/v1/schedules/${encodeURIComponent(id)}`);
  const nowIso = new Date().toISOString();
  // API-11: a floating schedule has no zone of its own (tzid null): its occurrences are
  // shown per recipient zone (recipientZonesSection), its deliveries in UTC and yours.
  const zone = s.floating ? "UTC" : s.tzid;
  const [occurrences, deliveries, zones] = await Promise.all([
    s.floating
      ? Promise.resolve({ floating: true })
      : api("POST", "/v1/preview", {
          dtstart: s.dtstart,
          tzid: s.tzid,
          rrule: s.rrule,
          rdate: s.rdate,
          exdate: s.exdate,
          endsAt: s.endsAt,
          dst: s.dst,
          after: nowIso,
          count: 10,
        }).catch((err) => ({ error: explain(err) })),
    api("GET", `/v1/deliveries?scheduleId=${encodeURIComponent(id)}&limit=1000`),
    recipientZonesSection(s, nowIso),
  ]);
  const waiting = deliveries.items.filter((d) => ["pending", "retry", "claimed"].includes(d.state));
  const done = deliveries.items.filter((d) => !["pending", "retry", "claimed"].includes(d.state));
  const reload = () => renderSchedule(id);
  const postButton = (label, done, path, body, attrs) =>
    actionButton(label, done, path, body, reload, attrs);
  const buttons = h(
    "div",
    { class: "row" },
    s.state === "active" ? postButton("Pause", "Paused.", `/v1/schedules/${id}/pause`) : null,
    s.state === "paused" ? postButton("Resume", "Resumed.", `/v1/schedules/${id}/resume`) : null,
    s.state === "active"
      ? postButton(
          "Trigger now",
          "Triggered: one extra delivery per reminder, due now.",
          `/v1/schedules/${id}/trigger`,
          {},
          { class: "secondary" },
        )
      : null,
  );
  const editable = {
    dtstart: s.dtstart,
    ...(s.floating ? {} : { tzid: s.tzid }),
    rrule: s.rrule,
    endsAt: s.endsAt,
    payload: s.payload,
  };
  const edit = jsonArea("patch", editable, 9);
  const editForm = h(
    "form",
    {
      onsubmit: async (event) => {
        event.preventDefault();
        await act(event.submitter, null, async () => {
          const patch = parseJson(edit.value, "The edit");
          const res = await fetch(`/v1/schedules/${id}`, {
            method: "PATCH",
            credentials: "same-origin",
            headers: {
              "content-type": "application/json",
              "if-match": `"${s.version}"`,
              ...(session?.csrf ? { "x-csrf-token": session.csrf } : {}),
            },
            body: JSON.stringify(patch),
          });
          const body = await res.json().catch(() => null);
          if (!res.ok) throw new ApiError(res.status, body);
          const r = body.realigned;
          await reload();
          flash(
            `Saved as version ${body.version}: ${r.created} deliveries planned, ${r.moved} moved, ${r.deleted} removed.${body.warnings ? ` ${body.warnings.join(" ")}` : ""}`,
          );
        });
      },
    },
    h("h2", {}, "Edit"),
    h(
      "p",
      { class: "muted" },
      `Fields to change (JSON), saved against version ${s.version}: an edit made meanwhile elsewhere is refused, not overwritten. Waiting deliveries are realigned.`,
    ),
    field("Changes", edit),
    h("p", {}, h("button", { type: "submit" }, "Save")),
  );
  const zoneHeads = [
    s.floating ? "In UTC (floating schedule)" : `In ${zone} (schedule)`,
    `In ${VIEWER_ZONE} (yours)`,
  ];
  show(
    h("p", {}, h("a", { href: "#/schedules" }, "← Schedules")),
    h("h1", {}, s.title ?? "Schedule", " ", h("code", {}, s.id)),
    h(
      "dl",
      { class: "kv" },
      h("dt", {}, "Title"),
      h("dd", {}, s.title ?? "—"),
      h("dt", {}, "State"),
      h("dd", {}, stateBadge(s.state), s.invalidReason ? ` ${s.invalidReason}` : ""),
      h("dt", {}, "Version"),
      h("dd", {}, String(s.version)),
      h("dt", {}, "Start"),
      h(
        "dd",
        {},
        h("code", {}, s.dtstartLocal ?? s.dtstart),
        s.floating ? " in each recipient's own zone (floating)" : ` ${s.tzid}`,
        s.dtstartLocal && s.dtstartLocal !== s.dtstart ? ` (given as ${s.dtstart})` : "",
      ),
      h("dt", {}, "Rule"),
      h("dd", {}, h("code", {}, ruleText(s))),
      h("dt", {}, "Ends"),
      h("dd", {}, s.endsAt ?? "—"),
      h("dt", {}, "Source"),
      h("dd", {}, s.source ?? "—", s.externalId ? ` / ${s.externalId}` : ""),
      h("dt", {}, "Payload"),
      h("dd", {}, h("pre", {}, JSON.stringify(s.payload, null, 2))),
    ),
    buttons,
    h("h2", {}, "Reminders"),
    table(
      ["Key", "Offset", "Channel", "Target"],
      s.reminders.map((r) =>
        h(
          "tr",
          {},
          h("td", {}, r.key),
          h("td", {}, h("code", {}, r.offset)),
          h("td", {}, r.channel),
          h("td", {}, h("code", {}, JSON.stringify(r.target))),
        ),
      ),
    ),
    h("h2", {}, "Next occurrences"),
    occurrences.floating
      ? h("p", { class: "muted" }, "Floating: see the next occurrence per recipient zone below.")
      : occurrences.error
        ? h("p", { class: "muted" }, occurrences.error)
        : itemTable(occurrences, "No occurrence after now.", zoneHeads, (o) => [
            h("td", {}, when(o.instant, zone)),
            h("td", {}, when(o.instant)),
          ]),
    zones,
    h("h2", {}, "Reminders due (planned deliveries)"),
    itemTable(waiting, "None waiting.", ["Delivery", "Reminder", "State", ...zoneHeads], (d) => [
      h("td", {}, h("a", { href: `#/deliveries/${d.id}` }, `#${d.id}`)),
      h("td", {}, d.reminderKey),
      h("td", {}, stateBadge(d.state)),
      h("td", {}, when(d.dueAt, zone)),
      h("td", {}, when(d.dueAt)),
    ]),
    h("h2", {}, "Past deliveries"),
    done.length === 0
      ? h("p", { class: "muted" }, "None yet.")
      : deliveryTable(done.slice(-50).reverse()),
    explainSection(s.id, zone),
    s.state === "cancelled" ? null : editForm,
  );
}

// --- deliveries ----------------------------------------------------------------------

function deliveryTable(items, selectable) {
  const headers = [
    "Delivery",
    "State",
    "Channel",
    "Reminder",
    "Due",
    "Sent / finished",
    "Attempts",
    "Last error",
  ];
  return table(
    selectable ? ["Select", ...headers] : headers,
    items.map((d) =>
      h(
        "tr",
        {},
        selectable
          ? h(
              "td",
              {},
              h("input", {
                type: "checkbox",
                name: "pick",
                value: String(d.id),
                "aria-label": `Select delivery ${d.id}`,
              }),
            )
          : null,
        h("td", {}, h("a", { href: `#/deliveries/${d.id}` }, `#${d.id}`)),
        h("td", {}, stateBadge(d.state), d.reason ? h("div", { class: "muted" }, d.reason) : null),
        h("td", {}, d.channel),
        h("td", {}, d.reminderKey),
        h("td", {}, when(d.dueAt)),
        h("td", {}, when(d.sentAt ?? d.finishedAt)),
        h("td", { class: "num" }, `${d.attempt}/${d.maxAttempts}`),
        h("td", {}, d.lastError ? h("code", {}, d.lastError.slice(0, 200)) : "—"),
      ),
    ),
  );
}

async function renderDeliveries(params) {
  const state = params.get("state") ?? "";
  const channel = params.get("channel") ?? "";
  const from = params.get("from") ?? "";
  const to = params.get("to") ?? "";
  const scheduleId = params.get("scheduleId") ?? "";
  // Every filter runs on the server (API-3); newest first.
  const query = { order: "desc" };
  if (state) query.state = state;
  if (channel) query.channel = channel;
  if (scheduleId) query.scheduleId = scheduleId;
  if (from) query.dueFrom = new Date(from).toISOString();
  if (to) query.dueTo = new Date(to).toISOString();
  const { reply, pager } = await serverPage("#/deliveries", "/v1/deliveries", query, params);
  const shown = reply.items;
  const channels = [...new Set([...shown.map((d) => d.channel), channel].filter(Boolean))].sort();
  const form = filterForm(
    "#/deliveries",
    {},
    field("State", select("state", [["", "any"], ...DELIVERY_STATES.map((s) => [s, s])], state)),
    field("Channel", h("input", { name: "channel", value: channel, list: "channels", size: 10 })),
    h("datalist", { id: "channels" }, ...channels.map((c) => h("option", { value: c }))),
    field(
      "Due from (your time)",
      h("input", { type: "datetime-local", name: "from", value: from }),
    ),
    field("Due before (your time)", h("input", { type: "datetime-local", name: "to", value: to })),
    field("Schedule id", h("input", { name: "scheduleId", value: scheduleId, size: 12 })),
    h("button", { type: "submit" }, "Apply"),
  );
  show(h("h1", {}, "Deliveries"), form, pager, deliveryTable(shown));
}

function settleButtons(d, reload) {
  const redrivable = d.state === "dead" || d.state === "in_doubt";
  const path = `/v1/deliveries/${d.id}`;
  const resolveButton = (outcome) =>
    actionButton(
      `Resolve as ${outcome}`,
      `Delivery ${d.id} resolved as ${outcome}.`,
      `${path}/resolve`,
      { outcome },
      reload,
      { class: "secondary" },
    );
  return h(
    "div",
    { class: "row" },
    redrivable
      ? actionButton(
          "Redrive",
          `Delivery ${d.id} redriven: it is sent again with the same key.`,
          `${path}/redrive`,
          undefined,
          reload,
        )
      : null,
    redrivable ? resolveButton("sent") : null,
    d.state === "in_doubt" ? resolveButton("dead") : null,
  );
}

async function renderDelivery(id) {
  const [d, why] = await Promise.all([
    api("GET", `/v1/deliveries/${encodeURIComponent(id)}`),
    deliveryExplainSection(id),
  ]);
  const reload = () => renderDelivery(id);
  show(
    h("p", {}, h("a", { href: "#/deliveries" }, "← Deliveries")),
    h("h1", {}, `Delivery #${d.id}`),
    h(
      "dl",
      { class: "kv" },
      h("dt", {}, "State"),
      h("dd", {}, stateBadge(d.state), d.reason ? ` (${d.reason})` : ""),
      h("dt", {}, "Schedule"),
      h("dd", {}, h("a", { href: `#/schedules/${d.scheduleId}` }, h("code", {}, d.scheduleId))),
      h("dt", {}, "Delivery key"),
      h("dd", {}, h("code", {}, d.deliveryKey)),
      h("dt", {}, "Reminder / channel"),
      h("dd", {}, `${d.reminderKey} / ${d.channel}`),
      h("dt", {}, "Occurrence"),
      h("dd", {}, when(d.occurrenceAt)),
      h("dt", {}, "Due"),
      h("dd", {}, when(d.dueAt), d.late ? " (late)" : ""),
      h("dt", {}, "Sent"),
      h("dd", {}, when(d.sentAt)),
      h("dt", {}, "Attempts"),
      h(
        "dd",
        {},
        `${d.attempt} of ${d.maxAttempts}${d.round > 1 ? `, round ${d.round}` : ""}` +
          ` (${d.failures} failed, ${d.deferrals} deferred)`,
      ),
      h("dt", {}, "Last error"),
      h("dd", {}, d.lastError ? h("code", {}, d.lastError) : "—"),
    ),
    settleButtons(d, reload),
    why,
    h("h2", { id: "h-attempts" }, "Attempt history"),
    d.attempts.length === 0
      ? h("p", { class: "muted" }, "No attempt yet.")
      : h(
          "div",
          { id: "attempts" },
          table(
            ["#", "Worker", "Started", "Ended", "Outcome", "Status", "Message id", "Error"],
            d.attempts.map((a) =>
              h(
                "tr",
                {},
                h("td", { class: "num" }, String(a.attempt)),
                h("td", {}, h("code", {}, a.worker)),
                h("td", {}, when(a.startedAt)),
                h("td", {}, when(a.endedAt)),
                h("td", {}, stateBadge(a.outcome)),
                h("td", {}, a.status === null ? "—" : String(a.status)),
                h("td", {}, a.messageId ?? "—"),
                h("td", {}, a.error ? h("code", {}, a.error) : "—"),
              ),
            ),
          ),
        ),
  );
}

// --- dead letters and in doubt -------------------------------------------------------

async function renderDead(params) {
  // Each list pages on the server (API-3), newest first, with a cursor of its own.
  const [dead, doubt] = await Promise.all([
    serverPage("#/dead", "/v1/deliveries", { state: "dead", order: "desc" }, params, {
      cursorParam: "deadCursor",
      countId: "dead-count",
    }),
    serverPage("#/dead", "/v1/deliveries", { state: "in_doubt", order: "desc" }, params, {
      cursorParam: "doubtCursor",
      countId: "doubt-count",
    }),
  ]);
  const reload = () => renderDead(params);
  const picked = (section) =>
    [...section.querySelectorAll('input[name="pick"]:checked')].map((i) => Number(i.value));
  const onPicked = (section, what, path, body) => async (e) => {
    const ids = picked(section);
    if (ids.length === 0) {
      flash("Select at least one delivery first.", true);
      return;
    }
    await act(e.target, null, async () => {
      let done = 0;
      const failed = [];
      for (const id of ids) {
        try {
          await api("POST", `/v1/deliveries/${id}/${path}`, body);
          done++;
        } catch (err) {
          failed.push(`#${id}: ${explain(err)}`);
        }
      }
      await reload();
      flash(
        `${what}: ${done} of ${ids.length}.${failed.length ? ` Failed: ${failed.join("; ")}` : ""}`,
        failed.length > 0,
      );
    });
  };
  const selectAll = (sectionId) =>
    h(
      "label",
      { class: "inline" },
      h("input", {
        type: "checkbox",
        onchange: (e) => {
          for (const box of document.querySelectorAll(`#${sectionId} input[name="pick"]`)) {
            box.checked = e.target.checked;
          }
        },
      }),
      "Select all",
    );
  const section = (id, title, { reply, pager }, actions) => {
    const items = reply.items;
    const el = h(
      "section",
      { id, "aria-labelledby": `${id}-h` },
      h("h2", { id: `${id}-h` }, title),
    );
    if (items.length === 0) {
      el.append(pager, h("p", { class: "muted" }, "None."));
      return el;
    }
    el.append(
      pager,
      h("div", { class: "row" }, selectAll(id), ...actions(el)),
      deliveryTable(items, true),
    );
    return el;
  };
  // A button that runs `path` on the deliveries picked in section `el`; `what` names what
  // was done in the message after.
  const pickedButton = (el, label, what, path, body, primary = false) =>
    h(
      "button",
      {
        type: "button",
        class: primary ? undefined : "secondary",
        onclick: onPicked(el, what, path, body),
      },
      label,
    );
  const redriveButton = (el) =>
    pickedButton(el, "Redrive selected", "Redriven", "redrive", undefined, true);
  const deadSection = section("dead", "Dead letters", dead, (el) => [
    redriveButton(el),
    pickedButton(el, "Resolve selected as sent", "Resolved", "resolve", { outcome: "sent" }),
  ]);
  const doubtSection = section("doubt", "In doubt", doubt, (el) => [
    redriveButton(el),
    pickedButton(el, "Resolve selected as sent", "Resolved as sent", "resolve", {
      outcome: "sent",
    }),
    pickedButton(el, "Resolve selected as dead", "Resolved as dead", "resolve", {
      outcome: "dead",
    }),
  ]);

  // Bulk by filter: POST /v1/deliveries/redrive or /resolve, previewed first (dryRun).
  const bulkState = select(
    "state",
    [
      ["dead", "dead"],
      ["in_doubt", "in doubt"],
    ],
    "dead",
  );
  const bulkAction = select(
    "action",
    [
      ["redrive", "redrive"],
      ["resolve-sent", "resolve as sent"],
      ["resolve-dead", "resolve as dead"],
    ],
    "redrive",
  );
  const bulkChannel = h("input", { name: "channel" });
  const bulkSource = h("input", { name: "source" });
  const bulkResult = h("div", { "aria-live": "polite" });
  const bulkBody = (dryRun) => {
    const body = { state: bulkState.value, dryRun, limit: 1000 };
    if (bulkChannel.value.trim()) body.channel = bulkChannel.value.trim();
    if (bulkSource.value.trim()) body.source = bulkSource.value.trim();
    if (bulkAction.value !== "redrive") body.outcome = bulkAction.value.slice("resolve-".length);
    return body;
  };
  const bulkPath = () =>
    bulkAction.value === "redrive" ? "/v1/deliveries/redrive" : "/v1/deliveries/resolve";
  const bulkForm = h(
    "form",
    {
      class: "filters",
      onsubmit: async (event) => {
        event.preventDefault();
        await act(event.submitter, null, async () => {
          const preview = await api("POST", bulkPath(), bulkBody(true));
          const confirm = h(
            "button",
            {
              type: "button",
              class: "danger",
              onclick: (e) =>
                act(e.target, null, async () => {
                  const done = await api("POST", bulkPath(), bulkBody(false));
                  await reload();
                  flash(
                    `Bulk ${bulkAction.selectedOptions[0].text}: ${done.count} changed, ${done.remaining} left.`,
                  );
                }),
            },
            `Confirm: ${bulkAction.selectedOptions[0].text} ${preview.count}`,
          );
          fill(
            bulkResult,
            h("p", {}, `${preview.count} deliveries match.`),
            preview.count > 0 ? confirm : null,
          );
        });
      },
    },
    field("State", bulkState),
    field("Action", bulkAction),
    field("Channel (optional)", bulkChannel),
    field("Source (optional)", bulkSource),
    h("button", { type: "submit", class: "secondary" }, "Preview"),
  );
  show(
    h("h1", {}, "Dead letters & in doubt"),
    h(
      "p",
      { class: "muted" },
      "Redrive sends a delivery again under its own delivery key (a receiver that deduplicates sees one reminder). Resolve settles it by hand without sending.",
    ),
    deadSection,
    doubtSection,
    h("h2", {}, "All that match a filter"),
    bulkForm,
    bulkResult,
  );
}

// --- recipients (API-10) -------------------------------------------------------------

/** A target as the API shows it (secrets already redacted there), compactly. */
function targetText(target) {
  const main = target.url ?? target.to ?? null;
  const rest = Object.entries(target).filter(([k]) => k !== "url" && k !== "to");
  return [
    main === null ? null : h("code", {}, String(main)),
    rest.length
      ? h("div", { class: "muted" }, h("code", {}, JSON.stringify(Object.fromEntries(rest))))
      : null,
  ];
}

/** A recipient's opt-outs and quiet window, in words. */
function preferencesText(p) {
  const parts = [];
  const channels = p?.optOut?.channels ?? [];
  const categories = p?.optOut?.categories ?? [];
  if (channels.length) parts.push(h("div", {}, `Opted out of channels: ${channels.join(", ")}`));
  if (categories.length)
    parts.push(h("div", {}, `Opted out of categories: ${categories.join(", ")}`));
  const q = p?.quietHours;
  if (q) {
    parts.push(
      h(
        "div",
        { class: "muted" },
        `Quiet ${q.start}–${q.end}${q.days ? ` on ${q.days.join(" ")}` : ""}${q.tzid ? ` (${q.tzid})` : ""}`,
      ),
    );
  }
  return parts.length ? parts : h("span", { class: "muted" }, "none");
}

/** The Recipients page: the registry of `GET /v1/recipients`, searched and paged on the server. */
async function renderRecipients(params) {
  const q = params.get("q") ?? "";
  const query = {};
  // The search runs on the server: a case-insensitive substring of the id.
  if (q) query.q = q;
  const { reply, pager } = await serverPage("#/recipients", "/v1/recipients", query, params, {
    counted: false,
  });
  const search = h("input", { type: "search", name: "q", value: q, placeholder: "recipient id" });
  const form = h(
    "form",
    {
      class: "filters",
      role: "search",
      onsubmit: (event) => {
        event.preventDefault();
        const next = new URLSearchParams();
        if (search.value.trim()) next.set("q", search.value.trim());
        location.hash = `#/recipients?${next}`;
      },
    },
    field("Search", search),
    h("button", { type: "submit" }, "Apply"),
  );
  show(
    h("h1", {}, "Recipients"),
    h(
      "p",
      { class: "muted" },
      "The people schedules for recipients are sent to, each with a time zone, one target per channel (secrets hidden, as the API shows them) and opt-outs. Change them through the API or `punctual recipients`.",
    ),
    form,
    pager,
    itemTable(
      reply.items,
      q ? `No recipient id contains “${q}”.` : "No recipient yet.",
      ["Recipient", "Zone", "Targets", "Opt-outs and quiet hours", "Updated"],
      (r) => [
        h("td", {}, h("code", {}, r.id), h("div", { class: "muted" }, `version ${r.version}`)),
        h("td", {}, r.tzid),
        h(
          "td",
          {},
          Object.keys(r.targets).length === 0
            ? h("span", { class: "muted" }, "none")
            : h(
                "dl",
                { class: "targets" },
                Object.entries(r.targets).map(([channel, target]) => [
                  h("dt", {}, channel),
                  h("dd", {}, targetText(target)),
                ]),
              ),
        ),
        h("td", {}, preferencesText(r.preferences)),
        h("td", {}, when(r.updatedAt)),
      ],
    ),
  );
}

// --- calendar import -----------------------------------------------------------------

function renderImport() {
  const file = h("input", {
    type: "file",
    name: "file",
    accept: ".ics,text/calendar",
    required: true,
  });
  const source = h("input", { name: "source", required: true, value: "calendar" });
  const remind = h("input", { name: "remind", value: "-PT15M" });
  const useAlarms = h("input", { type: "checkbox", name: "useAlarms" });
  const channel = h("input", { name: "channel", value: "webhook" });
  const target = h("input", {
    name: "target",
    type: "url",
    placeholder: "https://example.com/hook",
  });
  const tzid = h("input", { name: "tzid", placeholder: VIEWER_ZONE });
  const out = h("div", { "aria-live": "polite" });
  const query = (dryRun) => {
    const q = new URLSearchParams({
      source: source.value.trim(),
      channel: channel.value.trim() || "webhook",
    });
    for (const r of remind.value
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean))
      q.append("remind", r);
    if (useAlarms.checked) q.set("useAlarms", "true");
    if (target.value.trim()) q.set("target", target.value.trim());
    if (tzid.value.trim()) q.set("tzid", tzid.value.trim());
    // The import itself runs after the request; its progress is read per chunk.
    q.set(dryRun ? "dryRun" : "async", "true");
    return q;
  };
  const send = async (dryRun) => {
    const chosen = file.files?.[0];
    if (!chosen) throw new Error("Choose an .ics file first.");
    return api("POST", `/v1/imports?${query(dryRun)}`, await chosen.text(), "text/calendar");
  };
  /** Shows an asynchronous import's progress until it ends; answers its last state. */
  const bar = h("progress", { id: "import-progress", max: "1", value: "0" });
  const line = h("p", { id: "import-progress-text", class: "muted" }, "Reading the file…");
  const follow = async (started) => {
    fill(out, h("h2", {}, "Importing"), bar, line);
    let s = started;
    for (;;) {
      const p = s.progress;
      if (p.chunksTotal > 0) {
        bar.max = String(p.chunksTotal);
        bar.value = String(p.chunksDone);
        line.textContent =
          `Chunk ${p.chunksDone} of ${p.chunksTotal}: ${p.changesDone} of ${p.changesTotal} changes written ` +
          `(${s.created} created, ${s.updated} updated, ${s.cancelled} cancelled; ${s.events} events read).`;
      } else if (s.events > 0) {
        line.textContent = `${s.events} events read; comparing with the stored schedules…`;
      }
      if (s.status !== "running") return s;
      await new Promise((resolve) => setTimeout(resolve, 500));
      s = await api("GET", `/v1/imports/${s.id}`);
    }
  };
  const form = h(
    "form",
    {
      onsubmit: async (event) => {
        event.preventDefault();
        await act(event.submitter, null, async () => {
          const preview = await send(true);
          const confirm = h(
            "button",
            {
              type: "button",
              onclick: (e) =>
                act(e.target, null, async () => {
                  const s = await follow(await send(false));
                  if (s.status === "failed") throw new Error(`The import failed: ${s.error}`);
                  fill(
                    out,
                    h("h2", {}, "Imported"),
                    bar,
                    line,
                    h(
                      "p",
                      { id: "import-summary" },
                      `Source ${s.source}: ${s.created} created, ${s.updated} updated, ${s.unchanged} unchanged, ${s.cancelled} cancelled, ${s.skipped} skipped.`,
                    ),
                    s.details?.warnings.length
                      ? h(
                          "ul",
                          {},
                          s.details.warnings.map((w) => h("li", {}, w)),
                        )
                      : null,
                    h(
                      "p",
                      {},
                      h(
                        "a",
                        { href: `#/schedules?source=${encodeURIComponent(s.source)}` },
                        "See its schedules",
                      ),
                    ),
                  );
                  flash("Calendar imported.");
                }),
            },
            "Confirm import",
          );
          fill(
            out,
            h("h2", {}, "Dry run"),
            h(
              "p",
              { id: "import-preview" },
              `${preview.events} events, ${preview.deliveries.length} deliveries between `,
              when(preview.from),
              " and ",
              when(preview.to),
              `; ${preview.skipped.length} skipped.`,
            ),
            preview.warnings.length
              ? h(
                  "ul",
                  {},
                  preview.warnings.map((w) => h("li", {}, w)),
                )
              : null,
            preview.skipped.length
              ? table(
                  ["Event", "Why skipped"],
                  preview.skipped.map((s) =>
                    h(
                      "tr",
                      {},
                      h("td", {}, s.uid ?? "—"),
                      h("td", {}, s.reason ?? JSON.stringify(s)),
                    ),
                  ),
                )
              : null,
            table(
              ["Event", "Reminder", "Occurrence", "Due (your time)"],
              preview.deliveries
                .slice(0, 200)
                .map((d) =>
                  h(
                    "tr",
                    {},
                    h("td", {}, d.summary ?? d.uid),
                    h("td", {}, d.reminderKey ?? "—"),
                    h("td", {}, d.occurrenceAt),
                    h("td", {}, when(d.dueAt)),
                  ),
                ),
            ),
            h("p", {}, confirm),
          );
        });
      },
    },
    h("h1", {}, "Calendar import"),
    h(
      "p",
      { class: "muted" },
      "Upload an iCalendar file, preview the deliveries it plans (nothing is stored), then confirm. Importing the same file again changes nothing.",
    ),
    h(
      "div",
      { class: "row" },
      field("Calendar file (.ics)", file),
      field("Source name", source),
      field("Reminder offsets (comma-separated)", remind),
      field("Use the file's alarms", useAlarms, "inline"),
    ),
    h(
      "div",
      { class: "row" },
      field("Channel", channel),
      field("Webhook URL (channel webhook)", target),
      field("Zone of floating times", tzid),
    ),
    h("p", {}, h("button", { type: "submit" }, "Preview (dry run)")),
    out,
  );
  show(form);
}

// --- rate limits and circuits --------------------------------------------------------

async function renderLimits() {
  const [limits, circuits] = await Promise.all([
    api("GET", "/v1/rate-limits"),
    api("GET", "/v1/circuits").catch(() => null),
  ]);
  show(
    h("h1", {}, "Rate limits & circuits"),
    h("h2", {}, "Rate limits"),
    itemTable(
      limits.items,
      "No rate limit set.",
      ["Key", "Per second", "Burst", "Concurrency", "Tokens now", "Updated"],
      (l) => [
        h("td", {}, h("code", {}, l.key)),
        h("td", { class: "num" }, String(l.ratePerSecond)),
        h("td", { class: "num" }, String(l.burst)),
        h("td", { class: "num" }, l.concurrency === null ? "—" : String(l.concurrency)),
        h("td", { class: "num" }, l.tokens.toFixed(1)),
        h("td", {}, when(l.updatedAt)),
      ],
    ),
    h("h2", {}, "Circuits"),
    circuits === null
      ? h("p", { class: "muted" }, "The circuits could not be read.")
      : itemTable(
          circuits.items,
          "Every circuit is closed.",
          ["Host", "State", "Failures in a row", "Next probe", "Opened"],
          (c) => [
            h("td", {}, h("code", {}, c.host)),
            h("td", {}, stateBadge(c.state)),
            h("td", { class: "num" }, String(c.failures)),
            h("td", {}, when(c.retryAt)),
            h("td", {}, when(c.openedAt)),
          ],
        ),
  );
}

// --- router --------------------------------------------------------------------------

async function route() {
  clearInterval(pageTimer);
  if (!session?.authenticated) {
    renderLogin();
    return;
  }
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, queryText] = hash.split("?");
  const params = new URLSearchParams(queryText ?? "");
  const [page, id] = (path || "overview").split("/");
  renderNav(page);
  renderWho();
  document.title = `${PAGES.find(([p]) => p === page)?.[1] ?? "punctual"} · punctual`;
  try {
    if (page === "overview") await renderOverview();
    else if (page === "schedules" && id === "new") renderNewSchedule();
    else if (page === "schedules" && id) await renderSchedule(decodeURIComponent(id));
    else if (page === "schedules") await renderSchedules(params);
    else if (page === "deliveries" && id) await renderDelivery(decodeURIComponent(id));
    else if (page === "deliveries") await renderDeliveries(params);
    else if (page === "dead") await renderDead(params);
    else if (page === "recipients") await renderRecipients(params);
    else if (page === "import") renderImport();
    else if (page === "limits") await renderLimits();
    else show(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/overview" }, "Overview")));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return;
    show(h("h1", {}, "Could not load this page"), h("p", {}, explain(err)));
  }
  document.getElementById("main").focus({ preventScroll: true });
}

async function boot() {
  try {
    session = await api("GET", "/ui/session");
  } catch (err) {
    session = null;
    flash(explain(err), true);
  }
  route();
}

window.addEventListener("hashchange", () => {
  flash(nextFlash ?? "");
  nextFlash = null;
  route();
});
boot();
