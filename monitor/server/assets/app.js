// The minidubbo monitor dashboard: reads /api/report, /api/service and
// /api/status and draws tables and SVG charts. No library, no network
// beyond this server.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';

function el(tag, attrs, ...kids) {
  const svg = ['svg', 'g', 'polyline', 'circle', 'line', 'text', 'title', 'rect'].includes(tag);
  const e = svg ? document.createElementNS(SVG, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.setAttribute('class', v);
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else if (svg) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const k of kids) e.append(k);
  return e;
}

async function getJSON(url) {
  const r = await fetch(url, { cache: 'no-store' });
  if (!r.ok) throw new Error(url + ': ' + r.status + ' ' + (await r.text()));
  return r.json();
}

const params = new URLSearchParams(location.search);
let range = params.get('since') || '1h';
const select = document.getElementById('range');
if (![...select.options].some(o => o.value === range)) select.append(el('option', { value: range, textContent: range }));
select.value = range;
select.addEventListener('change', () => {
  range = select.value;
  history.replaceState(null, '', '?since=' + encodeURIComponent(range));
  refresh();
});

function td(text, cls) { return el('td', { class: cls || '', textContent: String(text) }); }

function renderMethods(rep) {
  const body = document.querySelector('#methods tbody');
  body.replaceChildren(...rep.rows.map(r => el('tr', {
    class: r.failures > 0 ? 'failing' : '',
    'data-side': r.side, 'data-application': r.application, 'data-service': r.service, 'data-method': r.method,
  },
  td(r.service), td(r.method), td(r.side), td(r.application),
  td(r.calls, 'n calls'), td(r.failures, 'n failures'), td(r.qps, 'n qps'),
  td(r.p50_ms, 'n p50'), td(r.p99_ms, 'n p99'), td(r.max_ms, 'n max'))));
}

function hhmm(ms) {
  const d = new Date(ms);
  return String(d.getHours()).padStart(2, '0') + ':' + String(d.getMinutes()).padStart(2, '0');
}

function fmt(v) {
  if (v >= 100) return String(Math.round(v));
  if (v >= 10) return v.toFixed(1);
  return String(Math.round(v * 100) / 100);
}

// chart draws the series ({side, points: [{t, v}]}) over [since, until].
function chart(title, unit, series, since, until) {
  const W = 400, H = 170, L = 46, R = 10, T = 22, B = 24;
  // The time axis starts at the first minute with data when that is later
  // than the range's start, so a young service is not squeezed to the right.
  let first = Infinity;
  for (const s of series) if (s.points.length) first = Math.min(first, Date.parse(s.points[0].t));
  const t1 = Date.parse(until);
  const t0 = Math.min(Math.max(Date.parse(since), first), t1 - 120000);
  let vmax = 0;
  for (const s of series) for (const p of s.points) vmax = Math.max(vmax, p.v);
  vmax = vmax > 0 ? vmax * 1.15 : 1;
  const x = t => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = v => H - B - (H - T - B) * v / vmax;
  const n = series.reduce((a, s) => a + s.points.length, 0);
  const svg = el('svg', { class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, 'data-title': title, 'data-points': n });
  svg.append(el('text', { class: 'title', x: L, y: 14 }, `${title} (${unit})`));
  for (const f of [0, 0.5, 1]) {
    const v = vmax * f / 1.15;
    svg.append(el('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(el('text', { x: L - 4, y: y(v) + 3, 'text-anchor': 'end' }, fmt(v)));
  }
  svg.append(el('text', { x: L, y: H - 6 }, hhmm(t0)));
  svg.append(el('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, hhmm(t1)));
  let lx = W - R;
  for (const s of [...series].reverse()) {
    svg.append(el('text', { x: lx, y: 14, 'text-anchor': 'end', class: s.side }, s.side));
    lx -= 62;
  }
  for (const s of series) {
    if (s.points.length === 0) continue;
    // A point sits in the middle of its minute, or at the right edge while
    // that minute is younger than 30 s (else it would be drawn past it).
    const pts = s.points.map(p => [x(Math.min(Date.parse(p.t) + 30000, t1)), y(p.v), p]);
    svg.append(el('polyline', { class: s.side, points: pts.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(' '), 'data-side': s.side, 'data-n': pts.length }));
    for (const [a, b, p] of pts) {
      svg.append(el('circle', { class: s.side, cx: a.toFixed(1), cy: b.toFixed(1), r: 2.5, 'data-v': p.v },
        el('title', {}, `${s.side} ${hhmm(Date.parse(p.t))}: ${p.v} ${unit}`)));
    }
  }
  return svg;
}

function renderService(v) {
  const series = (key, scale) => ['consumer', 'provider'].map(side => ({
    side, points: (v.series[side] || []).map(p => ({ t: p.t, v: Math.round(p[key] * scale * 1000) / 1000 })),
  }));
  const provs = el('table', { class: 'providers' },
    el('thead', {}, el('tr', {}, ...['provider', 'calls sent (consumers)', 'calls served (provider)', 'failures (consumers)', 'p99 ms (consumers)', 'p99 ms (provider)', '']
      .map((h, i) => el('th', { class: i > 0 ? 'n' : '', textContent: h })))),
    el('tbody', {}, ...v.providers.map(p => el('tr', { class: p.slow ? 'slow' : '', 'data-provider': p.provider },
      td(p.provider), td(p.consumer_calls, 'n consumer-calls'), td(p.provider_calls, 'n provider-calls'),
      td(p.consumer_failures, 'n'), td(fmt(p.consumer_p99_ms), 'n'), td(fmt(p.provider_p99_ms), 'n'),
      td(p.slow ? '⚠ slow: p99 far above its peers' : '', 'flag')))));
  const cons = el('table', { class: 'consumers' },
    el('thead', {}, el('tr', {}, ...['consumer', 'calls made (consumer)', 'calls served (providers)']
      .map((h, i) => el('th', { class: i > 0 ? 'n' : '', textContent: h })))),
    el('tbody', {}, ...v.consumers.map(c => el('tr', { 'data-consumer': c.consumer },
      td(c.consumer), td(c.consumer_calls, 'n consumer-calls'), td(c.provider_calls, 'n provider-calls')))));
  return el('section', { class: 'service', 'data-service': v.service },
    el('h2', { textContent: v.service }),
    el('div', { class: 'charts' },
      chart('QPS', 'calls/s', series('qps', 1), v.since, v.until),
      chart('failure rate', '%', series('failure_rate', 100), v.since, v.until),
      chart('p99 latency', 'ms', series('p99_ms', 1), v.since, v.until)),
    el('div', { class: 'peers' },
      el('div', {}, el('h3', { textContent: 'per provider' }), provs),
      el('div', {}, el('h3', { textContent: 'per consumer' }), cons)));
}

let loads = 0;
async function refresh() {
  const status = document.getElementById('status');
  try {
    const q = 'since=' + encodeURIComponent(range);
    const [rep, st] = await Promise.all([getJSON('api/report?by=method&' + q), getJSON('api/status?' + q)]);
    const services = [...new Set(rep.rows.map(r => r.service))].sort();
    const views = await Promise.all(services.map(s => getJSON('api/service?' + q + '&service=' + encodeURIComponent(s))));
    renderMethods(rep);
    document.getElementById('services').replaceChildren(...views.map(renderService));
    status.textContent = `${st.reports} reports from ${st.senders} senders, ${st.dropped} dropped by senders · updated ${new Date().toLocaleTimeString()}`;
    document.body.setAttribute('data-loads', String(++loads));
  } catch (e) {
    status.textContent = 'error: ' + e.message;
  }
}

refresh();
setInterval(refresh, Number(document.body.dataset.refresh) || 5000);
