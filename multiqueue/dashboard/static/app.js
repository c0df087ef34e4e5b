// The multiqueue dashboard: one server-sent event stream (a snapshot, then batches of changes) kept in memory,
// and a Jobs table that draws only the rows in view, so 10,000 Jobs cost what 30 do.
"use strict";

const ROW_HEIGHT = 28;
const OVERSCAN = 10; // rows drawn beyond the view on each side, so scrolling shows no gaps
const FINISHED = new Set(["Complete", "Failed", "Finished"]);

const state = {
  jobs: new Map(), // uid -> Job line
  workers: [],
  chart: [],
  manager: null,
  shown: [], // the Jobs that pass the filters, in table order
  selected: null, // the uid in the detail panel
  detailShown: null, // the line of that Job whose Events the panel shows
  logs: null, // the AbortController of the log being streamed
  changes: 0, // batches applied since the page loaded (tests read it)
  lastChangeAt: 0,
};
window.dashboard = state;

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const child of children) node.append(child);
  return node;
}

// kubectl's way of showing an age: 45s, 3m12s, 5h4m, 3d4h, 400d.
function age(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 ? `${m}m${s % 60}s` : `${m}m`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (d < 8) return h % 24 ? `${d}d${h % 24}h` : `${d}d`;
  return `${d}d`;
}

const since = (iso) => (iso ? (Date.now() - Date.parse(iso)) / 1000 : NaN);

// --- the stream ------------------------------------------------------------------------------------------------

function connect() {
  const stream = new EventSource("/api/stream");
  const badge = $("connection");
  stream.addEventListener("snapshot", (message) => {
    const data = JSON.parse(message.data);
    state.manager = data.manager;
    state.jobs = new Map(data.jobs.map((j) => [j.uid, j]));
    state.workers = data.workers;
    state.chart = data.chart;
    badge.dataset.state = "live";
    badge.textContent = "live";
    changed({ jobs: true, workers: true, chart: true });
  });
  stream.addEventListener("changes", (message) => {
    const data = JSON.parse(message.data);
    for (const job of data.jobs || []) state.jobs.set(job.uid, job);
    for (const uid of data.removed || []) state.jobs.delete(uid);
    if (data.workers) state.workers = data.workers;
    if (data.chart) {
      state.chart.push(data.chart);
      if (state.chart.length > 120) state.chart.shift();
    }
    changed({ jobs: Boolean(data.jobs || data.removed), workers: Boolean(data.workers), chart: Boolean(data.chart) });
  });
  stream.onerror = () => {
    badge.dataset.state = "reconnecting";
    badge.textContent = "reconnecting";
  };
}

let pending = null;
function changed(what) {
  state.changes += 1;
  state.lastChangeAt = Date.now();
  pending = pending ? { jobs: pending.jobs || what.jobs, workers: pending.workers || what.workers, chart: pending.chart || what.chart } : what;
  requestAnimationFrame(() => {
    if (!pending) return;
    const now = pending;
    pending = null;
    if (now.jobs) { updateFilters(); applyFilters(); renderTotals(); }
    if (now.workers) renderWorkers();
    if (now.chart) renderCharts();
    if (state.selected) {
      renderDetailFields();
      // A new line for the open Job (its state or reason moved): its Events have news too.
      const job = state.jobs.get(state.selected);
      if (job && job !== state.detailShown) { loadEvents(); loadExplanation(); }
    }
  });
}

// --- header ----------------------------------------------------------------------------------------------------

function renderTotals() {
  const counts = {};
  for (const job of state.jobs.values()) counts[job.state] = (counts[job.state] || 0) + 1;
  const parts = [el("b", { text: `${state.jobs.size} Jobs` })];
  for (const name of ["Waiting", "Running", "Suspended", "Complete", "Failed", "Finished"]) {
    if (counts[name]) parts.push(el("span", { text: ` · ${counts[name]} ${name.toLowerCase()}`, "data-total": name }));
  }
  $("totals").replaceChildren(...parts);
  if (state.manager) $("manager").textContent = `manager ${state.manager.name} · ${state.manager.managedBy}`;
}

// --- workers ---------------------------------------------------------------------------------------------------

function renderWorkers() {
  const rows = state.workers.map((w) => {
    const missing = w.missingKinds && w.missingKinds.length ? ` (does not serve ${w.missingKinds.join(", ")})` : "";
    const health = w.healthy ? `Connected${missing}` : `${w.reason}${w.lost ? " (lost)" : ""}`;
    const capacity = Object.entries(w.capacity).map(([name, c]) => {
      const share = c.total > 0 ? Math.min(1, c.used / c.total) : 0;
      const fill = el("i");
      fill.style.width = `${(share * 100).toFixed(0)}%`;
      const bar = el("span", { className: "bar" }, fill);
      return el("div", {}, bar, `${name} ${formatAmount(name, c.used)}/${formatAmount(name, c.total)}`);
    });
    const labels = Object.entries(w.labels).map(([k, v]) => el("span", { className: "label", text: `${k}=${v}` }));
    const row = el(
      "tr",
      { "data-worker-name": w.name, "data-healthy": String(w.healthy) },
      el("td", { text: w.name }),
      el("td", { className: "health", "data-healthy": String(w.healthy), text: health + (w.draining ? ", draining" : "") }),
      el("td", { text: String(w.running) }),
      el("td", {}, ...(capacity.length ? capacity : ["-"])),
      el("td", {}, ...(labels.length ? labels : ["-"])),
      el("td", { className: "contact", "data-time": w.lastContact || "", text: w.lastContact ? `${age(since(w.lastContact))} ago` : "never" }),
    );
    return row;
  });
  $("workers").tBodies[0].replaceChildren(...rows);
}

function formatAmount(resource, amount) {
  if (resource === "memory" || resource.endsWith("storage")) {
    const gi = amount / 2 ** 30;
    return gi >= 1 ? `${+gi.toFixed(1)}Gi` : `${+(amount / 2 ** 20).toFixed(0)}Mi`;
  }
  return `${+Number(amount).toFixed(2)}`;
}

// --- chart -----------------------------------------------------------------------------------------------------

function renderCharts() {
  const points = state.chart;
  const rates = [];
  for (let i = 1; i < points.length; i++) {
    const dt = points[i].time - points[i - 1].time || 1;
    rates.push({
      time: points[i].time,
      dispatched: Math.max(0, (points[i].dispatched - points[i - 1].dispatched) / dt),
      finished: Math.max(0, (points[i].finished - points[i - 1].finished) / dt),
    });
  }
  if (points.length > 1) {
    const every = (points[points.length - 1].time - points[0].time) / (points.length - 1);
    const span = points[points.length - 1].time - points[0].time;
    $("chart-period").textContent = `(the last ${age(span)}, a point every ${age(every)})`;
  }
  draw($("throughput"), rates, [["dispatched", "--run"], ["finished", "--ok"]]);
  draw($("latency"), points, [["latencyP50", "--wait"], ["latencyP99", "--warn"]]);
}

function draw(canvas, points, series) {
  const g = canvas.getContext("2d");
  const css = getComputedStyle(document.documentElement);
  const w = canvas.width, h = canvas.height, left = 40, bottom = h - 16;
  g.clearRect(0, 0, w, h);
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = css.getPropertyValue("--muted");
  let top = 0;
  for (const p of points) for (const [key] of series) if (p[key] != null) top = Math.max(top, p[key]);
  top = top > 0 ? niceCeiling(top) : 1;
  g.strokeStyle = css.getPropertyValue("--line");
  for (const f of [0, 0.5, 1]) {
    const y = bottom - f * (bottom - 8);
    g.beginPath(); g.moveTo(left, y); g.lineTo(w, y); g.stroke();
    g.fillText(String(+(top * f).toPrecision(3)), 2, y + 4);
  }
  if (points.length === 0) {
    g.fillText("no points yet", left + 10, h / 2);
    return;
  }
  const t0 = points[0].time, t1 = Math.max(points[points.length - 1].time, t0 + 1);
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (w - left - 4);
  for (const [key, color] of series) {
    g.strokeStyle = css.getPropertyValue(color);
    g.lineWidth = 2;
    g.beginPath();
    let started = false;
    for (const p of points) {
      if (p[key] == null) continue;
      const y = bottom - (p[key] / top) * (bottom - 8);
      if (started) g.lineTo(x(p.time), y); else { g.moveTo(x(p.time), y); started = true; }
    }
    g.stroke();
    g.lineWidth = 1;
    g.fillStyle = g.strokeStyle;
    for (const p of points) {
      if (p[key] == null) continue;
      g.beginPath();
      g.arc(x(p.time), bottom - (p[key] / top) * (bottom - 8), 2.5, 0, 2 * Math.PI);
      g.fill();
    }
  }
}

function niceCeiling(value) {
  const step = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 5, 10]) if (value <= m * step) return m * step;
  return 10 * step;
}

// --- jobs ------------------------------------------------------------------------------------------------------

const filters = { search: "", namespace: "", worker: "", state: "", kind: "" };

function updateFilters() {
  const values = { namespace: new Set(), worker: new Set(), state: new Set(), kind: new Set() };
  for (const job of state.jobs.values()) {
    values.namespace.add(job.namespace);
    if (job.worker) values.worker.add(job.worker);
    values.state.add(job.state);
    values.kind.add(job.kind);
  }
  for (const w of state.workers) values.worker.add(w.name);
  for (const [name, found] of Object.entries(values)) {
    const select = $(`filter-${name}`);
    const have = new Set([...select.options].map((o) => o.value));
    for (const value of [...found].sort()) {
      if (!have.has(value)) select.append(el("option", { value, text: value }));
    }
  }
}

function applyFilters() {
  const needle = filters.search.toLowerCase();
  const shown = [];
  for (const job of state.jobs.values()) {
    if (needle && !job.name.toLowerCase().includes(needle)) continue;
    if (filters.namespace && job.namespace !== filters.namespace) continue;
    if (filters.worker && job.worker !== filters.worker) continue;
    if (filters.state && job.state !== filters.state) continue;
    if (filters.kind && job.kind !== filters.kind) continue;
    shown.push(job);
  }
  // Newest first, as people look for what they just submitted.
  shown.sort((a, b) => (a.created < b.created ? 1 : a.created > b.created ? -1 : a.name.localeCompare(b.name)));
  state.shown = shown;
  $("shown").textContent = shown.length === state.jobs.size ? `(${shown.length})` : `(${shown.length} of ${state.jobs.size})`;
  $("jobs-spacer").style.height = `${shown.length * ROW_HEIGHT}px`;
  renderRows();
}

function renderRows() {
  const box = $("jobs");
  const first = Math.max(0, Math.floor(box.scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(state.shown.length, Math.ceil((box.scrollTop + box.clientHeight) / ROW_HEIGHT) + OVERSCAN);
  const rows = [];
  for (let i = first; i < last; i++) {
    const job = state.shown[i];
    const row = el(
      "div",
      { className: "row", "data-uid": job.uid, "data-job": `${job.namespace}/${job.name}`, "data-state": job.state, "data-worker": job.worker, title: job.message },
      el("span", { text: job.kind }),
      el("span", { text: job.namespace }),
      el("span", { text: job.name }),
      el("span", { text: job.worker || "-" }),
      el("span", { className: "state", "data-state": job.state, text: job.state }),
      el("span", { text: job.completions }),
      el("span", { className: "reason", text: job.reason || "-" }),
      el("span", { className: "age", text: age(since(job.created)) }),
    );
    row.style.top = `${i * ROW_HEIGHT}px`;
    row.addEventListener("click", () => openDetail(job.uid));
    rows.push(row);
  }
  $("jobs-spacer").replaceChildren(...rows);
}

// --- one Job ---------------------------------------------------------------------------------------------------

function openDetail(uid) {
  stopLogs();
  state.selected = uid;
  $("detail").hidden = false;
  $("detail-logs").textContent = "";
  renderExplanation(null, "");
  renderDetailFields();
  loadEvents();
  loadExplanation();
}

function renderDetailFields() {
  const job = state.jobs.get(state.selected);
  if (!job) return;
  $("detail-title").textContent = `${job.kind} ${job.namespace}/${job.name}`;
  const fields = [["State", job.state], ["Worker", job.worker || "-"], ["Completions", job.completions], ["Reason", job.reason || "-"], ["Message", job.message || "-"], ["Created", job.created], ["UID", job.uid]];
  $("detail-fields").replaceChildren(...fields.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v, "data-field": k })]));
}

async function loadEvents() {
  const job = state.jobs.get(state.selected);
  if (!job) return;
  state.detailShown = job;
  const body = $("detail-events").tBodies[0];
  const answer = await fetch(`/api/events?uid=${encodeURIComponent(job.uid)}&namespace=${encodeURIComponent(job.namespace)}`);
  const events = answer.ok ? await answer.json() : [];
  body.replaceChildren(
    ...(events.length
      ? events.map((e) => el("tr", { "data-reason": e.reason }, el("td", { text: e.time }), el("td", { text: e.type }), el("td", { text: e.reason }), el("td", { text: e.from }), el("td", { text: `${e.message}${e.count > 1 ? ` (×${e.count})` : ""}` })))
      : [el("tr", {}, el("td", { colSpan: 5, text: answer.ok ? "no Events" : `cannot list Events (${answer.status})` }))]),
  );
}

// What `multiqueue explain -o json` shows of the Job: what it asks, each worker's verdict from each placement
// filter, the scores and the decision. An answer that is not the open Job's any more is dropped.
async function loadExplanation() {
  const job = state.jobs.get(state.selected);
  if (!job) return;
  const uid = job.uid;
  const answer = await fetch(`/api/explain?kind=${encodeURIComponent(job.kind)}&namespace=${encodeURIComponent(job.namespace)}&name=${encodeURIComponent(job.name)}`);
  const shown = answer.ok ? await answer.json() : null;
  const problem = answer.ok ? "" : (await answer.text()).trim() || `cannot explain (${answer.status})`;
  if (state.selected !== uid) return;
  renderExplanation(shown, problem);
}

function renderExplanation(shown, problem) {
  const line = $("detail-explain-line");
  const table = $("detail-explain");
  line.dataset.error = String(!shown && Boolean(problem));
  if (!shown) {
    line.textContent = problem;
    $("detail-explain-facts").replaceChildren();
    table.tHead.replaceChildren();
    table.tBodies[0].replaceChildren();
    return;
  }
  const asks = Object.entries(shown.demand).sort().map(([r, amount]) => `${r} ${formatAmount(r, amount)}`).join(", ") || "nothing counted";
  const facts = [["Asks", asks], ["Pinned to", shown.pinned], ["Selector", shown.selector], ["Affinity", shown.affinity], ["Policy", shown.policy]];
  $("detail-explain-facts").replaceChildren(
    ...facts.filter(([, v]) => v).flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v, "data-explain": k })]),
  );
  line.textContent = shown.decision;
  const filters = [];
  for (const w of shown.workers) for (const v of w.verdicts) if (!filters.includes(v.filter)) filters.push(v.filter);
  table.tHead.replaceChildren(
    el("tr", {}, el("th", { text: "Worker" }), el("th", { text: "Active" }), ...filters.map((f) => el("th", { text: f })), el("th", { text: "Affinity" }), el("th", { text: "Policy" }), el("th", { text: "Chosen" })),
  );
  const rows = shown.workers.map((w) => {
    const cells = filters.map((name) => {
      const v = w.verdicts.find((x) => x.filter === name);
      if (!v) return el("td", { text: "-" });
      return el("td", { "data-filter": name, "data-passes": String(v.passes), "data-reason": v.reason, title: v.reason, text: v.passes ? "passes" : v.message });
    });
    return el(
      "tr",
      { "data-explain-worker": w.name, "data-passes": String(w.passes), "data-chosen": String(w.chosen) },
      el("td", { text: w.name }),
      el("td", { text: w.active }),
      ...cells,
      el("td", { text: w.affinityScore == null ? "-" : String(w.affinityScore) }),
      el("td", { text: w.policyScore == null ? "-" : String(+w.policyScore.toFixed(3)) }),
      el("td", { text: w.chosen ? "yes" : "" }),
    );
  });
  table.tBodies[0].replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colSpan: 4, text: "no workers" }))]));
}

async function streamLogs() {
  const job = state.jobs.get(state.selected);
  if (!job) return;
  stopLogs();
  const out = $("detail-logs");
  out.textContent = "";
  const controller = new AbortController();
  state.logs = controller;
  try {
    const answer = await fetch(`/api/logs?kind=${encodeURIComponent(job.kind)}&namespace=${encodeURIComponent(job.namespace)}&name=${encodeURIComponent(job.name)}`, { signal: controller.signal });
    const reader = answer.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      out.textContent += decoder.decode(value, { stream: true });
      out.scrollTop = out.scrollHeight;
    }
    out.dataset.ended = "true";
  } catch (error) {
    if (error.name !== "AbortError") out.textContent += `\n(the log stopped: ${error.message})`;
  }
}

function stopLogs() {
  if (state.logs) state.logs.abort();
  state.logs = null;
  delete $("detail-logs").dataset.ended;
}

// --- wiring ----------------------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("jobs").addEventListener("scroll", () => requestAnimationFrame(renderRows));
  window.addEventListener("resize", () => requestAnimationFrame(renderRows));
  $("search").addEventListener("input", (e) => { filters.search = e.target.value; applyFilters(); });
  for (const name of ["namespace", "worker", "state", "kind"]) {
    $(`filter-${name}`).addEventListener("change", (e) => { filters[name] = e.target.value; applyFilters(); });
  }
  $("detail-close").addEventListener("click", () => { stopLogs(); state.selected = null; $("detail").hidden = true; });
  $("detail-logs-start").addEventListener("click", streamLogs);
  $("detail-explain-refresh").addEventListener("click", loadExplanation);
  // Ages and last contacts move with the clock, not with changes: redraw what is in view each second.
  setInterval(() => {
    renderRows();
    for (const cell of document.querySelectorAll("#workers .contact[data-time]")) {
      if (cell.dataset.time) cell.textContent = `${age(since(cell.dataset.time))} ago`;
    }
  }, 1000);
  renderCharts();
  connect();
});
