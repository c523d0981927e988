// Queen console: a single page with hash routing over the broker's HTTP API.
// Every value that comes from the API or the user goes through html`` (escaped) or textContent.
'use strict';
(() => {
  // ================================================================== HTML building

  class Safe {
    constructor(text) {
      this.text = text;
    }
  }

  const ENTITIES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

  function esc(value) {
    return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]);
  }

  // One interpolated value: Safe as is, arrays joined, nothing for null/undefined/false.
  function piece(value) {
    if (value instanceof Safe) return value.text;
    if (Array.isArray(value)) return value.map(piece).join('');
    if (value === null || value === undefined || value === false) return '';
    return esc(value);
  }

  function html(strings, ...values) {
    let out = strings[0];
    for (let i = 0; i < values.length; i++) out += piece(values[i]) + strings[i + 1];
    return new Safe(out);
  }

  function mount(el, content) {
    if (el) el.innerHTML = piece(content);
  }

  const $ = (sel, root = document) => root.querySelector(sel);
  const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

  // ================================================================== formatting

  const DASH = '–';

  function num(n) {
    if (n === null || n === undefined || n === '' || Number.isNaN(Number(n))) return DASH;
    return Number(n).toLocaleString('en-US');
  }

  function rate(n) {
    const v = Number(n) || 0;
    return v.toLocaleString('en-US', { maximumFractionDigits: v < 10 ? 2 : 1 });
  }

  function duration(msValue) {
    const v = Number(msValue);
    if (!Number.isFinite(v)) return DASH;
    if (v < 1000) return `${Math.round(v)} ms`;
    if (v < 60000) return `${(v / 1000).toFixed(1)} s`;
    if (v < 3600000) return `${(v / 60000).toFixed(1)} min`;
    return `${(v / 3600000).toFixed(1)} h`;
  }

  const pad2 = (n) => String(n).padStart(2, '0');

  function when(iso) {
    if (!iso) return DASH;
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return String(iso);
    const day = `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}`;
    return `${day} ${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }

  function clock(ms) {
    const d = new Date(ms);
    return `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
  }

  function badge(text, cls = text) {
    return html`<span class="badge ${String(cls)}">${text}</span>`;
  }

  const enc = encodeURIComponent;

  // The pseudo-group that queue-mode pops (no consumerGroup) consume as.
  const QUEUE_MODE = '__QUEUE_MODE__';

  function groupLabel(name) {
    if (name !== QUEUE_MODE) return name || DASH;
    return html`<span title="${name}">queue mode</span>`;
  }

  // ================================================================== API access

  const TOKEN_KEY = 'queen.console.token';

  class ApiError extends Error {
    constructor(status, message, body, method, path) {
      super(message);
      this.status = status;
      this.body = body;
      this.method = method;
      this.path = path;
    }

    // The node has no such route (an older build): pages say "not available".
    get missing() {
      return this.status === 404 && Boolean(this.body) && this.body.code === 'no_such_route';
    }
  }

  // A result that arrived after the user left the page: dropped without a word.
  class Stale extends Error {}

  function token() {
    try {
      return localStorage.getItem(TOKEN_KEY) || '';
    } catch (e) {
      return '';
    }
  }

  function errorText(body, fallback) {
    if (body && typeof body === 'object') {
      const parts = [body.error, body.reason, body.detail]
        .filter((p) => p && typeof p === 'string');
      const unique = parts.filter((p, i) => parts.indexOf(p) === i);
      if (unique.length) return unique.join(': ');
    }
    if (typeof body === 'string' && body) return body.slice(0, 300);
    return fallback || 'request failed';
  }

  async function api(path, { method = 'GET', body } = {}) {
    const headers = { Accept: 'application/json' };
    const jwt = token();
    if (jwt) headers.Authorization = `Bearer ${jwt}`;
    const init = { method, headers };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, `network error: ${e.message}`, null, method, path);
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (e) {
        data = text;
      }
    }
    if (!res.ok) {
      throw new ApiError(res.status, errorText(data, res.statusText), data, method, path);
    }
    return { status: res.status, data };
  }

  // ================================================================== banner, notice, confirm

  function hideBanner() {
    $('#banner').hidden = true;
    $('#notice').hidden = true;
  }

  function showError(err) {
    if (err instanceof Stale) return;
    const e = err instanceof ApiError ? err : new ApiError(0, String((err && err.message) || err));
    const auth = e.status === 401 || e.status === 403;
    const where = e.path ? ` (${e.method} ${e.path.split('?')[0]})` : '';
    let text = `Error${e.status ? ` ${e.status}` : ''}: ${e.message}${where}`;
    if (auth) {
      const need = e.status === 401 ? 'a valid token' : 'a token with more permissions';
      text = `${e.status} ${e.message}: this request needs ${need}. ` +
        'Paste a JWT into the token field at the top right and press Save.';
      $('#token').classList.add('wanted');
    }
    $('#banner').classList.toggle('auth', auth);
    $('#banner-text').textContent = text;
    $('#banner').hidden = false;
  }

  let noticeTimer = 0;

  function notify(text) {
    const box = $('#notice');
    box.textContent = text;
    box.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => {
      box.hidden = true;
    }, 8000);
  }

  let confirmResolve = null;

  // The in-page confirm dialog: resolves true on Confirm, false on Cancel or Escape.
  function ask(message, okLabel = 'Confirm') {
    if (confirmResolve) confirmResolve(false);
    $('#confirm-text').textContent = message;
    $('#confirm-ok').textContent = okLabel;
    $('#confirm').hidden = false;
    $('#confirm-cancel').focus();
    return new Promise((resolve) => {
      confirmResolve = resolve;
    });
  }

  function answer(ok) {
    $('#confirm').hidden = true;
    const resolve = confirmResolve;
    confirmResolve = null;
    if (resolve) resolve(ok);
  }

  // An event handler that reports its failure on the banner instead of rejecting.
  function guard(fn) {
    return (...args) => Promise.resolve().then(() => fn(...args)).catch(showError);
  }

  // ================================================================== routing

  let generation = 0;
  let current = null;

  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/';
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    return { path, query: new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)) };
  }

  function hashFor(path, params = {}) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== '' && !(k === 'offset' && Number(v) === 0)) {
        qs.set(k, String(v));
      }
    }
    const text = qs.toString();
    return `#${path}${text ? `?${text}` : ''}`;
  }

  // Moves to the same page with some query parameters changed.
  function setQuery(changes) {
    const { path, query } = parseHash();
    const params = Object.fromEntries(query.entries());
    location.hash = hashFor(path, { ...params, ...changes });
  }

  // What a page gets: its root, its query, and timers that stop when the user leaves.
  function makeContext(query, params) {
    const gen = ++generation;
    const timers = [];
    const ctx = {
      root: $('#app'),
      query,
      params,
      alive: () => gen === generation,
      stop: () => timers.forEach((t) => clearTimeout(t)),
      async get(path) {
        const res = await api(path);
        if (!ctx.alive()) throw new Stale();
        return res.data;
      },
      every(period, fn) {
        const tick = async () => {
          if (!ctx.alive()) return;
          await Promise.resolve().then(fn).catch((e) => ctx.alive() && showError(e));
          if (ctx.alive()) timers.push(setTimeout(tick, period));
        };
        timers.push(setTimeout(tick, period));
      },
    };
    return ctx;
  }

  const ROUTES = [
    { re: /^\/?$/, nav: 'overview', render: (c) => overviewPage(c) },
    { re: /^\/queues\/?$/, nav: 'queues', render: (c) => queuesPage(c) },
    { re: /^\/queues\/(.+)$/, nav: 'queues', render: (c) => queueDetailPage(c) },
    { re: /^\/groups\/?$/, nav: 'groups', render: (c) => groupsPage(c) },
    { re: /^\/groups\/(.+)$/, nav: 'groups', render: (c) => groupDetailPage(c) },
    { re: /^\/messages\/?$/, nav: 'messages', render: (c) => messagesPage(c) },
    { re: /^\/dlq\/?$/, nav: 'dlq', render: (c) => dlqPage(c) },
    { re: /^\/kv\/?$/, nav: 'kv', render: (c) => kvPage(c) },
    { re: /^\/cluster\/?$/, nav: 'cluster', render: (c) => clusterPage(c) },
  ];

  function decodeParams(match) {
    return match.slice(1).map((p) => {
      try {
        return decodeURIComponent(p);
      } catch (e) {
        return p;
      }
    });
  }

  function navigate() {
    if (current) current.stop();
    hideBanner();
    answer(false);
    const { path, query } = parseHash();
    const route = ROUTES.find((r) => r.re.test(path));
    for (const a of $$('#nav a')) {
      a.classList.toggle('active', Boolean(route) && a.dataset.nav === route.nav);
    }
    const ctx = makeContext(query, route ? decodeParams(path.match(route.re)) : []);
    current = ctx;
    window.scrollTo(0, 0);
    if (!route) {
      mount(ctx.root, html`<section data-page="not-found" class="panel">
        <h1>Page not found</h1><p><a href="#/">Back to the overview</a></p></section>`);
      return;
    }
    Promise.resolve().then(() => route.render(ctx)).catch(showError);
    refreshPill();
  }

  // ================================================================== shared widgets

  function card(label, value, hint, testid) {
    return html`<div class="card" data-testid="${testid || ''}">
      <div class="label">${label}</div><div class="value">${value}</div>
      ${hint ? html`<div class="hint">${hint}</div>` : ''}</div>`;
  }

  function unavailable(what, err) {
    const why = err && !err.missing ? ` (${err.status ? `${err.status} ` : ''}${err.message})` : '';
    return html`<div class="unavailable" data-testid="unavailable">${what} is not available on this
      node${why}.</div>`;
  }

  // A table: columns are [label, className?]; rows is an array of html`<tr>` pieces.
  function table(testid, columns, rows, emptyText = 'Nothing here yet.') {
    const head = columns.map(([label, cls]) => html`<th class="${cls || ''}">${label}</th>`);
    const body = rows.length
      ? rows
      : html`<tr><td colspan="${columns.length}" class="empty">${emptyText}</td></tr>`;
    return html`<div class="table-wrap"><table data-testid="${testid}">
      <thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
  }

  // Prev/Next for a server page: `total` may be unknown (null) when the API does not say.
  function pager(testid, offset, limit, shown, total) {
    const first = shown ? offset + 1 : 0;
    const last = offset + shown;
    const of = total === null || total === undefined ? '' : ` of ${num(total)}`;
    const more = total === null || total === undefined ? shown >= limit : last < total;
    return html`<div class="pager">
      <span data-testid="${testid}-info">${num(first)}–${num(last)}${of}</span>
      <span class="grow"></span>
      <button type="button" data-testid="${testid}-prev"
        data-page-to="${Math.max(0, offset - limit)}" ${offset > 0 ? '' : html`disabled`}
        >‹ Prev</button>
      <button type="button" data-testid="${testid}-next" data-page-to="${offset + limit}"
        ${more ? '' : html`disabled`}>Next ›</button></div>`;
  }

  // Wires a pager's buttons to a callback that receives the new offset.
  function wirePager(root, testid, onPage) {
    for (const which of ['prev', 'next']) {
      const b = $(`[data-testid="${testid}-${which}"]`, root);
      if (b) b.addEventListener('click', guard(() => onPage(Number(b.dataset.pageTo))));
    }
  }

  // JSON, pretty-printed with colour, every string escaped.
  function jsonHtml(value, indent = '') {
    const inner = `${indent}  `;
    if (value === null) return html`<span class="j-lit">null</span>`;
    if (Array.isArray(value)) {
      if (!value.length) return html`[]`;
      const items = value.map((v) => html`${inner}${jsonHtml(v, inner)}`);
      return html`[\n${join(items, ',\n')}\n${indent}]`;
    }
    if (typeof value === 'object') {
      const keys = Object.keys(value);
      if (!keys.length) return html`{}`;
      const items = keys.map((k) => html`${inner}<span class="j-key">${JSON.stringify(k)}</span>: ${
        jsonHtml(value[k], inner)}`);
      return html`{\n${join(items, ',\n')}\n${indent}}`;
    }
    if (typeof value === 'string') return html`<span class="j-str">${JSON.stringify(value)}</span>`;
    if (typeof value === 'number') return html`<span class="j-num">${String(value)}</span>`;
    return html`<span class="j-lit">${String(value)}</span>`;
  }

  function join(items, sep) {
    return items.map((item, i) => (i ? html`${sep}${item}` : item));
  }

  function formValues(form) {
    const out = {};
    for (const el of form.elements) {
      if (!el.name) continue;
      out[el.name] = el.type === 'checkbox' ? el.checked : el.value.trim();
    }
    return out;
  }

  // ================================================================== header: node pill, token

  let pillBusy = false;

  async function refreshPill() {
    if (pillBusy) return;
    pillBusy = true;
    const pill = $('#node-pill');
    try {
      const { data } = await api('/health');
      const r = data.raft || {};
      pill.className = 'node-pill up';
      mount(pill, html`<span class="dot"></span>node ${r.nodeId} · ${r.role} · term ${r.term}`);
    } catch (e) {
      pill.className = 'node-pill down';
      const what = e.body && e.body.status
        ? e.body.status : `unreachable (${e.status || 'network'})`;
      mount(pill, html`<span class="dot"></span>${what}`);
    } finally {
      pillBusy = false;
    }
  }

  function setupHeader() {
    const input = $('#token');
    input.value = token();
    $('#token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const value = input.value.trim();
      try {
        if (value) localStorage.setItem(TOKEN_KEY, value);
        else localStorage.removeItem(TOKEN_KEY);
      } catch (e) {
        showError(new ApiError(0, 'the browser refused to store the token'));
        return;
      }
      input.classList.remove('wanted');
      navigate();
      notify(value ? 'Token saved: it is sent with every request.' : 'Token cleared.');
    });
    $('#banner-close').addEventListener('click', () => {
      $('#banner').hidden = true;
    });
    $('#confirm-ok').addEventListener('click', () => answer(true));
    $('#confirm-cancel').addEventListener('click', () => answer(false));
    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && !$('#confirm').hidden) answer(false);
    });
  }

  // ================================================================== chart

  function niceMax(v) {
    if (v <= 0) return 1;
    const p = 10 ** Math.floor(Math.log10(v));
    const steps = [1, 2, 2.5, 5, 10];
    return steps.map((s) => s * p).find((s) => s >= v);
  }

  // A line chart of `series` ([{name, color, values}]) over `times` (ms), as inline SVG.
  function lineChart(times, series, { width = 760, height = 250 } = {}) {
    const pad = { l: 48, r: 14, t: 12, b: 26 };
    const w = width - pad.l - pad.r;
    const h = height - pad.t - pad.b;
    const top = niceMax(Math.max(0, ...series.flatMap((s) => s.values)));
    const t0 = times[0] || 0;
    const span = Math.max(1, (times[times.length - 1] || 1) - t0);
    const x = (t) => pad.l + ((t - t0) / span) * w;
    const y = (v) => pad.t + h - (v / top) * h;
    const grid = [0, 0.25, 0.5, 0.75, 1].map((f) => html`
      <line class="grid-line" x1="${pad.l}" x2="${pad.l + w}" y1="${y(top * f)}"
        y2="${y(top * f)}"/>
      <text class="axis-label" x="${pad.l - 6}" y="${y(top * f) + 4}" text-anchor="end">${
        rate(top * f)}</text>`);
    const ticks = chartTicks(t0, span).map((t) => html`
      <text class="axis-label" x="${x(t)}" y="${height - 6}" text-anchor="middle">${
        clock(t)}</text>`);
    const lines = series.map((s) => chartLine(s, times, x, y, pad.t + h));
    return html`<svg class="chart" viewBox="0 0 ${width} ${height}" role="img"
      aria-label="throughput chart">${grid}${ticks}${lines}</svg>`;
  }

  function chartTicks(t0, span) {
    const step = [60e3, 120e3, 300e3, 600e3, 1800e3, 3600e3].find((s) => span / s <= 6) || 3600e3;
    const out = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t0 + span; t += step) out.push(t);
    return out;
  }

  function chartLine(s, times, x, y, base) {
    if (!times.length) return '';
    const pts = s.values.map((v, i) => `${x(times[i]).toFixed(1)},${y(v).toFixed(1)}`);
    const area = `${x(times[0]).toFixed(1)},${base} ${pts.join(' ')} ` +
      `${x(times[times.length - 1]).toFixed(1)},${base}`;
    return html`<polygon class="area" points="${area}" fill="${s.color}"/>
      <polyline class="series" data-series="${s.name}" points="${pts.join(' ')}"
        stroke="${s.color}"/>`;
  }

  // ================================================================== overview

  const CHART_MINUTES = 15;
  const CHART_BUCKET_S = 10;

  async function overviewPage(ctx) {
    mount(ctx.root, html`<section data-page="overview">
      <div class="page-head"><h1>Overview</h1>
        <span class="sub" data-testid="overview-updated" id="ov-updated"></span></div>
      <div class="cards" id="ov-cards" data-testid="overview-cards"></div>
      <div class="grid three">
        <div class="panel"><div class="panel-head">
          <h2>Throughput, last ${CHART_MINUTES} minutes</h2>
          <div class="legend" id="ov-legend"></div></div>
          <div id="ov-chart" data-testid="throughput-chart"></div>
          <div class="sub" id="ov-res" data-testid="node-resources"></div></div>
        <div class="panel"><h2>Node and Raft</h2><div id="ov-node" data-testid="raft-state"></div>
        </div>
      </div>
    </section>`);
    const refresh = () => Promise.all([
      overviewCards(ctx).catch((e) => reportIn(ctx, '#ov-cards', 'The overview', e)),
      overviewChart(ctx).catch((e) => reportIn(ctx, '#ov-chart', 'Throughput history', e)),
      overviewNode(ctx).catch((e) => reportIn(ctx, '#ov-node', 'Health', e)),
    ]).then(() => {
      if (ctx.alive()) $('#ov-updated').textContent = `updated ${when(new Date())}`;
    });
    await refresh();
    ctx.every(3000, refresh);
  }

  // A missing route says "not available" in place; any other error goes on the banner.
  function reportIn(ctx, sel, what, err) {
    if (err instanceof Stale || !ctx.alive()) return;
    if (err instanceof ApiError && err.missing) mount($(sel, ctx.root), unavailable(what, err));
    else showError(err);
  }

  async function overviewCards(ctx) {
    const o = await ctx.get('/api/v1/resources/overview');
    const m = o.messages || {};
    const lag = (o.lag && o.lag.time) || {};
    const tp = o.throughput || {};
    mount($('#ov-cards', ctx.root), [
      card('Queues', num(o.queues), `${num(o.namespaces)} namespaces`, 'stat-queues'),
      card('Partitions', num(o.partitions), `${num(o.tasks)} tasks`, 'stat-partitions'),
      card('Messages', num(m.total), `${num(m.completed)} completed`, 'stat-messages'),
      card('Pending', num(m.pending), null, 'stat-pending'),
      card('Processing', num(m.processing), null, 'stat-processing'),
      card('Dead letters', num(m.deadLetter), null, 'stat-dlq'),
      card('Lag', lagText(lag.avg), `max ${lagText(lag.max)}`, 'stat-lag'),
      card('In / out', `${rate(tp.ingestedPerSecond)} / ${rate(tp.processedPerSecond)}`,
        'messages per second now', 'stat-rate'),
      diskCard(o.disk),
    ]);
  }

  // The disk gate: open, or full (pushes and other writes answered 507 until it drains).
  function diskCard(disk) {
    if (!disk) return card('Disk', DASH, 'not reported', 'stat-disk');
    const used = disk.usedPct === null || disk.usedPct === undefined ? DASH : `${disk.usedPct}%`;
    return card('Disk', used, disk.storageFull ? 'full: writes refused' : 'gate open',
      'stat-disk');
  }

  // Time lag as the overview reports it (milliseconds).
  function lagText(ms) {
    if (ms === null || ms === undefined) return DASH;
    return duration(Number(ms));
  }

  async function overviewChart(ctx) {
    const to = new Date();
    const from = new Date(to.getTime() - CHART_MINUTES * 60000);
    const q = `from=${enc(from.toISOString())}&to=${enc(to.toISOString())}` +
      `&bucketSeconds=${CHART_BUCKET_S}`;
    const s = await ctx.get(`/api/v1/status?${q}`);
    const points = s.throughput || [];
    const times = points.map((p) => new Date(p.timestamp).getTime());
    const series = [
      { name: 'ingested', label: 'In', color: '#2f6fde',
        values: points.map(pointRate('ingested')) },
      { name: 'processed', label: 'Out', color: '#1f9d6a',
        values: points.map(pointRate('processed')) },
    ];
    mount($('#ov-chart', ctx.root), points.length
      ? lineChart(times, series) : html`<div class="unavailable">No samples yet.</div>`);
    mount($('#ov-res', ctx.root), resourceLine(points));
    mount($('#ov-legend', ctx.root), series.map((x) => html`<span><i style="background:${x.color}">
      </i>${x.label}<b>${rate(x.values[x.values.length - 1] || 0)}/s</b></span>`));
  }

  const pointRate = (what) => (p) => Number(p[`${what}PerSecond`]) || 0;

  // The node's own figures in the last bucket that has samples.
  function resourceLine(points) {
    const p = [...points].reverse().find((x) => Number(x.sampleCount) > 0 || x.queenRssMb > 0);
    if (!p) return '';
    return html`Memory ${rate(p.queenRssMb)} MB · CPU ${rate(p.queenCpuUserPct)}% user,
      ${rate(p.queenCpuSysPct)}% system · pop lag ${duration(p.avgLagMs)} avg,
      ${duration(p.maxLagMs)} max · commit ${num(p.commitIndex)}, applied ${num(p.appliedIndex)}`;
  }

  async function overviewNode(ctx) {
    let h;
    try {
      h = await ctx.get('/health');
    } catch (e) {
      if (!(e instanceof ApiError) || !e.body || !e.body.raft) throw e;
      h = e.body;  // 503 while settling still tells the Raft state
    }
    const r = h.raft || {};
    mount($('#ov-node', ctx.root), html`<dl class="kv">
      <dt>Status</dt><dd>${badge(h.status)}</dd>
      <dt>Node id</dt><dd data-testid="raft-node">${r.nodeId}</dd>
      <dt>Role</dt><dd data-testid="raft-role">${badge(r.role)}</dd>
      <dt>Leader</dt><dd>${r.leader ? r.leader : 'none'}</dd>
      <dt>Term</dt><dd data-testid="raft-term">${num(r.term)}</dd>
      <dt>Commit</dt><dd>${num(r.commit)}</dd>
      <dt>Applied</dt><dd>${num(r.applied)}</dd>
      <dt>Apply lag</dt><dd>${num(r.lag)} entries</dd>
      <dt>Version</dt><dd>${h.version}</dd>
    </dl>`);
  }

  // ================================================================== queues

  const QUEUE_PAGE = 50;

  async function queuesPage(ctx) {
    const q = ctx.query;
    const offset = Math.max(0, Number(q.get('offset')) || 0);
    mount(ctx.root, html`<section data-page="queues">
      <div class="page-head"><h1>Queues</h1><span class="sub" id="q-count"></span></div>
      <div class="panel">
        <form class="toolbar" id="q-search" data-testid="queues-search">
          <input name="search" placeholder="Search by name" value="${q.get('search') || ''}"
            data-testid="queues-search-input" size="28">
          <input name="namespace" placeholder="Namespace" value="${q.get('namespace') || ''}">
          <input name="task" placeholder="Task" value="${q.get('task') || ''}">
          <button type="submit" class="primary">Search</button>
          <span class="grow"></span>
        </form>
        <div id="q-list"></div>
      </div>
      <div class="panel"><h2>Create or configure a queue</h2>
        <form class="fields" id="q-create" data-testid="queue-create">
          <label>Queue name<input name="queue" required></label>
          <label>Namespace<input name="namespace"></label>
          <label>Task<input name="task"></label>
          <div class="buttons"><button type="submit" class="primary"
            data-testid="queue-create-submit">Create</button></div>
        </form></div>
    </section>`);
    $('#q-search', ctx.root).addEventListener('submit', (ev) => {
      ev.preventDefault();
      setQuery({ ...formValues(ev.target), offset: 0 });
    });
    $('#q-create', ctx.root).addEventListener('submit', guard(createQueue));
    await loadQueueList(ctx, offset);
  }

  async function createQueue(ev) {
    ev.preventDefault();
    const v = formValues(ev.target);
    const body = { queue: v.queue };
    if (v.namespace) body.namespace = v.namespace;
    if (v.task) body.task = v.task;
    await api('/api/v1/configure', { method: 'POST', body });
    location.hash = `#/queues/${enc(v.queue)}`;
    notify(`Queue ${v.queue} configured.`);
  }

  async function loadQueueList(ctx, offset) {
    const q = ctx.query;
    const params = new URLSearchParams({ limit: QUEUE_PAGE, offset });
    for (const k of ['search', 'namespace', 'task']) if (q.get(k)) params.set(k, q.get(k));
    let page;
    try {
      page = await ctx.get(`/api/v1/status/queues?${params}`);
    } catch (e) {
      if (!(e instanceof ApiError) || !e.missing) throw e;
      page = await queueListFallback(ctx, offset);
    }
    const queues = page.queues || [];
    const total = page.pagination ? page.pagination.total : null;
    $('#q-count', ctx.root).textContent = total === null || total === undefined
      ? '' : `${num(total)} matching`;
    const rows = queues.map((x) => queueRow(x));
    mount($('#q-list', ctx.root), [
      table('queues-table', [['Name'], ['Namespace'], ['Task'], ['Partitions', 'num'],
        ['Messages', 'num'], ['Pending', 'num'], ['Processing', 'num'], ['Dead letters', 'num'],
        ['Created']], rows, 'No queue matches.'),
      pager('queues', offset, QUEUE_PAGE, queues.length, total),
    ]);
    wirePager(ctx.root, 'queues', (o) => setQuery({ offset: o }));
  }

  function queueRow(x) {
    const m = x.messages || {};
    return html`<tr data-testid="queue-row" data-queue="${x.name}">
      <td><a href="#/queues/${enc(x.name)}">${x.name}</a></td>
      <td>${x.namespace || DASH}</td><td>${x.task || DASH}</td>
      <td class="num">${num(x.partitions)}</td><td class="num">${num(m.total)}</td>
      <td class="num">${num(m.pending)}</td><td class="num">${num(m.processing)}</td>
      <td class="num">${num(m.deadLetter)}</td><td>${when(x.createdAt)}</td></tr>`;
  }

  // Older nodes: the plain queue list (no partitions in it), filtered and paged here.
  async function queueListFallback(ctx, offset) {
    const q = ctx.query;
    const params = new URLSearchParams();
    for (const k of ['namespace', 'task']) if (q.get(k)) params.set(k, q.get(k));
    const all = (await ctx.get(`/api/v1/resources/queues?${params}`)).queues || [];
    const search = (q.get('search') || '').toLowerCase();
    const hits = all.filter((x) => !search || x.name.toLowerCase().includes(search));
    const queues = hits.slice(offset, offset + QUEUE_PAGE);
    return { queues, pagination: { limit: QUEUE_PAGE, offset, total: hits.length } };
  }

  // ================================================================== one queue

  const PARTITION_PAGE = 50;

  async function queueDetailPage(ctx) {
    const name = ctx.params[0];
    const q = ctx.query;
    const offset = Math.max(0, Number(q.get('offset')) || 0);
    const params = new URLSearchParams({ limit: PARTITION_PAGE, offset });
    if (q.get('search')) params.set('search', q.get('search'));
    mount(ctx.root, html`<section data-page="queue-detail" data-queue="${name}">
      <div class="page-head"><h1>${name}</h1><span class="sub"><a href="#/queues">‹ all queues</a>
      </span></div><div id="qd-body">Loading…</div></section>`);
    let d;
    try {
      d = await ctx.get(`/api/v1/status/queues/${enc(name)}?${params}`);
    } catch (e) {
      if (e instanceof ApiError && (e.status === 404 || e.missing)) {
        mount($('#qd-body', ctx.root), e.missing ? unavailable('The queue detail', e)
          : html`<div class="panel unavailable" data-testid="queue-missing">No queue named
            ${name}.</div>`);
      }
      throw e;
    }
    renderQueueDetail(ctx, name, d, offset);
  }

  function renderQueueDetail(ctx, name, d, offset) {
    const t = d.totals || {};
    const pag = d.pagination || {};
    const info = d.queue || {};
    mount($('#qd-body', ctx.root), [
      html`<div class="cards" data-testid="queue-totals">
        ${card('Partitions', num(pag.total), null, 'queue-partition-count')}
        ${card('Messages', num(t.total))}${card('Pending', num(t.pending))}
        ${card('Processing', num(t.processing))}${card('Completed', num(t.completed))}
        ${card('Dead letters', num(t.deadLetter))}</div>`,
      html`<div class="grid two">${queueConfigPanel(name, info)}${queueFormPanel(info)}</div>`,
      partitionsPanel(ctx, name, d.partitions || [], offset, pag.total),
    ]);
    wireQueueDetail(ctx, name);
  }

  function queueConfigPanel(name, info) {
    const c = info.config || {};
    return html`<div class="panel"><div class="panel-head"><h2>Queue</h2>
      <a href="#/messages?queue=${enc(name)}">Browse messages</a>
      <a href="#/dlq?queue=${enc(name)}">Dead letters</a></div>
      <dl class="kv" data-testid="queue-config">
        <dt>Id</dt><dd>${info.id}</dd>
        <dt>Namespace</dt><dd>${info.namespace || DASH}</dd>
        <dt>Task</dt><dd>${info.task || DASH}</dd>
        <dt>Priority</dt><dd>${num(info.priority)}</dd>
        <dt>Created</dt><dd>${when(info.createdAt)}</dd>
        <dt>Lease time</dt><dd>${num(c.leaseTime)} s</dd>
        <dt>Retry limit</dt><dd>${num(c.retryLimit)}</dd>
        <dt>Retry delay</dt><dd>${num(c.retryDelay)} ms</dd>
        <dt>TTL</dt><dd>${c.ttl ? `${num(c.ttl)} s` : 'none'}</dd>
        <dt>Max size</dt><dd>${c.maxQueueSize ? num(c.maxQueueSize) : 'unlimited'}</dd>
        <dt>Dead-letter queue</dt><dd>${c.deadLetterQueue ? 'on' : 'off'}</dd>
      </dl>
      <p><button type="button" class="danger" data-testid="queue-delete">Delete queue</button></p>
    </div>`;
  }

  function queueFormPanel(info) {
    const c = info.config || {};
    const field = (label, key, value) => html`<label>${label}
      <input name="${key}" type="number" min="0" step="1" value="${value ?? ''}"></label>`;
    return html`<div class="panel"><h2>Configure</h2>
      <form class="fields" id="qd-form" data-testid="configure-form">
        ${field('Lease time (s)', 'leaseTime', c.leaseTime)}
        ${field('Retry limit', 'retryLimit', c.retryLimit)}
        ${field('Retry delay (ms)', 'retryDelay', c.retryDelay)}
        ${field('TTL (s)', 'ttl', c.ttl)}
        ${field('Max size', 'maxSize', c.maxQueueSize)}
        ${field('Priority', 'priority', info.priority)}
        <label>Namespace<input name="namespace" value="${info.namespace || ''}"></label>
        <label>Task<input name="task" value="${info.task || ''}"></label>
        <label class="check"><input type="checkbox" name="deadLetterQueue"
          ${c.deadLetterQueue ? html`checked` : ''}>Dead-letter queue</label>
        <div class="buttons wide"><button type="submit" class="primary"
          data-testid="configure-submit">Save configuration</button></div>
      </form></div>`;
  }

  function partitionsPanel(ctx, name, parts, offset, total) {
    const search = ctx.query.get('search') || '';
    const rows = parts.map((p) => {
      const m = p.messages || {};
      return html`<tr data-testid="partition-row" data-partition="${p.name}">
        <td>${p.name}</td><td class="num">${num(m.total)}</td><td class="num">${num(m.pending)}</td>
        <td class="num">${num(m.processing)}</td><td class="num">${num(m.completed)}</td>
        <td class="num">${num(m.deadLetter)}</td><td>${when(p.lastActivity)}</td>
        <td>${when(p.oldestMessage)}</td><td>${when(p.newestMessage)}</td></tr>`;
    });
    return html`<div class="panel"><div class="panel-head"><h2>Partitions</h2>
      <form id="qd-search" class="toolbar" style="margin:0">
        <input name="search" placeholder="Search partitions" value="${search}"
          data-testid="partitions-search-input"><button type="submit">Search</button></form></div>
      ${table('partitions-table', [['Partition'], ['Messages', 'num'], ['Pending', 'num'],
        ['Processing', 'num'], ['Completed', 'num'], ['Dead letters', 'num'], ['Last activity'],
        ['Oldest'], ['Newest']], rows, 'No partition matches.')}
      ${pager('partitions', offset, PARTITION_PAGE, parts.length, total)}</div>`;
  }

  function wireQueueDetail(ctx, name) {
    const root = ctx.root;
    wirePager(root, 'partitions', (o) => setQuery({ offset: o }));
    $('#qd-search', root).addEventListener('submit', (ev) => {
      ev.preventDefault();
      setQuery({ search: formValues(ev.target).search, offset: 0 });
    });
    $('#qd-form', root).addEventListener('submit', guard((ev) => configureQueue(ev, name)));
    $('[data-testid="queue-delete"]', root).addEventListener('click', guard(async () => {
      if (!(await ask(`Delete queue "${name}" and all of its messages?`, 'Delete queue'))) return;
      await api(`/api/v1/resources/queues/${enc(name)}`, { method: 'DELETE' });
      location.hash = '#/queues';
      notify(`Queue ${name} deleted.`);
    }));
  }

  async function configureQueue(ev, name) {
    ev.preventDefault();
    const v = formValues(ev.target);
    const options = { deadLetterQueue: v.deadLetterQueue };
    for (const k of ['leaseTime', 'retryLimit', 'retryDelay', 'ttl', 'maxSize', 'priority']) {
      if (v[k] !== '') options[k] = Number(v[k]);
    }
    const body = { queue: name, options };
    if (v.namespace) body.namespace = v.namespace;
    if (v.task) body.task = v.task;
    await api('/api/v1/configure', { method: 'POST', body });
    navigate();
    notify(`Configuration of ${name} saved.`);
  }

  // ================================================================== consumer groups

  const GROUP_PAGE = 50;

  async function groupsPage(ctx) {
    const offset = Math.max(0, Number(ctx.query.get('offset')) || 0);
    mount(ctx.root, html`<section data-page="groups">
      <div class="page-head"><h1>Consumer groups</h1><span class="sub" id="g-count"></span></div>
      <div class="panel" id="g-list">Loading…</div></section>`);
    const all = await ctx.get('/api/v1/consumer-groups');
    const list = Array.isArray(all) ? all : [];
    const names = new Set(list.map((g) => g.name));
    $('#g-count', ctx.root).textContent = `${num(names.size)} groups, ${num(list.length)} ` +
      'subscriptions';
    const rows = list.slice(offset, offset + GROUP_PAGE).map((g) => html`
      <tr data-testid="group-row" data-group="${g.name}" data-queue="${g.queueName}">
        <td><a href="#/groups/${enc(g.name)}">${groupLabel(g.name)}</a></td>
        <td><a href="#/queues/${enc(g.queueName)}">${g.queueName}</a></td>
        <td>${badge(g.state)}</td><td class="num">${num(g.members)}</td>
        <td class="num">${num(g.partitionsWithLag)}</td><td class="num">${num(g.totalLag)}</td>
        <td class="num">${duration(Number(g.maxTimeLag) * 1000)}</td>
        <td>${g.subscriptionMode}</td></tr>`);
    mount($('#g-list', ctx.root), [
      table('groups-table', [['Group'], ['Queue'], ['State'], ['Members', 'num'],
        ['Lagging partitions', 'num'], ['Offset lag', 'num'], ['Time lag', 'num'],
        ['Subscription']], rows, 'No consumer group has consumed yet.'),
      pager('groups', offset, GROUP_PAGE, rows.length, list.length),
    ]);
    wirePager(ctx.root, 'groups', (o) => setQuery({ offset: o }));
  }

  async function groupDetailPage(ctx) {
    const group = ctx.params[0];
    mount(ctx.root, html`<section data-page="group-detail" data-group="${group}">
      <div class="page-head"><h1>${groupLabel(group)}</h1>
      <span class="sub"><a href="#/groups">‹ all groups</a>
      </span><span class="grow" style="flex:1"></span>
      <button type="button" class="danger" data-testid="group-delete">Delete group</button></div>
      <div id="gd-body">Loading…</div></section>`);
    $('[data-testid="group-delete"]', ctx.root).addEventListener('click', guard(async () => {
      if (!(await ask(`Delete consumer group "${group}" on every queue?`, 'Delete group'))) return;
      await api(`/api/v1/consumer-groups/${enc(group)}`, { method: 'DELETE' });
      location.hash = '#/groups';
      notify(`Consumer group ${group} deleted.`);
    }));
    const d = await ctx.get(`/api/v1/consumer-groups/${enc(group)}?limit=${GROUP_PAGE}`);
    const queues = Object.keys(d || {}).sort();
    if (!queues.length) {
      mount($('#gd-body', ctx.root), html`<div class="panel unavailable">This group has no
        cursor on any queue.</div>`);
      return;
    }
    mount($('#gd-body', ctx.root), queues.map((q, i) => groupQueuePanel(q, d[q], i)));
    queues.forEach((q, i) => wireGroupQueue(ctx, group, q, d[q], i));
  }

  function groupQueuePanel(queue, g, i) {
    const parts = g.partitions || [];
    return html`<div class="panel" data-testid="group-queue" data-queue="${queue}">
      <div class="panel-head"><h2>Queue <a href="#/queues/${enc(queue)}">${queue}</a></h2>
        <span class="sub">${num(g.pagination ? g.pagination.total : parts.length)} partitions
          · offset lag ${num(g.totalLag)} ·
          subscription ${g.subscriptionMode}</span></div>
      <div class="toolbar">
        <button type="button" data-testid="seek-end" data-act="end">Seek to end</button>
        <input type="datetime-local" step="1" data-testid="seek-time-input" aria-label="seek time">
        <button type="button" data-testid="seek-time" data-act="time">Seek to time</button>
        <span class="grow"></span>
        <button type="button" class="danger" data-testid="group-queue-delete" data-act="delete">
          Remove from this queue</button>
      </div>
      <div data-slot="parts-${i}"></div></div>`;
  }

  // One page of a queue's partitions as the node answered it (paged on the node).
  function groupPartsTable(page) {
    const parts = page.partitions || [];
    const { offset = 0, total = parts.length } = page.pagination || {};
    const rows = parts.map((p) => html`
      <tr data-testid="group-partition-row" data-partition="${p.partition}">
        <td>${p.partition}</td><td class="num">${num(p.offsetLag)}</td>
        <td class="num">${duration(Number(p.timeLagSeconds) * 1000)}</td>
        <td class="num">${num(p.totalConsumed)}</td><td class="num">${num(p.cursor)}</td>
        <td>${when(p.lastConsumedAt)}</td><td>${p.leaseActive ? badge('leased', 'processing')
          : DASH}</td></tr>`);
    return [table('group-partitions-table', [['Partition'], ['Offset lag', 'num'],
      ['Time lag', 'num'], ['Consumed', 'num'], ['Cursor', 'num'], ['Last consumed'],
      ['Lease']], rows, 'No partition.'),
    pager('group-partitions', offset, GROUP_PAGE, rows.length, total)];
  }

  function wireGroupQueue(ctx, group, queue, first, i) {
    const panel = $$('[data-testid="group-queue"]', ctx.root)[i];
    const slot = $(`[data-slot="parts-${i}"]`, panel);
    const render = (page) => {
      mount(slot, groupPartsTable(page));
      wirePager(slot, 'group-partitions', show);
    };
    const show = async (offset) => {
      const q = new URLSearchParams({ queue, limit: GROUP_PAGE, offset });
      const d = await ctx.get(`/api/v1/consumer-groups/${enc(group)}?${q}`);
      if (d && d[queue]) render(d[queue]);
    };
    render(first);
    const seekPath = `/api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}/seek`;
    $('[data-act="end"]', panel).addEventListener('click', guard(async () => {
      if (!(await ask(`Move "${group}" to the end of "${queue}"? It skips every message not yet` +
        ' consumed.', 'Seek to end'))) return;
      const r = await api(seekPath, { method: 'POST', body: { toEnd: true } });
      navigate();
      notify(`Seek to end: ${num(r.data && r.data.partitionsUpdated)} partitions moved.`);
    }));
    $('[data-act="time"]', panel).addEventListener('click', guard(() => seekToTime(ctx, panel,
      group, queue, seekPath)));
    $('[data-act="delete"]', panel).addEventListener('click', guard(async () => {
      if (!(await ask(`Remove "${group}" from "${queue}"?`, 'Remove'))) return;
      await api(`/api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}`,
        { method: 'DELETE' });
      navigate();
      notify(`Consumer group ${group} removed from ${queue}.`);
    }));
  }

  async function seekToTime(ctx, panel, group, queue, path) {
    const input = $('[data-testid="seek-time-input"]', panel);
    const at = input.value ? new Date(input.value) : null;
    if (!at || Number.isNaN(at.getTime())) {
      showError(new ApiError(0, 'pick a date and time to seek to first'));
      input.focus();
      return;
    }
    if (!(await ask(`Move "${group}" on "${queue}" to ${when(at)}?`, 'Seek'))) return;
    const r = await api(path, { method: 'POST', body: { timestamp: at.toISOString() } });
    navigate();
    notify(`Seek to ${when(at)}: ${num(r.data && r.data.partitionsUpdated)} partitions moved.`);
  }

  // ================================================================== messages

  const MESSAGE_PAGE = 50;
  const STATUSES = ['pending', 'processing', 'completed', 'dead_letter'];

  async function messagesPage(ctx) {
    const q = ctx.query;
    const status = q.get('status') || '';
    const options = STATUSES.map((s) => html`<option value="${s}"
      ${s === status ? html`selected` : ''}>${s.replace('_', ' ')}</option>`);
    mount(ctx.root, html`<section data-page="messages">
      <div class="page-head"><h1>Messages</h1><span class="sub">newest first</span></div>
      <div class="panel"><form class="toolbar" id="m-filter" data-testid="messages-filter">
        <input name="queue" list="m-queues" placeholder="Queue (any)"
          value="${q.get('queue') || ''}" data-testid="messages-queue-input">
        <datalist id="m-queues"></datalist>
        <input name="partition" placeholder="Partition (any)" value="${q.get('partition') || ''}">
        <select name="status" data-testid="messages-status-select">
          <option value="">any status</option>${options}</select>
        <button type="submit" class="primary" data-testid="messages-browse">Browse</button>
      </form></div>
      <div id="m-viewer"></div>
      <div class="panel" id="m-list">Loading…</div></section>`);
    $('#m-filter', ctx.root).addEventListener('submit', (ev) => {
      ev.preventDefault();
      setQuery({ ...formValues(ev.target), to: '' });
    });
    fillQueueChoices(ctx).catch((e) => reportIn(ctx, '#m-queues', 'The queue list', e));
    await loadMessages(ctx);
  }

  async function fillQueueChoices(ctx) {
    const page = await ctx.get('/api/v1/status/queues?limit=100&offset=0');
    mount($('#m-queues', ctx.root), (page.queues || []).map((x) => html`
      <option value="${x.name}"></option>`));
  }

  async function loadMessages(ctx) {
    const q = ctx.query;
    const params = new URLSearchParams({ limit: MESSAGE_PAGE });
    for (const k of ['queue', 'partition', 'status', 'to']) if (q.get(k)) params.set(k, q.get(k));
    const list = (await ctx.get(`/api/v1/messages?${params}`)).messages || [];
    const rows = list.map((m, i) => html`<tr data-testid="message-row" data-index="${i}"
        data-transaction="${m.transactionId}">
      <td>${when(m.createdAt)}</td><td><a href="#/queues/${enc(m.queue)}">${m.queue}</a></td>
      <td>${m.partition}</td><td class="mono">${m.transactionId}</td><td>${badge(m.status)}</td>
      <td class="actions"><button type="button" class="small" data-act="view"
        data-testid="message-view">View</button><button type="button" class="small"
        data-act="retry" data-testid="message-retry"
        ${m.status === 'dead_letter' ? '' : html`disabled title="only a dead letter is retried"`}
        >Retry</button><button type="button" class="small danger" data-act="delete"
        data-testid="message-delete">Delete</button></td></tr>`);
    const older = list.length >= MESSAGE_PAGE ? olderThan(list[list.length - 1].createdAt) : '';
    mount($('#m-list', ctx.root), [
      table('messages-table', [['Created'], ['Queue'], ['Partition'], ['Transaction'],
        ['Status'], ['', 'actions']], rows, 'No message matches.'),
      html`<div class="pager"><span data-testid="messages-info">${num(list.length)} shown</span>
        <span class="grow"></span>
        <button type="button" data-testid="messages-newest" ${q.get('to') ? '' : html`disabled`}
          >Newest</button>
        <button type="button" data-testid="messages-older" ${older ? '' : html`disabled`}
          >Older ›</button></div>`,
    ]);
    wireMessages(ctx, list, older);
  }

  // The `to` bound for the next page: one microsecond before the oldest message shown.
  function olderThan(iso) {
    const m = /^(.*\.)(\d{6})Z$/.exec(iso || '');
    if (m && Number(m[2]) > 0) return `${m[1]}${String(Number(m[2]) - 1).padStart(6, '0')}Z`;
    const t = new Date(iso).getTime();
    return Number.isNaN(t) ? '' : new Date(t - 1).toISOString().replace(/Z$/, '999Z');
  }

  function wireMessages(ctx, list, older) {
    const root = $('#m-list', ctx.root);
    const onClick = (testid, fn) =>
      $(`[data-testid="${testid}"]`, root).addEventListener('click', fn);
    onClick('messages-older', () => setQuery({ to: older }));
    onClick('messages-newest', () => setQuery({ to: '' }));
    root.addEventListener('click', guard(async (ev) => {
      const button = ev.target.closest('button[data-act]');
      const row = button && button.closest('tr[data-index]');
      if (!row) return;
      const m = list[Number(row.dataset.index)];
      if (button.dataset.act === 'view') await viewMessage(ctx, m);
      if (button.dataset.act === 'retry') await retryMessage(m);
      if (button.dataset.act === 'delete') await deleteMessage(m);
    }));
  }

  const messagePath = (m) => `/api/v1/messages/${enc(m.partitionId)}/${enc(m.transactionId)}`;

  async function viewMessage(ctx, m) {
    const d = await ctx.get(messagePath(m));
    const viewer = $('#m-viewer', ctx.root);
    mount(viewer, html`<div class="panel" data-testid="message-viewer">
      <div class="panel-head"><h2>Message <span class="mono">${d.transactionId}</span></h2>
        <button type="button" class="small" data-testid="message-viewer-close">Close</button></div>
      <div class="grid two"><dl class="kv">
        <dt>Queue</dt><dd>${d.queue}</dd><dt>Partition</dt><dd>${d.partition}</dd>
        <dt>Partition id</dt><dd>${d.partitionId}</dd><dt>Offset</dt><dd>${num(d.offset)}</dd>
        <dt>Status</dt><dd>${badge(d.status || 'unknown')}</dd>
        <dt>Created</dt><dd>${when(d.createdAt)}</dd>
        <dt>Retries</dt><dd>${num(d.retryCount)}</dd>
        <dt>Error</dt><dd>${d.errorMessage || DASH}</dd>
        <dt>Groups</dt><dd>${(d.consumerGroups || []).map((g) => `${g.name}${g.consumed
          ? ' ✓' : ''}`).join(', ') || DASH}</dd></dl>
      <pre class="json" data-testid="message-payload">${jsonHtml(d.data ?? d.payload ?? null)}</pre>
      </div></div>`);
    $('[data-testid="message-viewer-close"]', viewer).addEventListener('click', () =>
      mount(viewer, ''));
    viewer.scrollIntoView({ block: 'nearest' });
  }

  async function retryMessage(m) {
    if (!(await ask(`Put message ${m.transactionId} back on ${m.queue}?`, 'Retry'))) return;
    await api(`${messagePath(m)}/retry`, { method: 'POST' });
    navigate();
    notify(`Message ${m.transactionId} is back on ${m.queue}.`);
  }

  async function deleteMessage(m) {
    if (!(await ask(`Delete message ${m.transactionId} from ${m.queue}/${m.partition}?`,
      'Delete'))) return;
    await api(messagePath(m), { method: 'DELETE' });
    navigate();
    notify(`Message ${m.transactionId} deleted.`);
  }

  // ================================================================== dead letters

  const DLQ_PAGE = 50;

  async function dlqPage(ctx) {
    const q = ctx.query;
    const offset = Math.max(0, Number(q.get('offset')) || 0);
    mount(ctx.root, html`<section data-page="dlq">
      <div class="page-head"><h1>Dead letters</h1>
        <span class="sub" data-testid="dlq-total" id="dlq-total"></span></div>
      <div class="panel"><form class="toolbar" id="dlq-filter" data-testid="dlq-filter">
        <input name="queue" placeholder="Queue (any)" value="${q.get('queue') || ''}"
          data-testid="dlq-queue-input">
        <input name="group" placeholder="Consumer group (any)" value="${q.get('group') || ''}"
          data-testid="dlq-group-input">
        <button type="submit" class="primary">Filter</button><span class="grow"></span>
        <button type="button" data-testid="dlq-replay-selected" disabled>Replay selected</button>
      </form><div id="dlq-list">Loading…</div></div></section>`);
    $('#dlq-filter', ctx.root).addEventListener('submit', (ev) => {
      ev.preventDefault();
      setQuery({ ...formValues(ev.target), offset: 0 });
    });
    const params = new URLSearchParams({ limit: DLQ_PAGE, offset });
    if (q.get('queue')) params.set('queue', q.get('queue'));
    if (q.get('group')) params.set('consumerGroup', q.get('group'));
    const d = await ctx.get(`/api/v1/dlq?${params}`);
    renderDlq(ctx, d.messages || [], offset, d.total);
  }

  function renderDlq(ctx, list, offset, total) {
    $('#dlq-total', ctx.root).textContent = `${num(total)} dead letters`;
    const rows = list.map((m, i) => html`<tr data-testid="dlq-row" data-index="${i}"
        data-transaction="${m.transactionId}">
      <td><input type="checkbox" data-testid="dlq-select" aria-label="select"></td>
      <td><a href="#/queues/${enc(m.queue)}">${m.queue}</a></td><td>${m.partition}</td>
      <td>${groupLabel(m.consumerGroup)}</td><td class="mono">${m.transactionId}</td>
      <td class="wrap">${m.errorMessage || DASH}</td><td class="num">${num(m.retryCount)}</td>
      <td>${when(m.failedAt)}</td>
      <td class="actions"><button type="button" class="small" data-act="view"
        data-testid="dlq-view">Payload</button><button type="button" class="small primary"
        data-act="replay" data-testid="dlq-replay">Replay</button></td></tr>
      <tr class="detail" data-detail="${i}" hidden><td colspan="9"></td></tr>`);
    mount($('#dlq-list', ctx.root), [
      table('dlq-table', [[html`<input type="checkbox" data-testid="dlq-select-all"
        aria-label="select all">`], ['Queue'], ['Partition'], ['Group'], ['Transaction'],
      ['Error'], ['Retries', 'num'], ['Failed at'], ['', 'actions']], rows, 'No dead letter.'),
      pager('dlq', offset, DLQ_PAGE, list.length, total),
    ]);
    wireDlq(ctx, list);
  }

  function wireDlq(ctx, list) {
    const root = ctx.root;
    wirePager(root, 'dlq', (o) => setQuery({ offset: o }));
    const boxes = $$('[data-testid="dlq-select"]', root);
    const replaySelected = $('[data-testid="dlq-replay-selected"]', root);
    const sync = () => {
      const n = boxes.filter((b) => b.checked).length;
      replaySelected.disabled = n === 0;
      replaySelected.textContent = n ? `Replay selected (${n})` : 'Replay selected';
      boxes.forEach((b) => b.closest('tr').classList.toggle('selected', b.checked));
    };
    const all = $('[data-testid="dlq-select-all"]', root);
    all.addEventListener('change', () => {
      boxes.forEach((b) => { b.checked = all.checked; });
      sync();
    });
    boxes.forEach((b) => b.addEventListener('change', sync));
    replaySelected.addEventListener('click', guard(() => replayMany(list.filter((m, i) =>
      boxes[i].checked))));
    $('#dlq-list', root).addEventListener('click', guard(async (ev) => {
      const button = ev.target.closest('button[data-act]');
      const row = button && button.closest('tr[data-index]');
      if (!row) return;
      const m = list[Number(row.dataset.index)];
      if (button.dataset.act === 'view') toggleDlqPayload(root, row.dataset.index, m);
      if (button.dataset.act === 'replay') await replayMany([m]);
    }));
  }

  function toggleDlqPayload(root, index, m) {
    const detail = $(`tr[data-detail="${index}"]`, root);
    detail.hidden = !detail.hidden;
    if (!detail.hidden) {
      mount(detail.firstElementChild, html`<pre class="json" data-testid="dlq-payload">${
        jsonHtml(m.data ?? null)}</pre>`);
    }
  }

  // Replays one after another; stops at the first failure (it is on the banner).
  async function replayMany(list) {
    if (!list.length) return;
    let done = 0;
    try {
      for (const m of list) {
        await api(`/api/v1/dlq/${enc(m.dlqId ?? m.id)}/replay`, { method: 'POST' });
        done++;
      }
    } finally {
      if (done) {
        navigate();
        notify(done === 1 ? `Replayed ${list[0].transactionId} into ${list[0].queue}.`
          : `Replayed ${done} dead letters.`);
      }
    }
  }

  // ================================================================== KV and timers

  async function kvPage(ctx) {
    const q = ctx.query;
    mount(ctx.root, html`<section data-page="kv">
      <div class="page-head"><h1>KV and timers</h1></div>
      <div class="grid two">
        <div class="panel" data-testid="kv-panel"><h2>Key-value store</h2>
          <form class="fields" id="kv-form">
            <label>Namespace<input name="ns" required value="${q.get('ns') || ''}"
              data-testid="kv-ns" placeholder="e.g. app"></label>
            <label>Key<input name="key" required value="${q.get('key') || ''}"
              data-testid="kv-key"></label>
            <label class="wide">Value (JSON)<textarea name="value" data-testid="kv-value"
              placeholder='{"hello": "world"}'></textarea></label>
            <label>TTL seconds<input name="ttl" type="number" min="1" placeholder="forever"></label>
            <div class="buttons wide">
              <button type="button" data-act="get" data-testid="kv-get">Get</button>
              <button type="button" class="primary" data-act="put" data-testid="kv-put">Put</button>
              <button type="button" class="danger" data-act="delete"
                data-testid="kv-delete">Delete</button></div>
          </form>
          <div id="kv-result" data-testid="kv-result" style="margin-top:12px"></div>
          <h2 style="margin-top:18px">Browse keys</h2>
          <form class="toolbar" id="kv-browse">
            <input name="browseNs" placeholder="Namespace" required data-testid="kv-browse-ns"
              value="${q.get('browseNs') || q.get('ns') || ''}">
            <input name="browsePrefix" placeholder="Key prefix" required
              data-testid="kv-browse-prefix" value="${q.get('browsePrefix') || ''}">
            <button type="submit" class="primary" data-testid="kv-browse-list">List</button></form>
          <div id="kv-keys"></div></div>
        <div class="panel" data-testid="timers-panel"><h2>Timers</h2>
          <form class="toolbar" id="t-form">
            <input name="timerQueue" placeholder="Queue" required
              value="${q.get('timerQueue') || ''}" data-testid="timers-queue">
            <input name="prefix" placeholder="Key prefix" value="${q.get('prefix') || ''}">
            <button type="submit" class="primary" data-testid="timers-list">List</button></form>
          <div id="t-list"></div></div>
      </div></section>`);
    wireKv(ctx);
    if (q.get('ns') && q.get('key')) await kvAct(ctx, 'get');
    if (q.get('browseNs') && q.get('browsePrefix')) await browseKeys(ctx, '');
    if (q.get('timerQueue')) await loadTimers(ctx, q.get('after') || '');
  }

  function wireKv(ctx) {
    const form = $('#kv-form', ctx.root);
    form.addEventListener('submit', (ev) => ev.preventDefault());
    form.addEventListener('click', guard(async (ev) => {
      const button = ev.target.closest('button[data-act]');
      if (button) await kvAct(ctx, button.dataset.act);
    }));
    $('#kv-browse', ctx.root).addEventListener('submit', guard(async (ev) => {
      ev.preventDefault();
      await browseKeys(ctx, '');
    }));
    $('#t-form', ctx.root).addEventListener('submit', (ev) => {
      ev.preventDefault();
      const kv = formValues(form);
      const browse = formValues($('#kv-browse', ctx.root));
      setQuery({ ...formValues(ev.target), ...browse, ns: kv.ns, key: kv.key, after: '' });
    });
  }

  async function kvAct(ctx, act) {
    const form = $('#kv-form', ctx.root);
    if (!form.reportValidity()) return;
    const v = formValues(form);
    const path = `/api/v1/kv/${enc(v.ns)}/${enc(v.key)}`;
    if (act === 'delete' && !(await ask(`Delete key "${v.key}" in "${v.ns}"?`, 'Delete'))) return;
    if (act === 'put') await kvPut(path, v);
    if (act === 'delete') {
      await api(path, { method: 'DELETE' });
      notify(`Key ${v.key} deleted.`);
    }
    await kvShow(ctx, path, act === 'get');
    // The key goes into the address (without a reload), so a link or a timer listing keeps it.
    const params = Object.fromEntries(ctx.query.entries());
    history.replaceState(null, '', hashFor('/kv', { ...params, ns: v.ns, key: v.key }));
  }

  async function kvPut(path, v) {
    let value;
    try {
      value = JSON.parse(v.value || 'null');
    } catch (e) {
      throw new ApiError(0, `the value is not JSON: ${e.message}`);
    }
    const body = { value };
    if (v.ttl) body.ttlSeconds = Number(v.ttl);
    else body.forever = true;
    await api(path, { method: 'PUT', body });
    notify('Key saved.');
  }

  async function kvShow(ctx, path, fillValue) {
    const out = $('#kv-result', ctx.root);
    let row;
    try {
      row = (await api(path)).data;
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 404 || !ctx.alive()) throw e;
      mount(out, html`<div class="unavailable" data-testid="kv-absent">No such key (404).</div>`);
      return;
    }
    if (!ctx.alive()) return;
    if (fillValue) {
      $('[data-testid="kv-value"]', ctx.root).value = JSON.stringify(row.value, null, 2);
    }
    mount(out, html`<dl class="kv" style="margin-bottom:10px"><dt>Version</dt>
      <dd data-testid="kv-version">${num(row.version)}</dd>
      <dt>Updated</dt><dd>${when(row.updatedAt)}</dd>
      <dt>Expires</dt><dd>${row.expiresAt ? when(row.expiresAt) : 'never'}</dd></dl>
      <pre class="json" data-testid="kv-json">${jsonHtml(row.value ?? null)}</pre>`);
  }

  // A page of a namespace's keys under a prefix (the getPrefix operation, keys only); a key
  // opens in the form above, Next follows nextAfter.
  async function browseKeys(ctx, after) {
    const form = $('#kv-browse', ctx.root);
    if (!form.reportValidity()) return;
    const v = formValues(form);
    const op = { op: 'getPrefix', ns: v.browseNs, prefix: v.browsePrefix, keysOnly: true,
      limit: 50 };
    if (after) op.after = after;
    const d = (await api('/api/v1/kv', { method: 'POST', body: { operations: [op] } })).data;
    const result = (d.results || [])[0] || {};
    if (!ctx.alive()) return;
    const rows = (result.rows || []).map((r) => html`<tr data-testid="kv-key-row">
      <td><a href="#" class="mono" data-key="${r.key}">${r.key}</a></td>
      <td class="num">${num(r.version)}</td>
      <td>${r.expiresAt ? when(r.expiresAt) : 'never'}</td></tr>`);
    const next = result.truncated && result.nextAfter
      ? html`<button type="button" data-testid="kv-keys-next">Next</button>` : '';
    mount($('#kv-keys', ctx.root), rows.length
      ? html`<table><thead><tr><th>Key</th><th class="num">Version</th><th>Expires</th></tr>
        </thead><tbody>${rows}</tbody></table><div class="buttons">${next}</div>`
      : html`<div class="unavailable" data-testid="kv-keys-none">No keys with this prefix.</div>`);
    wireKeyBrowser(ctx, v, result.nextAfter);
  }

  function wireKeyBrowser(ctx, v, nextAfter) {
    const list = $('#kv-keys', ctx.root);
    list.onclick = guard(async (ev) => {
      if (ev.target.closest('[data-testid="kv-keys-next"]')) return browseKeys(ctx, nextAfter);
      const link = ev.target.closest('a[data-key]');
      if (!link) return undefined;
      ev.preventDefault();
      const form = $('#kv-form', ctx.root);
      form.elements.ns.value = v.browseNs;
      form.elements.key.value = link.dataset.key;
      return kvAct(ctx, 'get');
    });
  }

  async function loadTimers(ctx, after) {
    const q = ctx.query;
    const queue = q.get('timerQueue');
    const params = new URLSearchParams({ limit: 100 });
    if (q.get('prefix')) params.set('prefix', q.get('prefix'));
    if (after) params.set('after', after);
    const d = await ctx.get(`/api/v1/timers/${enc(queue)}?${params}`);
    const list = d.rows || [];
    const rows = list.map((t, i) => html`<tr data-testid="timer-row" data-index="${i}">
      <td class="mono">${t.timerKey}</td><td>${t.partition || DASH}</td>
      <td>${when(t.deliverAt)}</td><td class="num">${num(t.attempts)}</td>
      <td class="actions"><button type="button" class="small danger" data-act="cancel"
        data-testid="timer-cancel">Cancel</button></td></tr>`);
    mount($('#t-list', ctx.root), [
      table('timers-table', [['Key'], ['Partition'], ['Due'], ['Attempts', 'num'],
        ['', 'actions']], rows, `No timer on ${queue}.`),
      html`<div class="pager"><span>${num(list.length)} shown</span><span class="grow"></span>
        <button type="button" data-testid="timers-next" ${d.truncated ? '' : html`disabled`}
          >Next ›</button></div>`,
    ]);
    wireTimers(ctx, queue, list, d.nextAfter);
  }

  function wireTimers(ctx, queue, list, nextAfter) {
    const root = $('#t-list', ctx.root);
    $('[data-testid="timers-next"]', root).addEventListener('click', () =>
      setQuery({ after: nextAfter || '' }));
    root.addEventListener('click', guard(async (ev) => {
      const button = ev.target.closest('button[data-act="cancel"]');
      const row = button && button.closest('tr[data-index]');
      if (!row) return;
      const t = list[Number(row.dataset.index)];
      if (!(await ask(`Cancel timer "${t.timerKey}" on ${queue}?`, 'Cancel timer'))) return;
      await api(`/api/v1/timers/${enc(queue)}/${enc(t.timerKey)}`, { method: 'DELETE' });
      navigate();
      notify(`Timer ${t.timerKey} cancelled.`);
    }));
  }

  // ================================================================== cluster

  async function clusterPage(ctx) {
    mount(ctx.root, html`<section data-page="cluster">
      <div class="page-head"><h1>Cluster</h1></div>
      <div class="cards" id="c-cards" data-testid="cluster-health"></div>
      <div class="panel"><h2>Members</h2><div id="c-members" data-testid="cluster-members">
        Loading…</div></div>
      <div class="grid two">${clusterForms()}</div></section>`);
    wireClusterForms(ctx);
    const [, members] = await Promise.all([clusterHealth(ctx), clusterMembers(ctx)]);
    // A node that refused the membership read (a single node) is not asked again and again.
    ctx.every(5000, () => Promise.all([clusterHealth(ctx), members && clusterMembers(ctx)]));
  }

  async function clusterHealth(ctx) {
    let h;
    try {
      h = await ctx.get('/health');
    } catch (e) {
      if (!(e instanceof ApiError) || !e.body || !e.body.raft) throw e;
      h = e.body;
    }
    const r = h.raft || {};
    mount($('#c-cards', ctx.root), [
      card('This node', num(r.nodeId), h.version, 'cluster-node'),
      card('Role', html`<span class="value small">${badge(r.role)}</span>`, h.status,
        'cluster-role'),
      card('Leader', r.leader ? num(r.leader) : 'none', null, 'cluster-leader'),
      card('Term', num(r.term), null, 'cluster-term'),
      card('Commit', num(r.commit), `applied ${num(r.applied)}`, 'cluster-commit'),
      card('Apply lag', num(r.lag), 'entries', 'cluster-apply-lag'),
    ]);
  }

  const MEMBERSHIP_TIMEOUT_MS = 5000;

  // The membership route is admin-only and may refuse (one node, no leader): said in place.
  async function clusterMembers(ctx) {
    const slot = $('#c-members', ctx.root);
    let d;
    try {
      d = await ctx.get(`/api/v1/system/raft/membership?timeoutMs=${MEMBERSHIP_TIMEOUT_MS}`);
    } catch (e) {
      if (!(e instanceof ApiError) || !ctx.alive()) throw e;
      if (e.status === 401 || e.status === 403) showError(e);
      mount(slot, html`<div class="unavailable" data-testid="membership-unavailable">Membership
        is not available: ${e.status ? `${e.status} ` : ''}${e.message}</div>`);
      return false;
    }
    const rows = (d.members || []).map((m) => html`<tr data-testid="member-row"
        data-member="${m.id}"><td>${m.id}${m.id === d.leader ? html` ${badge('leader')}` : ''}</td>
      <td>${badge(m.role)}</td><td class="mono">${m.raft}</td><td class="mono">${m.http}</td>
      <td class="num">${num(m.match)}</td><td class="num">${num(m.lag)}</td>
      <td>${m.fenced ? badge('fenced') : 'no'}</td></tr>`);
    mount(slot, [
      html`<p class="sub">Cluster <span class="mono">${d.clusterId}</span> · term ${num(d.term)} ·
        commit ${num(d.commit)} · configuration at ${num(d.configIndex)}
        ${d.committed ? '(committed)' : '(not yet committed)'}</p>`,
      table('members-table', [['Id'], ['Role'], ['Raft address'], ['HTTP address'],
        ['Match', 'num'], ['Lag', 'num'], ['Fenced']], rows, 'No member.'),
    ]);
    return true;
  }

  function clusterForms() {
    return html`<div class="panel"><h2>Add a learner</h2>
      <form class="fields" id="c-learner" data-testid="learner-form">
        <label>Node id<input name="id" type="number" min="1" required></label>
        <label>Raft address<input name="raft" placeholder="host:port" required></label>
        <label>HTTP address<input name="http" placeholder="host:port" required></label>
        <div class="buttons"><button type="submit" class="primary"
          data-testid="learner-add">Add learner</button></div></form></div>
      <div class="panel"><h2>Promote or remove</h2>
      <form class="fields" id="c-member" data-testid="member-form">
        <label>Node id<input name="id" type="number" min="1" required></label>
        <div class="buttons">
          <button type="submit" data-act="promote" data-testid="member-promote">Promote to voter
          </button><button type="submit" class="danger" data-act="remove"
            data-testid="member-remove">Remove</button></div></form></div>`;
  }

  function wireClusterForms(ctx) {
    $('#c-learner', ctx.root).addEventListener('submit', guard(async (ev) => {
      ev.preventDefault();
      const v = formValues(ev.target);
      await api('/api/v1/system/raft/learners', { method: 'POST',
        body: { id: Number(v.id), raft: v.raft, http: v.http } });
      navigate();
      notify(`Node ${v.id} added as a learner.`);
    }));
    $('#c-member', ctx.root).addEventListener('submit', guard(async (ev) => {
      ev.preventDefault();
      const v = formValues(ev.target);
      const act = ev.submitter ? ev.submitter.dataset.act : 'promote';
      if (act === 'remove') {
        if (!(await ask(`Remove node ${v.id} from the cluster?`, 'Remove node'))) return;
        await api(`/api/v1/system/raft/members/${enc(v.id)}`, { method: 'DELETE' });
      } else {
        await api('/api/v1/system/raft/promote', { method: 'POST', body: { ids: [Number(v.id)] } });
      }
      navigate();
      notify(act === 'remove' ? `Node ${v.id} removed.` : `Node ${v.id} promoted.`);
    }));
  }

  // ================================================================== start

  window.addEventListener('unhandledrejection', (ev) => showError(ev.reason));
  setupHeader();
  window.addEventListener('hashchange', navigate);
  setInterval(refreshPill, 10000);
  navigate();
})();
