// The dashboard: stock levels live from the watch route (server-sent events, read through
// fetch so that a bearer token can go with them), and once a second /dashboard/status.json
// for the health badges, the charts (uPlot) and the recent reservations and orders.
'use strict';

const POINTS = 120;         // seconds of history in the charts
const MAX_ROWS = 200;       // stock rows shown (the most recently changed when there are more)

const state = {
  token: sessionStorage.getItem('feed-token') || '',
  skus: new URLSearchParams(location.search).getAll('sku'),
  levels: new Map(),        // "sku\u0000location" -> {level, seenAt}
  lastSequence: 0,          // the newest update received: a reconnect resumes after it
  watch: null,              // AbortController of the open watch
  previous: null,           // the previous status, for rates
  series: {time: [], reservations: [], commands: [], lagP99: [], outbox: []},
};

const $ = (id) => document.getElementById(id);
const authHeaders = () => (state.token ? {Authorization: `Bearer ${state.token}`} : {});

function showError(text) {
  const e = $('error');
  e.textContent = text || '';
  e.hidden = !text;
}

function badge(id, text, ok) {
  const e = $(id);
  e.textContent = text;
  e.classList.toggle('ok', ok === true);
  e.classList.toggle('bad', ok === false);
}

// --- Stock levels: the watch route as server-sent events --------------------------------

function applyUpdate(update) {
  if (update.sequence) state.lastSequence = Math.max(state.lastSequence, Number(update.sequence));
  if (!update.level) return;
  const l = update.level;
  state.levels.set(`${l.sku}\u0000${l.location}`, {level: l, seenAt: performance.now()});
}

function renderLevels() {
  let rows = [...state.levels.values()];
  let note = `${rows.length} levels`;
  if (rows.length > MAX_ROWS) {
    rows.sort((a, b) => b.seenAt - a.seenAt);
    rows = rows.slice(0, MAX_ROWS);
    note += `, the ${MAX_ROWS} changed last shown`;
  }
  rows.sort((a, b) => (a.level.sku + '\u0000' + a.level.location).localeCompare(
      b.level.sku + '\u0000' + b.level.location));
  const now = performance.now();
  const body = document.querySelector('#stock tbody');
  body.replaceChildren(...rows.map(({level: l, seenAt}) => {
    const tr = document.createElement('tr');
    tr.dataset.sku = l.sku;
    tr.dataset.location = l.location;
    if (now - seenAt < 1500) tr.className = 'changed';
    for (const [value, numeric] of [[l.sku], [l.location], [l.onHand, 1], [l.reserved, 1],
      [l.available, 1], [l.version, 1], [l.sequence, 1]]) {
      const td = document.createElement('td');
      td.textContent = value ?? '0';
      if (numeric) td.className = 'num';
      tr.appendChild(td);
    }
    return tr;
  }));
  $('levels-note').textContent = note;
}

// Reads `response`'s body as server-sent events, calling onEvent(type, data) for each.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, {stream: true});
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const lines = block.split('\n');
      const type = (lines.find((line) => line.startsWith('event:')) || 'event: message')
          .slice(6).trim();
      const data = lines.filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).trimStart()).join('\n');
      if (data) onEvent(type, JSON.parse(data));
    }
  }
}

async function watchStock() {
  const controller = new AbortController();
  state.watch = controller;
  while (!controller.signal.aborted) {
    const query = new URLSearchParams();
    for (const sku of state.skus) query.append('sku', sku);
    if (state.lastSequence > 0) {
      // Every change after the last one seen; a fresh snapshot if the server no longer has them.
      query.set('resume_after_sequence', String(state.lastSequence));
      query.set('snapshot_on_gap', 'true');
    }
    try {
      const response = await fetch(`/v1/stock:watch?${query}`, {
        headers: {Accept: 'text/event-stream', ...authHeaders()},
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(`watch: ${response.status} ${await response.text()}`);
      $('stream-state').textContent = 'live';
      showError('');
      await readEvents(response, (type, data) => {
        // The server ends a stream with an error event (shutting down, reader too slow).
        if (type === 'error') throw new Error(`watch ended: ${data.message}`);
        applyUpdate(data);
      });
      $('stream-state').textContent = 'reconnecting…';
    } catch (e) {
      if (controller.signal.aborted) return;
      $('stream-state').textContent = 'reconnecting…';
      showError(String(e.message || e));
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

// --- Status: badges, charts, recent events ----------------------------------------------

function makeChart(target, labels, colors) {
  const width = Math.max(360, $(target).clientWidth || 480);
  return new uPlot({
    width, height: 180,
    series: [{}, ...labels.map((label, i) => ({label, stroke: colors[i], width: 2}))],
    axes: [{}, {}],
    scales: {x: {time: true}},
  }, [[], ...labels.map(() => [])], $(target));
}

const charts = {
  rate: null,
  relay: null,
};

function push(name, value) {
  const s = state.series[name];
  s.push(value);
  if (s.length > POINTS) s.shift();
}

function describeEvent(e) {
  const time = new Date(e.occurredAt).toLocaleTimeString();
  if (e.stockChanged) {
    const c = e.stockChanged;
    const cause = (c.cause || '').replace('STOCK_CHANGE_CAUSE_', '').toLowerCase();
    return `${time} ${cause} ${c.reservationId || ''} · ${e.key} @ ${c.level.location}: ` +
      `reserved ${c.level.reserved || 0}, available ${c.level.available || 0}`;
  }
  const o = e.orderStatusChanged;
  return `${time} ${o.orderId} ${o.statusName}${o.details ? ' · ' + o.details : ''}`;
}

function renderList(id, events) {
  $(id).replaceChildren(...events.map((e) => {
    const li = document.createElement('li');
    li.textContent = describeEvent(e);
    li.dataset.sequence = e.sequence;
    return li;
  }));
}

async function pollStatus() {
  try {
    const response = await fetch('/dashboard/status.json', {headers: authHeaders(), cache: 'no-store'});
    if (!response.ok) throw new Error(`status: ${response.status} ${await response.text()}`);
    const s = await response.json();
    badge('serving', s.serving ? 'server: serving' : 'server: not serving', s.serving);
    if (!s.kafka.configured) {
      badge('kafka', 'Kafka: off');
    } else {
      badge('kafka', s.kafka.reachable ? 'Kafka: reachable' : 'Kafka: unreachable', s.kafka.reachable);
    }
    badge('outbox', `outbox: ${s.kafka.outbox_depth}`, s.kafka.configured ? s.kafka.outbox_depth < 10000 : undefined);
    badge('lag', `commit→Kafka p99: ${s.kafka.lag_p99_ms.toFixed(1)} ms`);
    badge('holds', `open holds: ${s.open_holds}`);
    badge('levels', `levels: ${s.stock_levels}`);
    badge('sequence', `sequence: ${s.last_sequence}`);
    const t = s.time_ms / 1000;
    if (state.previous) {
      const dt = Math.max(0.001, t - state.previous.time_ms / 1000);
      push('time', t);
      push('reservations', (s.reservations_made - state.previous.reservations_made) / dt);
      push('commands', (s.commands - state.previous.commands) / dt);
      push('lagP99', s.kafka.lag_p99_ms);
      push('outbox', s.kafka.outbox_depth);
      const v = state.series;
      charts.rate.setData([v.time, v.reservations, v.commands]);
      charts.relay.setData([v.time, v.lagP99, v.outbox]);
    }
    state.previous = s;
    renderList('recent-reservations', s.recent_reservations);
    renderList('recent-orders', s.recent_orders);
    document.body.dataset.lastSequence = s.last_sequence;
  } catch (e) {
    badge('serving', 'server: no answer', false);
    showError(String(e.message || e));
  }
}

function restartWatch() {
  if (state.watch) state.watch.abort();
  state.levels.clear();
  state.lastSequence = 0;
  watchStock();
}

function main() {
  $('skus').value = state.skus.join(', ');
  $('token').value = state.token;
  $('settings').addEventListener('submit', (event) => {
    event.preventDefault();
    state.skus = $('skus').value.split(',').map((s) => s.trim()).filter(Boolean);
    state.token = $('token').value.trim();
    sessionStorage.setItem('feed-token', state.token);
    const url = new URL(location.href);
    url.searchParams.delete('sku');
    for (const sku of state.skus) url.searchParams.append('sku', sku);
    history.replaceState(null, '', url);
    restartWatch();
  });
  charts.rate = makeChart('rate-chart', ['reservations/s', 'commands/s'], ['#1f77b4', '#aaa']);
  charts.relay = makeChart('relay-chart', ['lag p99 (ms)', 'outbox depth'], ['#d62728', '#2ca02c']);
  watchStock();
  pollStatus();
  setInterval(pollStatus, 1000);
  setInterval(renderLevels, 250);
}

main();
