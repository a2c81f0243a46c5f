// dashboard.js - the operator's view of a live sale. Polls dashboard.json
// (same origin, nothing else) every second and keeps the last minutes of
// samples in memory for the charts: rates are differences of the node's
// counters between two samples, so every process's work is in them. The
// first poll asks for the node's own history (?history=1: a sample a
// second for the last five minutes, kept by the server), so a page opened
// mid-sale draws the minutes before it was opened.
'use strict';

const POLL_MS = 1000;
const WINDOW_S = 300; // charts: the last five minutes
const LAT_WINDOW_S = 10; // latency percentiles: the last ten seconds
const REASON_COLORS = {
  sold_out: '#8b949e', limit_exceeded: '#d29922', not_started: '#a371f7', ended: '#6e7681',
  closed: '#db6d28', unknown_activity: '#f778ba', rate_limited: '#f85149', busy: '#ff7b72',
  unauthorized: '#e3b341', bad_request: '#bc8cff', unavailable: '#ff4d4d', other: '#c9d1d9',
};
const history = []; // {t: seconds, d: document}
const cards = new Map(); // activity id -> its card's elements

function $(id) { return document.getElementById(id); }
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
// Whole numbers with thousands separators; '–' when unknown.
function fmt(n) {
  if (n === null || n === undefined || Number.isNaN(n) || n < 0) return '–';
  return Math.round(n).toLocaleString('en-US');
}
function fmtRate(x) {
  if (x === null || x === undefined) return '–';
  return x < 10 && x > 0 ? x.toFixed(1) : fmt(x);
}
function fmtSecs(s) {
  if (s === null || s === undefined) return '–';
  if (s < 0.001) return Math.round(s * 1e6) + ' µs';
  if (s < 1) return (s * 1000).toFixed(s < 0.01 ? 2 : 1) + ' ms';
  return s.toFixed(2) + ' s';
}
function fmtAgo(ms, now) {
  if (!ms) return 'never';
  const s = Math.max(0, Math.round((now - ms) / 1000));
  return s < 60 ? s + ' s ago' : s < 3600 ? Math.round(s / 60) + ' min ago' : Math.round(s / 3600) + ' h ago';
}

// Quantile q of a histogram given per bucket (last bucket: above the last
// bound), interpolated inside the bucket; null when empty.
function quantile(le, counts, q) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total <= 0) return null;
  let want = q * total, lo = 0;
  for (let i = 0; i < counts.length; i++) {
    const hi = i < le.length ? le[i] : le[le.length - 1];
    if (want <= counts[i] && counts[i] > 0) return lo + (hi - lo) * (want / counts[i]);
    want -= counts[i];
    lo = hi;
  }
  return le[le.length - 1];
}
function histSince(key, seconds) {
  const full = history.filter((h) => h.d.totals[key]); // the server's history has no histograms
  if (full.length < 2) return null;
  const last = full[full.length - 1];
  let first = full[0];
  for (const h of full) if (last.t - h.t <= seconds) { first = h; break; }
  if (first === last) first = full[full.length - 2];
  const a = first.d.totals[key], b = last.d.totals[key];
  return { le: b.le, counts: b.counts.map((c, i) => Math.max(0, c - (a.counts[i] || 0))) };
}

// Per-second rates of a counter read by get(doc) between consecutive samples.
function rates(get) {
  const pts = [];
  for (let i = 1; i < history.length; i++) {
    const a = get(history[i - 1].d), b = get(history[i].d), dt = history[i].t - history[i - 1].t;
    if (a == null || b == null || dt <= 0) continue; // null or undefined: not counted then
    pts.push([history[i].t, Math.max(0, b - a) / dt]);
  }
  return pts;
}
function lastRate(get) {
  const p = rates(get);
  return p.length ? p[p.length - 1][1] : null;
}
function actOf(d, id) { return d.activities.find((a) => a.id === id) || null; }

// ---- charts: plain canvas, no library -----------------------------------
function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}
function drawChart(canvas, series, now) {
  // what is drawn, for a reader of the DOM (the browser test): points in
  // the window, the seconds they span, the largest value
  let npts = 0, tmin = Infinity, tmax = -Infinity, vmax = 0;
  for (const s of series) for (const [t, v] of s.pts) if (t >= now - WINDOW_S) {
    npts++; tmin = Math.min(tmin, t); tmax = Math.max(tmax, t); vmax = Math.max(vmax, v);
  }
  canvas.dataset.points = npts;
  canvas.dataset.span = npts ? Math.round(tmax - tmin) : 0;
  canvas.dataset.max = Math.round(vmax);
  const dpr = window.devicePixelRatio || 1, w = canvas.clientWidth || 400, h = canvas.clientHeight || 150;
  canvas.width = w * dpr; canvas.height = h * dpr;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  const L = 46, R = 16, T = 6, B = 18, pw = w - L - R, ph = h - T - B, t0 = now - WINDOW_S;
  let max = 0;
  for (const s of series) for (const [, v] of s.pts) max = Math.max(max, v);
  max = niceMax(max * 1.1);
  g.font = '11px "DejaVu Sans", Arial, sans-serif';
  g.strokeStyle = '#263040'; g.fillStyle = '#8593a3'; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = T + ph - (ph * i) / 4;
    g.beginPath(); g.moveTo(L, y); g.lineTo(L + pw, y); g.stroke();
    g.textAlign = 'right'; g.textBaseline = 'middle';
    const tick = (max * i) / 4;
    g.fillText(tick > 0 && tick < 1 ? tick.toFixed(2) : fmtRate(tick), L - 6, y);
  }
  g.textAlign = 'center'; g.textBaseline = 'top';
  for (let m = 0; m <= WINDOW_S / 60; m++) {
    const x = L + pw - (pw * m * 60) / WINDOW_S;
    g.fillText(m === 0 ? 'now' : '−' + m + 'm', x, T + ph + 4);
  }
  for (const s of series) {
    g.strokeStyle = s.color; g.lineWidth = 2; g.beginPath();
    let started = false;
    for (const [t, v] of s.pts) {
      if (t < t0) continue;
      const x = L + (pw * (t - t0)) / WINDOW_S, y = T + ph - (ph * v) / max;
      if (!started) { g.moveTo(x, y); started = true; } else g.lineTo(x, y);
    }
    g.stroke();
  }
}

// ---- the page ------------------------------------------------------------
function tile(parent, key, value, note) {
  const t = el('div', 'tile');
  t.append(el('div', 'k', key));
  const v = el('div', 'v', value);
  if (note) { v.append(' '); v.append(el('small', '', note)); }
  t.append(v);
  parent.append(t);
}
function pill(parent, label, state, title) {
  const p = el('span', 'pill');
  p.append(el('span', 'dot ' + state));
  p.append(label);
  if (title) p.title = title;
  parent.append(p);
}

function renderHealth(d) {
  const h = $('health');
  h.textContent = '';
  const r = d.health.redis, db = d.health.database;
  pill(h, 'Redis', r.ok ? 'ok' : 'bad', r.error);
  pill(h, 'Database', db.ok === null ? '' : db.ok ? 'ok' : 'bad', db.error || (db.ok === null ? 'no worker on this node' : ''));
  const httpP = d.processes.filter((p) => p.kind === 'http'), workerP = d.processes.filter((p) => p.kind === 'worker');
  const up = httpP.filter((p) => p.alive).length;
  pill(h, 'HTTP processes ' + up + '/' + httpP.length, up === httpP.length ? 'ok' : up ? 'warn' : 'bad');
  if (workerP.length) pill(h, 'Order worker', workerP[0].alive ? 'ok' : 'bad');
  else pill(h, 'no order worker', 'warn');
  $('updated').textContent = 'updated ' + new Date(d.now_ms).toLocaleTimeString('en-GB') + ' · served by pid ' + d.served_by;
}

function renderNode(d) {
  const n = $('node'), t = d.totals, w = d.worker;
  n.textContent = '';
  tile(n, 'Admitted', fmt(t.admissions), 'purchases' + (t.replays ? ', ' + fmt(t.replays) + ' replays apart' : ''));
  tile(n, 'Admissions/s', fmtRate(lastRate((x) => x.totals.admissions)));
  tile(n, 'Refusals/s', fmtRate(lastRate((x) => Object.values(x.totals.refusals).reduce((a, b) => a + b, 0))));
  const lat = histSince('purchase_latency', LAT_WINDOW_S), rtt = histSince('redis_rtt', LAT_WINDOW_S);
  tile(n, 'Purchase p50 / p99', lat ? fmtSecs(quantile(lat.le, lat.counts, 0.5)) : '–',
       lat ? '/ ' + fmtSecs(quantile(lat.le, lat.counts, 0.99)) : '');
  tile(n, 'Redis round trip', rtt ? fmtSecs(quantile(rtt.le, rtt.counts, 0.5)) : '–',
       rtt ? 'p99 ' + fmtSecs(quantile(rtt.le, rtt.counts, 0.99)) : '');
  tile(n, 'In flight', fmt(t.inflight));
  const backlog = d.activities.reduce((a, x) => a + Math.max(0, x.backlog), 0);
  const dlq = d.activities.reduce((a, x) => a + x.dead_letters, 0);
  tile(n, 'Order backlog', fmt(backlog), 'not in DB yet');
  tile(n, 'Dead letters', fmt(dlq));
  if (w) {
    tile(n, 'Persisted', fmt(w.persisted), 'orders');
    tile(n, 'Reconcile', w.reconcile_last_s ? fmt(w.reconcile_last_drift) : '–',
         w.reconcile_last_s ? 'differences, ' + fmtAgo(w.reconcile_last_s * 1000, d.now_ms) : 'not run yet');
  }
}

// A tile per webhook endpoint: delivered, failed attempts, retrying or
// paused, and the lag of the oldest event it has not acknowledged.
function renderWebhooks(d) {
  const box = $('webhooks');
  box.textContent = '';
  for (const h of d.webhooks || []) {
    const state = h.paused ? 'paused' : h.retrying ? 'retrying' : 'ok';
    tile(box, 'Webhook ' + h.endpoint, fmt(h.delivered),
         'delivered, ' + fmt(h.failed) + ' failed' + (h.dead ? ', ' + fmt(h.dead) + ' dead' : '') +
         ', ' + state + ', lag ' + (h.lag_s > 0 ? fmtSecs(h.lag_s) : '0'));
    box.lastChild.id = 'webhook-' + h.endpoint.replace(/[^A-Za-z0-9_.-]/g, '_');
  }
}

function stat(grid, key, id) {
  const s = el('div', 'stat');
  s.append(el('div', 'k', key));
  const v = el('div', 'v', '–');
  v.id = id;
  s.append(v);
  grid.append(s);
  return v;
}

function makeCard(a) {
  const c = el('div', 'act');
  c.id = 'act-' + a.id;
  const h = el('h2');
  const title = el('span', 'id', '#' + a.id);
  title.id = 'act-' + a.id + '-id';
  const name = el('span', 'name', a.name);
  const badge = el('span', 'badge');
  h.append(title, name, badge);
  c.append(h);
  const stock = el('div', 'stock'), bar = el('div', 'bar'), fill = el('div', 'fill'), label = el('div', 'label');
  bar.append(fill, label); stock.append(bar); c.append(stock);
  const grid = el('div', 'grid');
  const p = 'act-' + a.id + '-';
  const v = {
    remaining: stat(grid, 'Stock remaining', p + 'remaining'),
    admitted: stat(grid, 'Units admitted', p + 'admitted'),
    rate: stat(grid, 'Admissions/s', p + 'rate'),
    released: stat(grid, 'Released', p + 'released'),
    backlog: stat(grid, 'Order backlog', p + 'backlog'),
    dlq: stat(grid, 'Dead letters', p + 'dlq'),
    created: stat(grid, 'Orders created', p + 'created'),
    paid: stat(grid, 'Orders paid', p + 'paid'),
    cancelled: stat(grid, 'Orders cancelled', p + 'cancelled'),
    dbstock: stat(grid, 'DB stock', p + 'dbstock'),
    reconcile: stat(grid, 'Last reconcile', p + 'reconcile'),
    registered: stat(grid, 'Registered', p + 'registered'),
  };
  c.append(grid);
  // The waiting room (docs/waiting-room.md), for an activity that has one.
  const wr = el('div', 'wr');
  wr.id = p + 'wr';
  wr.hidden = true;
  c.append(wr);
  const charts = el('div', 'charts');
  const mk = (title) => {
    const box = el('div', 'chart'), t = el('div', 't'), cv = el('canvas'), lg = el('div', 'legend');
    t.append(el('span', '', title), el('span', '', 'last 5 min'));
    box.append(t, cv, lg);
    charts.append(box);
    return { cv, lg };
  };
  const adm = mk('Admissions/s'), ref = mk('Refusals/s by reason');
  adm.cv.id = p + 'adm-chart';
  ref.cv.id = p + 'ref-chart';
  c.append(charts);
  return { c, badge, name, fill, label, v, wr, adm, ref };
}

// One line: the queue as the newest Redis reply showed it, and the passes
// per second handed out over the last sample, all processes.
function renderWaitingRoom(card, a) {
  const w = a.waiting_room;
  card.wr.hidden = !w;
  if (!w) return;
  const p = 'act-' + a.id + '-wr-';
  const part = (key, id, value) => {
    const s = el('span', 'part');
    s.append(key + ' ');
    const b = el('b', '', value);
    b.id = p + id;
    s.append(b);
    return s;
  };
  const handed = lastRate((x) => { const y = actOf(x, a.id); return y && y.waiting_room ? y.waiting_room.handed_out_total : null; });
  card.wr.textContent = '';
  card.wr.append(el('span', 'k', 'Waiting room'),
    part('in queue', 'queue', fmt(w.queue_length)),
    part('places with a pass', 'issued', fmt(w.passes_issued)),
    part('pace', 'pace', fmt(w.passes_per_s) + '/s'),
    part('handed out/s', 'rate', fmtRate(handed)),
    part('spent', 'spent', fmt(w.spent_total)),
    part('expired', 'expired', fmt(w.expired_total)));
}

function renderActivity(card, a, d) {
  card.badge.textContent = a.state;
  card.badge.className = 'badge ' + a.state;
  card.name.textContent = a.name + (a.segments > 1 ? ' · ' + a.segments + ' segments' : '');
  const pct = a.stock_initial > 0 ? (100 * a.stock_remaining) / a.stock_initial : 0;
  card.fill.style.width = pct.toFixed(2) + '%';
  card.fill.className = 'fill' + (pct <= 0 ? ' empty' : pct < 10 ? ' low' : '');
  card.label.textContent = fmt(a.stock_remaining) + ' of ' + fmt(a.stock_initial) + ' left (' + pct.toFixed(1) + '%)';
  const v = card.v;
  v.remaining.textContent = fmt(a.stock_remaining);
  v.admitted.textContent = fmt(a.admitted);
  v.rate.textContent = fmtRate(lastRate((x) => { const y = actOf(x, a.id); return y ? y.admitted_units_total : null; }));
  v.released.textContent = fmt(a.released);
  v.backlog.textContent = fmt(a.backlog);
  v.dlq.textContent = fmt(a.dead_letters);
  v.dlq.className = 'v' + (a.dead_letters > 0 ? ' bad' : '');
  v.created.textContent = fmt(a.orders.created);
  v.paid.textContent = fmt(a.orders.paid);
  v.cancelled.textContent = fmt(a.orders.cancelled);
  v.dbstock.textContent = fmt(a.db_stock);
  // pre-registration (docs/fairness.md): shown only for a sale that takes it
  v.registered.parentNode.hidden = a.registered == null;
  v.registered.textContent = a.registered == null ? '' : fmt(a.registered);
  if (a.reconcile_differences < 0) {
    v.reconcile.textContent = 'not yet'; v.reconcile.className = 'v';
  } else {
    v.reconcile.textContent = a.reconcile_differences === 0 ? 'consistent' : fmt(a.reconcile_differences) + ' diff.';
    v.reconcile.className = 'v ' + (a.reconcile_differences === 0 ? 'ok' : 'bad');
    v.reconcile.title = fmtAgo(a.reconcile_ms, d.now_ms);
  }
  renderWaitingRoom(card, a);
  const now = d.now_ms / 1000;
  drawChart(card.adm.cv, [{ color: '#3fb950',
    pts: rates((x) => { const y = actOf(x, a.id); return y ? y.admitted_units_total : null; }) }], now);
  card.adm.lg.textContent = 'units admitted per second, all processes';
  const series = [];
  for (const reason of Object.keys(a.refusals)) {
    const pts = rates((x) => { const y = actOf(x, a.id); return y ? y.refusals[reason] : null; });
    if (pts.some(([t, r]) => r > 0 && t >= now - WINDOW_S))
      series.push({ reason, color: REASON_COLORS[reason] || '#c9d1d9', pts });
  }
  drawChart(card.ref.cv, series, now);
  card.ref.lg.textContent = '';
  if (!series.length) card.ref.lg.textContent = 'no refusals in the last 5 min';
  for (const s of series) {
    const item = el('span');
    const sw = el('i'); sw.style.background = s.color;
    item.append(sw, s.reason + ' ' + fmtRate(s.pts[s.pts.length - 1][1]));
    card.ref.lg.append(item);
  }
}

const STATE_ORDER = { open: 0, scheduled: 1, closed: 2, ended: 3 };
function renderActivities(d) {
  const box = $('activities');
  const acts = d.activities.slice().sort((x, y) =>
    (STATE_ORDER[x.state] - STATE_ORDER[y.state]) || (y.start_ms - x.start_ms) || (y.id - x.id));
  const seen = new Set();
  acts.forEach((a, i) => {
    let card = cards.get(a.id);
    if (!card) { card = makeCard(a); cards.set(a.id, card); }
    if (box.children[i] !== card.c) box.insertBefore(card.c, box.children[i] || null);
    renderActivity(card, a, d);
    seen.add(a.id);
  });
  for (const [id, card] of cards) if (!seen.has(id)) { card.c.remove(); cards.delete(id); }
  let note = $('no-acts');
  if (!acts.length && !note) {
    note = el('div', 'empty', d.worker ? 'No activities yet.' : 'No order worker on this node: activity figures come from the node that runs one.');
    note.id = 'no-acts';
    box.append(note);
  } else if (acts.length && note) note.remove();
}

// Sales this node would never persist the orders of: live in Redis and
// unknown to its database, or preheated from another database. Each card
// says why and the command that fixes it.
function renderOrphans(d) {
  const box = $('orphans');
  box.textContent = '';
  for (const o of d.orphans || []) {
    const c = el('div', 'orphan');
    c.id = 'orphan-' + o.id;
    c.append(el('h2', '', 'Activity #' + o.id + ': its orders would never be persisted here'));
    c.append(el('p', '', o.message + (o.store_id ? ' (store ' + o.store_id + ')' : '') + '.'));
    const fix = el('p');
    fix.append('Fix: ');
    fix.append(el('code', '', o.fix));
    c.append(fix);
    box.append(c);
  }
  if (d.orphans_left_out > 0) box.append(el('div', 'orphan', 'and ' + d.orphans_left_out + ' more: run seckill reconcile'));
}

function renderProcs(d) {
  const p = $('procs');
  p.textContent = '';
  const t = el('table'), head = el('tr');
  for (const k of ['process', 'pid', 'state', 'restarts', 'up since']) head.append(el('th', '', k));
  t.append(head);
  for (const x of d.processes) {
    const r = el('tr');
    r.append(el('td', '', x.kind), el('td', '', String(x.pid)), el('td', '', x.alive ? 'running' : 'down'),
             el('td', '', fmt(x.restarts)), el('td', '', x.started_ms ? new Date(x.started_ms).toLocaleTimeString('en-GB') : '–'));
    t.append(r);
  }
  p.append(t);
}

function render(d) {
  renderHealth(d);
  renderNode(d);
  renderWebhooks(d);
  renderOrphans(d);
  renderActivities(d);
  renderProcs(d);
}

// The server's history (columns of counters) as documents of the shape
// the charts read, oldest first, each older than the answer it came with.
function seed(h, now_ms) {
  for (let k = 0; k < h.t_ms.length; k++) {
    if (h.t_ms[k] >= now_ms) continue;
    const acts = h.activities.map((a) => {
      const refusals = {};
      for (const [reason, v] of Object.entries(a.refusals)) refusals[reason] = v[k];
      return { id: a.id, admitted_units_total: a.admitted_units_total[k], refusals,
               waiting_room: a.handed_out_total ? { handed_out_total: a.handed_out_total[k] } : null };
    });
    history.push({ t: h.t_ms[k] / 1000,
                   d: { now_ms: h.t_ms[k], totals: { admissions: h.admissions[k], refusals: { all: h.refusals[k] } }, activities: acts } });
  }
}

let seeded = false;
async function poll() {
  try {
    const r = await fetch(seeded ? 'dashboard.json' : 'dashboard.json?history=1', { cache: 'no-store' });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    const d = await r.json();
    if (!seeded && d.history) seed(d.history, d.now_ms);
    seeded = true;
    delete d.history;
    history.push({ t: d.now_ms / 1000, d });
    while (history.length > 2 && history[history.length - 1].t - history[0].t > WINDOW_S + 5) history.shift();
    render(d);
  } catch (e) {
    $('updated').textContent = 'no answer from the node (' + e.message + '), retrying';
  }
}

poll();
setInterval(poll, POLL_MS);
