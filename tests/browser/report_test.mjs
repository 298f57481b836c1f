// Opens a kvprof report.html in headless Chromium (Debian's, driven by playwright-core) and
// checks it the way a person would: no console error, no request leaving the file, every chart
// drawn with the series and points its run's summary.json implies, a hovered point's tooltip
// equal to summary.json's figure, and screenshots saved for a look.
//
//   node report_test.mjs --report DIR/report.html --shots OUT_DIR [--png FILE ...]
//   node report_test.mjs --open-timing --report FILE   (prints the time to open and draw)
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const opt = (name) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
const many = (name) => args.flatMap((a, i) => (a === name ? [args[i + 1]] : []));
const reportPath = path.resolve(opt('--report'));
const shots = opt('--shots');
const modules = process.env.KVPROF_NODE_MODULES;
const require = createRequire(path.join(path.resolve(modules), 'noop.js'));
const { chromium } = require('playwright-core');

const failures = [];
let passed = 0;
function check(ok, what) {
  if (ok) { passed++; } else { failures.push(what); console.error('FAIL: ' + what); }
}

// The concurrency part removed from a condition label, as kvprof groups them.
function groupOf(label) {
  const parts = label.split(/([_ ])/);
  const out = [];
  for (let i = 0; i < parts.length; i += 2) {
    if (parts[i] && !/^c\d+$/.test(parts[i])) {
      if (out.length) out.push(parts[i - 1] || '_');
      out.push(parts[i]);
    }
  }
  return out.length ? out.join('') : 'all';
}

const browser = await chromium.launch({
  executablePath: process.env.KVPROF_CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
const page = await browser.newPage({ viewport: { width: 1440, height: 1000 }, deviceScaleFactor: 1 });
page.on('console', (m) => { if (m.type() === 'error') check(false, 'console error: ' + m.text()); });
page.on('pageerror', (e) => check(false, 'page error: ' + e.message));
page.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith('file:') && !u.startsWith('data:') && !u.startsWith('about:')) {
    check(false, 'network request: ' + u);
  }
});

const t0 = Date.now();
await page.goto('file://' + reportPath);
await page.waitForSelector('body[data-rendered="true"]', { timeout: 30000 });
const openMs = Date.now() - t0;
if (args.includes('--open-timing')) {
  console.log(JSON.stringify({ report: reportPath, bytes: fs.statSync(reportPath).size, open_ms: openMs }));
  await browser.close();
  process.exit(failures.length ? 1 : 0);
}

// What the page drew, per chart.
const drawn = await page.evaluate(() => window.kvprofReport.charts.map((c) => {
  const canvas = c.chart.canvas;
  const ctx = canvas.getContext('2d');
  const img = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  let ink = 0;
  for (let i = 0; i < img.length; i += 16) if (img[i + 3] > 0 && (img[i] < 235 || img[i + 1] < 235 || img[i + 2] < 235)) ink++;
  return {
    id: c.id, kind: c.kind, width: canvas.width, height: canvas.height, ink,
    datasets: c.chart.data.datasets.map((d) => ({ label: d.label, n: d.data.filter((p) => p !== null && (typeof p === 'number' || p.y !== null)).length, hline: !!d.hline })),
  };
}));
const sections = await page.evaluate(() => window.kvprofReport.data.sections);
check(drawn.length > 0, 'no chart on the page');
for (const c of drawn) {
  check(c.width > 300 && c.height > 200, `${c.id}: canvas ${c.width}x${c.height}`);
  check(c.ink > 500, `${c.id}: canvas is blank (${c.ink} inked samples)`);
  for (const d of c.datasets) check(d.n > 0, `${c.id}: series '${d.label}' has no points`);
}
const byId = Object.fromEntries(drawn.map((c) => [c.id, c]));

for (const s of sections.filter((x) => x.type === 'run')) {
  const summary = JSON.parse(fs.readFileSync(path.join(s.dir, 'summary.json'), 'utf8'));
  const bench = summary.kind === 'bench';
  const conds = bench ? summary.conditions.filter((c) => c.started) : summary.conditions;
  const label = (c) => (bench ? c.condition : c.condition_id);
  const groups = [...new Set(conds.map((c) => groupOf(label(c))))];
  // The timeline: one memory series per GPU (or the engine's RSS), the capture points.
  const tl = byId[s.run_id + '-timeline'];
  check(!!tl, `${s.run_id}: no timeline`);
  if (tl) {
    const mem = tl.datasets.filter((d) => / used \(|RSS \(/.test(d.label) && !d.label.startsWith('server'));
    const nMem = bench ? 1 : summary.gpus.length;
    check(mem.length === nMem, `${s.run_id}: timeline has ${mem.length} memory series, expected ${nMem}`);
    const caps = tl.datasets.find((d) => d.label === 'capture points' || d.label === 'phases');
    const nCaps = bench ? Object.keys(summary.host_memory.phases).length
      : ['baseline', 'post_warmup', 'peak'].filter((k) => summary.memory_measurements[k]).length;
    check(caps && caps.n === nCaps, `${s.run_id}: ${caps ? caps.n : 0} capture points, expected ${nCaps}`);
    if (!bench) {
      check(tl.datasets.some((d) => d.label.startsWith('KV cache usage')), `${s.run_id}: no KV usage series`);
      check(tl.datasets.some((d) => d.label === 'requests in flight'), `${s.run_id}: no requests in flight`);
    }
  }
  // Figures 1 and 2 and latency: a measured series per group, a point per condition.
  for (const [fig, per] of [['fig1_mem_vs_concurrency', ' measured'], ['fig2_tps_vs_concurrency', ' measured'],
                            ['latency_ttft_vs_concurrency', ' p50'], ['latency_itl_vs_concurrency', ' p50'],
                            ['latency_e2e_vs_concurrency', ' p50']]) {
    const c = byId[s.run_id + '-' + fig];
    check(!!c, `${s.run_id}: no ${fig}`);
    if (!c) continue;
    const series = c.datasets.filter((d) => d.label.endsWith(per));
    check(series.length === groups.length, `${s.run_id} ${fig}: ${series.length} series, expected ${groups.length}`);
    const points = series.reduce((a, d) => a + d.n, 0);
    check(points === conds.length, `${s.run_id} ${fig}: ${points} points, expected ${conds.length}`);
  }
  const bd = byId[s.run_id + '-breakdown'];
  const nComp = bench ? ['weights', 'kv_cache', 'activations', 'overhead'].filter((k) => summary.memory_breakdown[k].bytes !== null).length
    : Object.keys((summary.memory_breakdown || {}).components || {}).length;
  check((bd ? bd.datasets.length : 0) === nComp,
        `${s.run_id}: breakdown has ${bd ? bd.datasets.length : 0} components, expected ${nComp}`);

  // Hover the largest-concurrency point of figure 1 and 2; the tooltip must say summary.json's value.
  for (const [fig, want] of [
    ['fig1_mem_vs_concurrency', (c) => (bench ? c.peak_rss_bytes : c.peak_used_bytes)],
    ['fig2_tps_vs_concurrency', (c) => (bench ? c.tokens_per_second : c.output_tokens_per_s)]]) {
    const id = s.run_id + '-' + fig;
    const target = await page.evaluate((cid) => {
      const c = window.kvprofReport.charts.find((x) => x.id === cid).chart;
      const di = c.data.datasets.findIndex((d) => d.label.endsWith(' measured'));
      const meta = c.getDatasetMeta(di);
      const j = meta.data.length - 1;
      const r = c.canvas.getBoundingClientRect();
      const cat = c.scales.x.getLabelForValue ? c.options.scales.x.ticks.callback(c.data.datasets[di].data[j].x) : null;
      return { x: r.left + meta.data[j].x, y: r.top + meta.data[j].y, label: c.data.datasets[di].label, cat, scrollY: window.scrollY };
    }, id);
    await page.evaluate((cid) => document.getElementById(cid).scrollIntoView({ block: 'center' }), id);
    const pos = await page.evaluate((cid) => {
      const c = window.kvprofReport.charts.find((x) => x.id === cid).chart;
      const di = c.data.datasets.findIndex((d) => d.label.endsWith(' measured'));
      const meta = c.getDatasetMeta(di);
      const r = c.canvas.getBoundingClientRect();
      const j = meta.data.length - 1;
      return { x: r.left + meta.data[j].x, y: r.top + meta.data[j].y };
    }, id);
    await page.mouse.move(pos.x, pos.y);
    await page.waitForFunction(() => getComputedStyle(document.querySelector('.kv-tooltip')).opacity === '1');
    const text = await page.textContent('.kv-tooltip');
    const group = target.label.replace(/ measured$/, '');
    const cond = conds.find((c) => groupOf(label(c)) === group && String(c.concurrency) === target.cat);
    check(!!cond, `${id}: no condition for ${group} at concurrency ${target.cat}`);
    if (!cond) continue;
    const esc = target.label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const m = text.match(new RegExp(esc + ': ([\\d,.]+) (GiB|MiB|tokens/s)'));
    check(!!m, `${id}: tooltip '${text}' has no value`);
    if (!m) continue;
    const shown = parseFloat(m[1].replace(/,/g, ''));
    let expected = want(cond);
    if (m[2] === 'GiB') expected /= 2 ** 30;
    if (m[2] === 'MiB') expected /= 2 ** 20;
    const decimals = (m[1].split('.')[1] || '').length;
    check(Math.abs(shown - expected) <= 0.5 * 10 ** -decimals + 1e-9,
          `${id}: tooltip says ${shown} ${m[2]}, summary.json says ${expected}`);
    check(text.includes('concurrency ' + cond.concurrency), `${id}: tooltip '${text}' names no concurrency`);
    if (shots) await page.screenshot({ path: path.join(shots, `${s.run_id}-${fig}-hover.png`) });
  }
}

if (shots) {
  fs.mkdirSync(shots, { recursive: true });
  await page.mouse.move(0, 0);
  const name = path.basename(path.dirname(reportPath));
  await page.screenshot({ path: path.join(shots, `${name}-page.png`), fullPage: true });
  for (const c of drawn) {
    const canvas = await page.$(`[id="${c.id}"]`);
    const card = canvas && (await canvas.evaluateHandle((e) => e.closest('.card'))).asElement();
    if (card) await card.screenshot({ path: path.join(shots, `${c.id}.png`) });
  }
}

// PNG figures: decoded by the browser, the right size, not blank.
for (const png of many('--png')) {
  const b64 = fs.readFileSync(png).toString('base64');
  const info = await page.evaluate(async (src) => {
    const img = new Image();
    img.src = src;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let ink = 0, colour = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200) ink++;
      if (Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) colour++;
    }
    return { w: img.naturalWidth, h: img.naturalHeight, ink: ink / (d.length / 4), colour };
  }, 'data:image/png;base64,' + b64);
  check(info.w >= 1000 && info.h >= 600, `${png}: ${info.w}x${info.h}`);
  check(info.ink > 0.01 && info.ink < 0.5, `${png}: ${(info.ink * 100).toFixed(2)}% of pixels inked`);
  check(info.colour > 1000, `${png}: no coloured series (${info.colour} coloured pixels)`);
}

await browser.close();
console.log(`${path.basename(path.dirname(reportPath))}/report.html opened in ${openMs} ms`);
console.log(`${passed} passed, ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
