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
  // One layout for both commands (docs/summary-schema.md): the condition's id and figures by
  // profile's names.
  const label = (c) => c.condition_id;
  const groups = [...new Set(conds.map((c) => groupOf(label(c))))];
  // The timeline: one memory series per GPU (or the engine's RSS), the capture points.
  const tl = byId[s.run_id + '-timeline'];
  check(!!tl, `${s.run_id}: no timeline`);
  if (tl) {
    const mem = tl.datasets.filter((d) => / used \(|RSS \(/.test(d.label) && !d.label.startsWith('server'));
    const nMem = bench ? 1 : summary.gpus.length;
    check(mem.length === nMem, `${s.run_id}: timeline has ${mem.length} memory series, expected ${nMem}`);
    const caps = tl.datasets.find((d) => d.label === 'capture points' || d.label === 'phases');
    // GPU capture points, else (a server on the CPU, or bench) the engine's RSS at its phases.
    const gpuCaps = bench ? 0
      : ['baseline', 'post_warmup', 'peak'].filter((k) => summary.memory_measurements[k]).length;
    const hostPhases = summary.host_memory && summary.host_memory.phases
      ? Object.keys(summary.host_memory.phases).length : 0;
    const nCaps = gpuCaps > 0 ? gpuCaps : hostPhases;
    check((caps ? caps.n : 0) === nCaps, `${s.run_id}: ${caps ? caps.n : 0} capture points, expected ${nCaps}`);
    if (!bench) {
      check(tl.datasets.some((d) => d.label.startsWith('KV cache usage')), `${s.run_id}: no KV usage series`);
      check(tl.datasets.some((d) => d.label === 'requests in flight'), `${s.run_id}: no requests in flight`);
    }
  }
  // Figures 1 and 2 and latency: a measured series per group, a point per condition (latency
  // only where a condition has it: a bench condition whose sequences found no room has none).
  const timed = bench ? conds.filter((c) => c.ttft_ms && c.ttft_ms.n > 0) : conds;
  for (const [fig, per] of [['fig1_mem_vs_concurrency', ' measured'], ['fig2_tps_vs_concurrency', ' measured'],
                            ['latency_ttft_vs_concurrency', ' p50'], ['latency_itl_vs_concurrency', ' p50'],
                            ['latency_e2e_vs_concurrency', ' p50']]) {
    // Throughput only where it was measured: a bench condition with no token has null, not 0.
    const rated = bench ? conds.filter((c) => c.output_tokens_per_s !== null) : conds;
    const want = fig.startsWith('latency') ? timed : fig.startsWith('fig2') ? rated : conds;
    const wantGroups = [...new Set(want.map((c) => groupOf(label(c))))];
    const c = byId[s.run_id + '-' + fig];
    if (!want.length) {
      check(!c, `${s.run_id}: ${fig} drawn with no condition to show`);
      continue;
    }
    check(!!c, `${s.run_id}: no ${fig}`);
    if (!c) continue;
    const series = c.datasets.filter((d) => d.label.endsWith(per));
    check(series.length === wantGroups.length, `${s.run_id} ${fig}: ${series.length} series, expected ${wantGroups.length}`);
    const points = series.reduce((a, d) => a + d.n, 0);
    check(points === want.length, `${s.run_id} ${fig}: ${points} points, expected ${want.length}`);
  }
  const bd = byId[s.run_id + '-breakdown'];
  // A component is drawn when it has a measured or an estimated figure.
  const estimated = Object.fromEntries(((summary.estimate_comparison || {}).rows || [])
    .filter((r) => r.estimated !== null && r.estimated !== undefined).map((r) => [r.component, true]));
  // A run that sampled no GPU (a server on the CPU) has no measured breakdown: the plan's
  // components are drawn.
  const parts = ['weights', 'kv_cache', 'activations', 'overhead'];
  const nComp = bench ? parts.filter((k) => summary.memory_breakdown.components[k].bytes !== null).length
    : summary.memory_breakdown ? Object.entries(summary.memory_breakdown.components || {})
      .filter(([k, c]) => (c.bytes !== null && c.bytes !== undefined) || estimated[k]).length
    : parts.filter((k) => estimated[k]).length;
  check((bd ? bd.datasets.length : 0) === nComp,
        `${s.run_id}: breakdown has ${bd ? bd.datasets.length : 0} components, expected ${nComp}`);

  // Hover the largest-concurrency point of figure 1 and 2; the tooltip must say summary.json's value.
  for (const [fig, want] of [
    ['fig1_mem_vs_concurrency', (c) => (bench ? c.peak_rss_bytes : c.peak_used_bytes ?? c.peak_rss_bytes)],
    ['fig2_tps_vs_concurrency', (c) => c.output_tokens_per_s]]) {
    const id = s.run_id + '-' + fig;
    if (!byId[id]) continue;  // nothing measured to draw (checked above)
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

// Hovers the element `index` of dataset `di` of chart `cid`; returns the tooltip's text.
async function hover(cid, di, index) {
  // The page can still move under the pointer (a chart drawn late, a scroll settling) between
  // reading the bar's position and the pointer getting there, landing on a neighbouring bar;
  // Chart.js says which point its tooltip shows, so read the position again and retry until it
  // is the one asked for.
  for (let attempt = 1; ; attempt++) {
    // Away first, and wait for the last tooltip to go: else its text can still be read here.
    await page.mouse.move(0, 0);
    await page.waitForFunction(() => {
      const t = document.querySelector('.kv-tooltip');
      return !t || getComputedStyle(t).opacity === '0';
    });
    await page.evaluate((id) => document.getElementById(id).scrollIntoView({ block: 'center' }), cid);
    const pos = await page.evaluate(([id, d, j]) => {
      const c = window.kvprofReport.charts.find((x) => x.id === id).chart;
      const el = c.getDatasetMeta(d).data[j];
      const r = c.canvas.getBoundingClientRect();
      const y = el.base !== undefined && c.options.indexAxis !== 'y' ? (el.y + el.base) / 2 : el.y;
      const x = el.base !== undefined && c.options.indexAxis === 'y' ? (el.x + el.base) / 2 : el.x;
      return { x: r.left + x, y: r.top + y };
    }, [cid, di, index]);
    await page.mouse.move(pos.x, pos.y);
    await page.waitForFunction(() => getComputedStyle(document.querySelector('.kv-tooltip')).opacity === '1');
    const onTarget = await page.evaluate(([id, d, j]) => {
      const points = window.kvprofReport.charts.find((x) => x.id === id).chart.tooltip.dataPoints || [];
      return points.some((p) => p.datasetIndex === d && p.dataIndex === j);
    }, [cid, di, index]);
    if (onTarget || attempt === 5) return page.textContent('.kv-tooltip');
  }
}
const shownValue = (text, what) => {
  const m = text.match(new RegExp(what.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + ': ([-+]?[\\d,.]+) (GiB|MiB|%)'));
  return m ? { v: parseFloat(m[1].replace(/,/g, '')), unit: m[2], decimals: (m[1].split('.')[1] || '').length } : null;
};
// The page rounds figures to 1e-4 of their unit before showing them: allow that too.
const near = (shown, expected) => Math.abs(shown.v - expected) <= 0.5 * 10 ** -shown.decimals + 1e-4;
const inUnit = (bytes, unit) => bytes / (unit === 'GiB' ? 2 ** 30 : 2 ** 20);

// A sweep: per configuration and output length, heatmaps of input lengths x batch sizes whose
// cells say what sweep.json says.
for (const s of sections.filter((x) => x.type === 'sweep')) {
  const sweep = JSON.parse(fs.readFileSync(path.join(s.dir, 'sweep.json'), 'utf8'));
  check(sweep.configurations.length === s.configurations.length, 'sweep: configurations differ from sweep.json');
  check(!!byId['sweep-configurations'], 'sweep: no memory-per-configuration chart');
  for (const cfg of sweep.configurations) {
    const conds = cfg.conditions;
    const outs = [...new Set(conds.map((c) => c.output_len))];
    const ins = [...new Set(conds.map((c) => c.input_len))].sort((a, b) => a - b);
    const bss = [...new Set(conds.map((c) => c.batch_size))].sort((a, b) => a - b);
    const measured = cfg.run && cfg.run.measured ? cfg.run.measured.conditions || {} : {};
    for (const out of outs) {
      const base = `sweep-${cfg.id}-out${out}`;
      const kinds = Object.keys(measured).length ? ['peak', 'kv', 'estkv'] : ['estkv'];
      for (const k of kinds) {
        const c = byId[`${base}-${k}`];
        check(!!c, `${base}-${k}: no heatmap`);
        if (!c) continue;
        check(c.datasets.length === ins.length, `${base}-${k}: ${c.datasets.length} rows, expected ${ins.length}`);
        check(c.datasets.every((d) => d.n === bss.length), `${base}-${k}: a row has not ${bss.length} cells`);
      }
      if (!kinds.includes('peak')) continue;
      // Hover the top-right cell (largest input, largest batch) of the peak heatmap.
      const cid = `in${ins.at(-1)}_out${out}_c${bss.at(-1)}_low`;
      const want = Object.entries(measured).find(([id]) => id === cid);
      const text = await hover(`${base}-peak`, ins.length - 1, bss.length - 1);
      // GPU memory where it was sampled, else the server's host RSS (a llama.cpp server on the CPU).
      const shown = shownValue(text, 'Peak ' + (s.memory_label || 'GPU memory'));
      check(!!want && !!shown, `${base}-peak: tooltip '${text}' (condition ${cid} not found or no value)`);
      const bytes = want ? (want[1].peak_used_bytes ?? want[1].peak_rss_bytes ?? null) : null;
      if (want && shown && bytes !== null) {
        check(near(shown, inUnit(bytes, shown.unit)),
              `${base}-peak: tooltip ${shown.v} ${shown.unit}, sweep.json ${bytes} bytes`);
      }
      if (cfg.gpu === 'cpu') {
        check(s.memory_label === 'host memory (RSS)', `${base}: a CPU sweep labelled '${s.memory_label}'`);
        check(want && want[1].peak_rss_bytes > 0, `${base}-peak: no host RSS in sweep.json`);
      }
      check(text.includes(`input ${ins.at(-1)} · concurrency ${bss.at(-1)}`), `${base}-peak: tooltip '${text}' names the wrong cell`);
      if (shots) await page.screenshot({ path: path.join(shots, `${base}-peak-hover.png`) });
    }
  }
}

// A find-max search: a point per step, coloured by its verdict, the answer marked.
for (const s of sections.filter((x) => x.type === 'find_max')) {
  const fm = JSON.parse(fs.readFileSync(path.join(s.dir, 'find_max.json'), 'utf8'));
  const c = byId['find-max-steps'];
  check(!!c, 'find-max: no steps chart');
  if (!c) continue;
  check(c.datasets[0].n === fm.steps.length, `find-max: ${c.datasets[0].n} steps drawn, find_max.json has ${fm.steps.length}`);
  check(c.datasets.some((d) => d.label === 'answer: ' + fm.max_concurrency) === (fm.max_concurrency !== null),
        'find-max: the answer line does not match find_max.json');
  const last = fm.steps.at(-1);
  const text = await hover('find-max-steps', 0, fm.steps.length - 1);
  check(text.includes(`step ${last.step} (${last.phase})`) &&
        text.includes(`concurrency ${last.concurrency}: ${last.pass ? 'PASS' : 'FAIL'}`),
        `find-max: tooltip '${text}' is not step ${last.step} at ${last.concurrency}`);
  if (fm.steps.some((st) => st.outcome.peak_kv_cache_usage !== null)) {
    check(!!byId['find-max-usage'], 'find-max: no usage chart');
  }
  if (shots) await page.screenshot({ path: path.join(shots, 'find-max-steps-hover.png') });
}

// Several runs: the differences against the first, as the runs' summaries give them.
for (const s of sections.filter((x) => x.type === 'compare' && x.deltas)) {
  const d = s.deltas;
  const peakRow = d.memory.findIndex((r) => r.name === 'peak');
  const c = byId['compare-deltas'];
  const summaries = s.run_ids.map((id) => {
    const run = sections.find((x) => x.type === 'run' && x.run_id === id);
    return JSON.parse(fs.readFileSync(path.join(run.dir, 'summary.json'), 'utf8'));
  });
  const peaks = summaries.map((x) => ((x.memory_measurements || {}).peak || {}).total_bytes);
  // A GPU's memory and a process's RSS are not one quantity: no difference between them.
  const memoryOf = (x) => (x.kind === 'bench' ? 'host' : (x.memory_breakdown || {}).memory || 'gpu');
  const sameMemory = summaries.every((x) => memoryOf(x) === memoryOf(summaries[0]));
  if (!sameMemory) {
    check(peakRow < 0 || d.memory[peakRow].values.slice(1).every((v) => v === null),
          'compare: a GPU peak and a host RSS peak were subtracted');
  } else if (peaks.every((p) => typeof p === 'number')) {
    check(!!c && peakRow >= 0, 'compare: no peak memory difference drawn');
    if (!c || peakRow < 0) continue;
    const text = await hover('compare-deltas', 0, peakRow);
    const shown = shownValue(text, s.run_ids[1] + ' − ' + s.run_ids[0]);
    check(!!shown, `compare: tooltip '${text}' has no difference`);
    if (shown) {
      check(near(shown, inUnit(peaks[1] - peaks[0], shown.unit)),
            `compare: tooltip says ${shown.v} ${shown.unit}, the summaries differ by ${peaks[1] - peaks[0]} bytes`);
    }
    if (shots) await page.screenshot({ path: path.join(shots, 'compare-deltas-hover.png') });
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
