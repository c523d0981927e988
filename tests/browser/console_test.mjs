// The web console in a real browser (headless Chromium through playwright-core), against a
// seeded node (run.sh). Each check reads what it expects from the API, drives the page like a
// person would, and waits by polling the DOM with a deadline. Any browser console error, page
// error or failed request (other than those a check provokes on purpose) fails the run.
//
//   node console_test.mjs http://127.0.0.1:PORT      (SCREENSHOTS=<dir> saves a PNG per page)
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const BASE = (process.argv[2] || process.env.QUEEN_URL || '').replace(/\/$/, '');
const SHOTS = process.env.SCREENSHOTS || '';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const STEP_MS = 15000;
if (!BASE) {
  console.error('usage: node console_test.mjs http://host:port');
  process.exit(2);
}

// ------------------------------------------------------------------ API access (from the test)

async function api(method, path, body) {
  const init = { method, headers: { 'Content-Type': 'application/json' } };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(BASE + path, init);
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  return { status: res.status, data };
}

async function apiOk(method, path, body) {
  const r = await api(method, path, body);
  if (r.status >= 400) throw new Error(`${method} ${path} answered ${r.status}`);
  return r.data;
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

// Equal as JSON values: the order of an object's keys does not matter.
function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]));
  }
  return v;
}

function sameJson(a, b) {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

// ------------------------------------------------------------------ browser and its errors

const problems = [];
const allowed = [];  // {method, path, status}: failures a check provokes on purpose

function allow(method, path, status) {
  allowed.push({ method, path, status });
}

function isAllowed(method, url, status) {
  const u = new URL(url);
  return allowed.some((a) => a.method === method && u.pathname === a.path &&
    (a.status === undefined || a.status === status));
}

function watch(page) {
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const url = (msg.location() && msg.location().url) || '';
    // A failed fetch is logged by the browser itself; it counts through the response below.
    if (/Failed to load resource/.test(msg.text()) && url.startsWith(BASE)) return;
    problems.push(`console error: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('requestfailed', (req) => {
    // A reload by a check cancels the fetches in flight: not a failure of the page or node.
    if (req.failure()?.errorText === 'net::ERR_ABORTED') return;
    problems.push(`request failed: ${req.method()} ${req.url()} (${req.failure()?.errorText})`);
  });
  page.on('response', (res) => {
    const req = res.request();
    if (res.status() >= 400 && !isAllowed(req.method(), res.url(), res.status())) {
      problems.push(`HTTP ${res.status()} on ${req.method()} ${res.url()}`);
    }
  });
}

// ------------------------------------------------------------------ page helpers

let page;

async function go(hash, pageName) {
  await page.goto(`${BASE}/${hash}`);
  await page.waitForSelector(`[data-page="${pageName}"]`, { timeout: STEP_MS });
}

async function waitCount(selector, n) {
  await page.waitForFunction(([s, k]) => document.querySelectorAll(s).length === k,
    [selector, n], { timeout: STEP_MS });
}

async function waitText(selector, expected) {
  try {
    await page.waitForFunction(([s, t]) => {
      const el = document.querySelector(s);
      return Boolean(el) && el.textContent.replace(/\s+/g, ' ').trim() === t;
    }, [selector, expected], { timeout: STEP_MS });
  } catch (e) {
    const got = await page.$eval(selector, (el) => el.textContent.trim()).catch(() => 'nothing');
    throw new Error(`${selector}: expected "${expected}", got "${got}"`);
  }
}

async function attrs(selector, name) {
  return page.$$eval(selector, (els, a) => els.map((e) => e.getAttribute(a)), name);
}

async function cardValue(testid) {
  return (await page.textContent(`[data-testid="${testid}"] .value`)).trim();
}

const fmt = (n) => Number(n).toLocaleString('en-US');

async function shot(name) {
  if (!SHOTS) return;
  await page.mouse.move(0, 0);
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

// Polls an async condition with a deadline (for effects seen through the API).
async function eventually(what, fn, ms = STEP_MS) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

// ------------------------------------------------------------------ the checks

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

check('overview shows the counts, the throughput chart and the Raft state', async () => {
  await go('#/', 'overview');
  const o = await apiOk('GET', '/api/v1/resources/overview');
  await waitText('[data-testid="stat-queues"] .value', fmt(o.queues));
  assert(await cardValue('stat-partitions') === fmt(o.partitions), 'partition count');
  assert(await cardValue('stat-dlq') === fmt(o.messages.deadLetter), 'dead-letter count');
  assert(await cardValue('stat-pending') === fmt(o.messages.pending), 'pending count');
  assert(await cardValue('stat-disk') === `${o.disk.usedPct}%`, 'disk use');
  const h = await apiOk('GET', '/health');
  await waitText('[data-testid="raft-role"]', h.raft.role);
  await waitText('[data-testid="raft-term"]', fmt(h.raft.term));
  // The pushes of the seeding show as a rise of the "in" line above its baseline.
  await page.waitForFunction(() => {
    const line = document.querySelector('svg.chart polyline[data-series="ingested"]');
    if (!line) return false;
    const ys = line.getAttribute('points').split(' ').map((p) => Number(p.split(',')[1]));
    return ys.length > 10 && Math.min(...ys) < Math.max(...ys);
  }, null, { timeout: STEP_MS });
  await shot('overview');
});

check('queues list matches the API, pages, and searches on the server', async () => {
  const api1 = await apiOk('GET', '/api/v1/status/queues?limit=50&offset=0');
  await go('#/queues', 'queues');
  await waitCount('[data-testid="queue-row"]', api1.queues.length);
  const names = await attrs('[data-testid="queue-row"]', 'data-queue');
  assert(sameJson(names, api1.queues.map((q) => q.name)), `queue rows ${names}`);
  for (const q of ['orders', 'fanout', 'payments']) assert(names.includes(q), `no row for ${q}`);
  const fan = api1.queues.find((q) => q.name === 'fanout');
  const cells = await page.$$eval('[data-queue="fanout"] td',
    (tds) => tds.map((t) => t.textContent));
  // 300 pushed partitions (and the Default one a configure creates).
  assert(fan.partitions >= 300, `the API counts ${fan.partitions} partitions of fanout`);
  assert(cells[3] === fmt(fan.partitions), `fanout row ${cells}`);
  // Markup in a queue name is shown as text, never as markup.
  assert(await page.$('[data-testid="queues-table"] b') === null, 'a queue name became markup');
  assert(names.includes('xss<b>bold<b>'), 'the queue with markup in its name is missing');
  await shot('queues');
  await page.fill('[data-testid="queues-search-input"]', 'fan');
  await page.press('[data-testid="queues-search-input"]', 'Enter');
  await waitCount('[data-testid="queue-row"]', 1);
  assert(sameJson(await attrs('[data-testid="queue-row"]', 'data-queue'), ['fanout']), 'search');
});

check('a 300-partition queue pages its partitions 50 at a time', async () => {
  const p1 = await apiOk('GET', '/api/v1/status/queues/fanout?limit=50&offset=0');
  const p2 = await apiOk('GET', '/api/v1/status/queues/fanout?limit=50&offset=50');
  const total = fmt(p1.pagination.total);
  assert(p1.pagination.total >= 300, `the API pages ${total} partitions of fanout`);
  await go('#/queues/fanout', 'queue-detail');
  await waitText('[data-testid="queue-partition-count"] .value', total);
  await waitCount('[data-testid="partition-row"]', 50);
  const first = await attrs('[data-testid="partition-row"]', 'data-partition');
  assert(sameJson(first, p1.partitions.map((p) => p.name)), 'first page is not the API first page');
  await waitText('[data-testid="partitions-info"]', `1–50 of ${total}`);
  await shot('queue-detail');
  await page.click('[data-testid="partitions-next"]');
  await waitText('[data-testid="partitions-info"]', `51–100 of ${total}`);
  await waitCount('[data-testid="partition-row"]', 50);
  const second = await attrs('[data-testid="partition-row"]', 'data-partition');
  assert(sameJson(second, p2.partitions.map((p) => p.name)), 'second page differs from the API');
  assert(second.every((n) => !first.includes(n)), 'Next showed partitions of the first page');
  await page.click('[data-testid="partitions-prev"]');
  await waitText('[data-testid="partitions-info"]', `1–50 of ${total}`);
});

check('the configure form changes a queue, seen through the API', async () => {
  await go('#/queues/orders', 'queue-detail');
  const before = (await apiOk('GET', '/api/v1/status/queues/orders?limit=1')).queue.config;
  await page.waitForSelector('#qd-form input[name="retryLimit"]', { timeout: STEP_MS });
  assert(await page.inputValue('input[name="leaseTime"]') === String(before.leaseTime), 'lease');
  const want = before.retryLimit + 2;
  await page.fill('input[name="retryLimit"]', String(want));
  await page.click('[data-testid="configure-submit"]');
  await page.waitForSelector('[data-testid="notice"]:not([hidden])', { timeout: STEP_MS });
  await eventually('retryLimit to change', async () =>
    (await apiOk('GET', '/api/v1/status/queues/orders?limit=1')).queue.config.retryLimit === want);
});

check('an unknown queue shows the API error on the banner', async () => {
  const path = '/api/v1/status/queues/no-such-queue';
  const r = await api('GET', path);
  assert(r.status === 404 && r.data && r.data.error, `the API answers ${r.status} for ${path}`);
  allow('GET', path, 404);
  await go('#/queues/no-such-queue', 'queue-detail');
  await page.waitForSelector('[data-testid="error-banner"]:not([hidden])', { timeout: STEP_MS });
  const text = (await page.textContent('[data-testid="error-banner"]')).replace(/\s+/g, ' ');
  assert(text.includes('404') && text.includes(r.data.error), `banner says "${text.trim()}"`);
  await page.waitForSelector('[data-testid="queue-missing"]', { timeout: STEP_MS });
});

check('consumer groups: the list, a group\'s lag per partition, and seek to end', async () => {
  const list = await apiOk('GET', '/api/v1/consumer-groups');
  await go('#/groups', 'groups');
  await waitCount('[data-testid="group-row"]', Math.min(50, list.length));
  const rows = await page.$$eval('[data-testid="group-row"]',
    (trs) => trs.map((tr) => `${tr.dataset.group}@${tr.dataset.queue}`));
  assert(rows.includes('analytics@orders'), `group rows ${rows}`);
  await shot('groups');
  await page.click('[data-group="analytics"] a');
  await page.waitForSelector('[data-page="group-detail"]', { timeout: STEP_MS });
  const d = (await apiOk('GET', '/api/v1/consumer-groups/analytics')).orders;
  await waitCount('[data-testid="group-partition-row"]', d.partitions.length);
  for (const p of d.partitions) {
    const lag = await page.textContent(`[data-testid="group-partition-row"][data-partition="${
      p.partition}"] td:nth-child(2)`);
    assert(lag.trim() === fmt(p.offsetLag), `lag of ${p.partition}: ${lag} vs ${p.offsetLag}`);
  }
  assert(d.totalLag > 0, 'the seeded group should lag');
  await checkGroupPaging();
  await go('#/groups/analytics', 'group-detail');
  await waitCount('[data-testid="group-partition-row"]', d.partitions.length);
  await page.click('[data-testid="seek-end"]');
  await page.waitForSelector('[data-testid="confirm-dialog"]:not([hidden])', { timeout: STEP_MS });
  await page.click('[data-testid="confirm-ok"]');
  await eventually('the group to be at the end', async () =>
    (await apiOk('GET', '/api/v1/consumer-groups/analytics')).orders.totalLag === 0);
});

// A group over more partitions than a page: the node answers one page at a time.
async function checkGroupPaging() {
  const all = (await apiOk('GET', '/api/v1/consumer-groups/scan')).fanout.partitions;
  assert(all.length > 100, `the scan group should cover over 100 partitions, has ${all.length}`);
  const page2 = (await apiOk('GET', '/api/v1/consumer-groups/scan?queue=fanout&limit=50&offset=50'))
    .fanout;
  assert(page2.pagination.total === all.length, `pagination total ${page2.pagination.total}`);
  await go('#/groups/scan', 'group-detail');
  await waitCount('[data-testid="group-partition-row"]', 50);
  await page.click('[data-testid="group-partitions-next"]');
  await page.waitForFunction((first) => {
    const row = document.querySelector('[data-testid="group-partition-row"]');
    return Boolean(row) && row.dataset.partition === first;
  }, page2.partitions[0].partition, { timeout: STEP_MS });
  const shown = await attrs('[data-testid="group-partition-row"]', 'data-partition');
  assert(sameJson(shown, page2.partitions.map((p) => p.partition)), 'page 2 differs from the API');
}

check('messages: browse a queue and open a payload', async () => {
  const list = (await apiOk('GET', '/api/v1/messages?queue=orders&limit=50')).messages;
  await go('#/messages?queue=orders', 'messages');
  await waitCount('[data-testid="message-row"]', list.length);
  const txns = await attrs('[data-testid="message-row"]', 'data-transaction');
  assert(sameJson(txns, list.map((m) => m.transactionId)), 'message rows differ from the API');
  await page.click('[data-testid="message-row"]:first-child [data-testid="message-view"]');
  await page.waitForSelector('[data-testid="message-payload"]', { timeout: STEP_MS });
  const m = list[0];
  const full = await apiOk('GET', `/api/v1/messages/${m.partitionId}/${m.transactionId}`);
  const shown = JSON.parse(await page.textContent('[data-testid="message-payload"]'));
  assert(sameJson(shown, full.data), `payload shown ${JSON.stringify(shown)}`);
  await shot('messages');
  await page.selectOption('[data-testid="messages-status-select"]', 'dead_letter');
  await page.fill('[data-testid="messages-queue-input"]', 'payments');
  await page.click('[data-testid="messages-browse"]');
  const dead = (await apiOk('GET', '/api/v1/messages?queue=payments&status=dead_letter')).messages;
  await waitCount('[data-testid="message-row"]', dead.length);
  assert(dead.length >= 2, 'seeded dead letters are missing');
});

check('a payload with markup is shown as text', async () => {
  const list = (await apiOk('GET', `/api/v1/messages?queue=${encodeURIComponent('xss<b>bold<b>')}`))
    .messages;
  await go(`#/messages?queue=${encodeURIComponent('xss<b>bold<b>')}`, 'messages');
  await waitCount('[data-testid="message-row"]', list.length);
  await page.click('[data-testid="message-view"]');
  await page.waitForSelector('[data-testid="message-payload"]', { timeout: STEP_MS });
  assert(await page.$('[data-testid="message-payload"] i') === null, 'payload became markup');
  assert((await page.textContent('[data-testid="message-payload"]')).includes('<i>x</i>'), 'text');
});

check('dead letters: replay one by its button, then the selected one', async () => {
  const before = await apiOk('GET', '/api/v1/dlq?queue=payments&limit=50');
  assert(before.total >= 3, `seeded ${before.total} dead letters, want 3`);
  await go('#/dlq?queue=payments', 'dlq');
  await waitCount('[data-testid="dlq-row"]', before.messages.length);
  await waitText('[data-testid="dlq-total"]', `${fmt(before.total)} dead letters`);
  await shot('dlq');
  const target = before.messages[0];
  await page.click(`[data-testid="dlq-row"][data-transaction="${target.transactionId}"] ` +
    '[data-testid="dlq-replay"]');
  await waitCount('[data-testid="dlq-row"]', before.messages.length - 1);
  const after = await apiOk('GET', '/api/v1/dlq?queue=payments&limit=50');
  assert(after.total === before.total - 1, `DLQ total ${before.total} -> ${after.total}`);
  assert(!after.messages.some((m) => m.transactionId === target.transactionId), 'still listed');
  // The replayed message is a live one again: a queue-mode pop hands it out.
  const popped = await eventually('the replayed message to pop', async () => {
    const r = await api('GET', '/api/v1/pop/queue/payments?batch=10&wait=false');
    return r.status === 200 ? r.data : null;
  });
  assert(popped.messages.some((m) => sameJson(m.data, target.data)), 'replayed payload not popped');
  await page.check('[data-testid="dlq-row"]:first-child [data-testid="dlq-select"]');
  await waitText('[data-testid="dlq-replay-selected"]', 'Replay selected (1)');
  await page.click('[data-testid="dlq-replay-selected"]');
  await waitCount('[data-testid="dlq-row"]', before.messages.length - 2);
  const last = await apiOk('GET', '/api/v1/dlq?queue=payments&limit=50');
  assert(last.total === before.total - 2, `DLQ total after "Replay selected": ${last.total}`);
});

check('KV: get, put and see the new version; timers of a queue', async () => {
  await go('#/kv', 'kv');
  await page.fill('[data-testid="kv-ns"]', 'app');
  await page.fill('[data-testid="kv-key"]', 'greeting');
  await page.click('[data-testid="kv-get"]');
  await page.waitForSelector('[data-testid="kv-json"]', { timeout: STEP_MS });
  const row = await apiOk('GET', '/api/v1/kv/app/greeting');
  assert(sameJson(JSON.parse(await page.textContent('[data-testid="kv-json"]')), row.value), 'kv');
  await page.fill('[data-testid="kv-value"]', '{"hello":"console","count":4}');
  await page.click('[data-testid="kv-put"]');
  // Versions come from one sequence for every key: the new one is the node's, and newer.
  await page.waitForFunction((v) => {
    const el = document.querySelector('[data-testid="kv-version"]');
    return Boolean(el) && el.textContent.trim() !== v;
  }, fmt(row.version), { timeout: STEP_MS });
  const now = await apiOk('GET', '/api/v1/kv/app/greeting');
  assert(now.version > row.version, `version ${now.version} after ${row.version}`);
  await waitText('[data-testid="kv-version"]', fmt(now.version));
  assert(sameJson(now.value, { hello: 'console', count: 4 }), `stored ${JSON.stringify(now)}`);
  // Keys under a prefix, a page at a time; a listed key opens in the form.
  await page.fill('[data-testid="kv-browse-ns"]', 'app');
  await page.fill('[data-testid="kv-browse-prefix"]', 'user.');
  await page.click('[data-testid="kv-browse-list"]');
  await waitCount('[data-testid="kv-key-row"]', 50);
  const keysShown = () =>
    page.$$eval('[data-testid="kv-key-row"] a', (as) => as.map((a) => a.textContent));
  const firstPage = await keysShown();
  await page.click('[data-testid="kv-keys-next"]');
  await waitCount('[data-testid="kv-key-row"]', 10);
  const secondPage = await keysShown();
  const listed = await apiOk('POST', '/api/v1/kv', { operations: [
    { op: 'getPrefix', ns: 'app', prefix: 'user.', keysOnly: true, limit: 1000 }] });
  assert(sameJson([...firstPage, ...secondPage], listed.results[0].rows.map((r) => r.key)),
    `browsed keys ${firstPage.length}+${secondPage.length} differ from the API's`);
  await page.click('[data-testid="kv-key-row"] a >> text=user.55');
  await waitText('[data-testid="kv-json"]', '55');
  const timers = await apiOk('GET', '/api/v1/timers/orders?limit=100');
  await page.fill('[data-testid="timers-queue"]', 'orders');
  await page.click('[data-testid="timers-list"]');
  await waitCount('[data-testid="timer-row"]', timers.rows.length);
  assert(timers.rows.length === 2, `seeded 2 timers, API lists ${timers.rows.length}`);
  await shot('kv');
});

check('cluster: node state from /health, membership or its refusal', async () => {
  const h = await apiOk('GET', '/health');
  const m = await api('GET', '/api/v1/system/raft/membership?timeoutMs=5000');
  if (m.status !== 200) allow('GET', '/api/v1/system/raft/membership', m.status);
  await go('#/cluster', 'cluster');
  await waitText('[data-testid="cluster-node"] .value', fmt(h.raft.nodeId));
  if (m.status === 200) {
    await waitCount('[data-testid="member-row"]', m.data.members.length);
  } else {
    await page.waitForSelector('[data-testid="membership-unavailable"]', { timeout: STEP_MS });
    const text = (await page.textContent('[data-testid="membership-unavailable"]'))
      .replace(/\s+/g, ' ');
    assert(text.includes(String(m.status)) && text.includes(m.data.error), `says "${text}"`);
  }
  await shot('cluster');
});

check('the token is stored and sent as a Bearer header; a 401 asks for one', async () => {
  await go('#/groups', 'groups');
  await page.fill('[data-testid="token-input"]', 'test-token-123');
  const sent = page.waitForRequest((r) => r.url().includes('/api/v1/consumer-groups'),
    { timeout: STEP_MS });
  await page.click('[data-testid="token-save"]');
  const req = await sent;
  assert(req.headers().authorization === 'Bearer test-token-123', 'no Bearer header');
  assert(await page.evaluate(() => localStorage.getItem('queen.console.token')) ===
    'test-token-123', 'token not stored');
  // The node here runs without auth: a 401 is played by the browser's router.
  allow('GET', '/api/v1/consumer-groups', 401);
  await page.route('**/api/v1/consumer-groups', (route) => route.fulfill({ status: 401,
    contentType: 'application/json', body: '{"error":"Authentication required"}' }));
  await page.reload();
  await page.waitForSelector('[data-testid="error-banner"]:not([hidden])', { timeout: STEP_MS });
  const text = (await page.textContent('[data-testid="error-banner"]')).replace(/\s+/g, ' ');
  assert(/401/.test(text) && /token/i.test(text), `banner says "${text.trim()}"`);
  await page.unroute('**/api/v1/consumer-groups');
  await page.fill('[data-testid="token-input"]', '');
  await page.click('[data-testid="token-save"]');
  await page.waitForFunction(() => !localStorage.getItem('queen.console.token'), null,
    { timeout: STEP_MS });
});

// ------------------------------------------------------------------ run

async function main() {
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  let passed = 0;
  let failed = 0;
  let reported = 0;
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    page.setDefaultTimeout(STEP_MS);
    watch(page);
    for (const c of checks) {
      const seen = problems.length;
      try {
        await c.fn();
        if (problems.length > seen) throw new Error(problems.slice(seen).join('; '));
        passed++;
        console.log(`ok - ${c.name}`);
      } catch (e) {
        failed++;
        const also = problems.slice(seen).filter((p) => !e.message.includes(p));
        console.log(`FAIL - ${c.name}\n    ${[String(e.message).split('\n')[0], ...also]
          .join('\n    ')}`);
      }
      reported = problems.length;
    }
    await page.close();
  } finally {
    await browser.close();
  }
  if (problems.length > reported) {
    console.log(`FAIL - browser errors after the checks\n    ${problems.slice(reported)
      .join('\n    ')}`);
    failed++;
  }
  console.log(`console: ${passed} passed, ${failed} failed`);
  process.exitCode = failed ? 1 : 0;
}

main().catch((e) => {
  console.error(`console test crashed: ${e.stack || e}`);
  process.exitCode = 1;
});
