// kvprof report page: draws the sections of the embedded data with Chart.js.
// Each section type has one render function (renderers below); report_experiments.js adds the
// sweep, find-max and comparison-delta ones through window.kvprofLib.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('kvprof-data').textContent);
  const root = document.getElementById('report');
  const PALETTE = ['#0072b3', '#e69e00', '#009e73', '#cc78a6', '#57b5e8', '#d65e00', '#785ea1',
                   '#808080'];
  const CAPACITY = '#c72929';
  const COMPONENT_COLORS = {
    'weights': '#0072b3', 'KV cache': '#009e73', 'activations': '#e69e00',
    'CUDA graphs': '#cc78a6', 'overhead': '#9a9a9a'
  };
  // Charts by id, for people and tests poking at the page.
  const charts = [];
  window.kvprofReport = { data: data, charts: charts };

  Chart.defaults.font.family =
      'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif';
  Chart.defaults.font.size = 12;
  Chart.defaults.color = '#3b3b45';
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;

  function color(i) { return i < 0 ? CAPACITY : PALETTE[i % PALETTE.length]; }
  function alpha(hex, a) {
    const n = parseInt(hex.slice(1), 16);
    return 'rgba(' + (n >> 16 & 255) + ',' + (n >> 8 & 255) + ',' + (n & 255) + ',' + a + ')';
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function num(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    const d = digits !== undefined ? digits : (Math.abs(v) >= 100 ? 1 : Math.abs(v) >= 10 ? 2 : 3);
    return v.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
  }

  // One tooltip element for the page, filled by every chart (readable, selectable, testable).
  const tip = el('div', 'kv-tooltip');
  tip.setAttribute('role', 'tooltip');
  document.body.appendChild(tip);
  function externalTooltip(context) {
    const model = context.tooltip;
    if (model.opacity === 0) { tip.style.opacity = 0; return; }
    tip.replaceChildren();
    (model.title || []).forEach(function (t) { tip.appendChild(el('div', 'kv-tip-title', t)); });
    (model.dataPoints || []).forEach(function (p, i) {
      const row = el('div', 'kv-tip-row');
      const sw = el('span', 'kv-tip-swatch');
      const c = model.labelColors[i];
      sw.style.background = c ? (c.borderColor || c.backgroundColor) : '#888';
      row.appendChild(sw);
      row.appendChild(el('span', 'kv-tip-text', model.body[i].lines.join(' ')));
      tip.appendChild(row);
    });
    (model.footer || []).forEach(function (t) { tip.appendChild(el('div', 'kv-tip-foot', t)); });
    const rect = context.chart.canvas.getBoundingClientRect();
    tip.style.opacity = 1;
    let left = rect.left + window.scrollX + model.caretX + 14;
    if (model.caretX > rect.width * 0.6) left -= tip.offsetWidth + 28;
    tip.style.left = left + 'px';
    tip.style.top = rect.top + window.scrollY + model.caretY - tip.offsetHeight / 2 + 'px';
  }

  function titleOptions(title, lines) {
    return {
      title: { display: true, text: title, align: 'start', font: { size: 15, weight: '600' },
               color: '#1f1f26', padding: { top: 4, bottom: 2 } },
      subtitle: { display: true, text: lines, align: 'start', color: '#6b6b76',
                  font: { size: 11.5 }, padding: { bottom: 10 } }
    };
  }

  // size: 'wide' (whole row), 'half' or 'third'.
  function card(parent, id, height, size) {
    const c = el('div', 'card ' + size);
    const box = el('div', 'chart-box');
    box.style.height = height + 'px';
    const canvas = el('canvas');
    canvas.id = id;
    canvas.setAttribute('role', 'img');
    box.appendChild(canvas);
    c.appendChild(box);
    parent.appendChild(c);
    return canvas;
  }

  function register(id, kind, chart) {
    charts.push({ id: id, kind: kind, chart: chart });
    chart.canvas.dataset.kind = kind;
    return chart;
  }

  // Figures 1 and 2 and the latency figures: lines over the concurrency categories.
  function figureChart(parent, sectionId, fig, lines) {
    const id = sectionId + '-' + fig.id;
    const canvas = card(parent, id, fig.id.startsWith('latency') ? 400 : 430,
                        fig.id.startsWith('latency') ? 'third' : 'half');
    canvas.setAttribute('aria-label', fig.title);
    const n = fig.categories.length;
    const datasets = fig.series.map(function (s) {
      return {
        label: s.name, nature: s.nature,
        data: s.points.map(function (p) { return { x: p[0], y: p[1] }; }),
        borderColor: color(s.color), backgroundColor: color(s.color),
        borderDash: s.dashed ? [6, 4] : [], borderWidth: s.dashed ? 1.8 : 2.4,
        pointRadius: s.marker ? (s.dashed ? 3 : 4) : 0, pointHoverRadius: 6,
        pointBackgroundColor: '#fff', pointBorderWidth: 2, tension: 0
      };
    });
    fig.hlines.forEach(function (h) {
      datasets.push({
        label: h.name, nature: h.nature, hline: true,
        data: [{ x: -0.5, y: h.y }, { x: n - 0.5, y: h.y }],
        borderColor: CAPACITY, backgroundColor: CAPACITY, borderDash: [8, 5], borderWidth: 1.8,
        pointRadius: 0, pointHoverRadius: 0
      });
    });
    const chart = new Chart(canvas, {
      type: 'line',
      data: { datasets: datasets },
      options: {
        parsing: false,
        interaction: { mode: 'x', intersect: false },
        scales: {
          x: { type: 'linear', min: -0.5, max: n - 0.5, grid: { display: false },
               title: { display: true, text: fig.x_label },
               afterBuildTicks: function (axis) {
                 axis.ticks = fig.categories.map(function (_, i) { return { value: i }; });
               },
               ticks: { callback: function (v) { return fig.categories[v]; } } },
          y: { beginAtZero: true, title: { display: true, text: fig.y_label },
               grid: { color: '#ececf0' } }
        },
        plugins: Object.assign(titleOptions(fig.title, lines.concat([fig.natures])), {
          legend: { position: 'bottom', labels: { boxWidth: 22, boxHeight: 2, padding: 10,
                                                  font: { size: 11.5 } } },
          tooltip: {
            enabled: false, external: externalTooltip,
            filter: function (item) { return !item.dataset.hline; },
            callbacks: {
              title: function (items) {
                return items.length ? 'concurrency ' + fig.categories[items[0].parsed.x] : '';
              },
              label: function (item) {
                return item.dataset.label + ': ' + num(item.parsed.y) + ' ' + fig.y_unit +
                    ' (' + item.dataset.nature + ')';
              }
            }
          }
        })
      }
    });
    register(id, fig.id, chart);
  }

  // Shaded stretches of time (condition windows, startup phases) behind the timeline.
  const bandsPlugin = {
    id: 'kvprofBands',
    beforeDatasetsDraw: function (chart, args, opts) {
      const x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      ctx.save();
      (opts.bands || []).forEach(function (b, i) {
        const x0 = Math.max(area.left, x.getPixelForValue(b.begin));
        const x1 = Math.min(area.right, x.getPixelForValue(b.end));
        if (x1 <= x0) return;
        ctx.fillStyle = b.color || (i % 2 ? 'rgba(90,90,110,0.07)' : 'rgba(90,90,110,0.13)');
        ctx.fillRect(x0, area.top, x1 - x0, area.bottom - area.top);
      });
      ctx.restore();
    }
  };

  function timelineChart(parent, section) {
    const t = section.timeline;
    const id = section.run_id + '-timeline';
    const canvas = card(parent, id, 470, 'wide');
    canvas.setAttribute('aria-label', 'memory timeline');
    const datasets = [];
    const pts = function (p) { return { x: p[0], y: p[1] }; };
    t.memory.forEach(function (s, i) {
      datasets.push({ label: s.name + ' (' + t.unit + ')', nature: s.nature, unit: t.unit,
                      data: s.points.map(pts), yAxisID: 'mem', borderColor: color(i),
                      backgroundColor: alpha(color(i), 0.08), fill: t.memory.length === 1,
                      borderWidth: 1.8, pointRadius: 0, stepped: false });
    });
    if (t.host) {
      datasets.push({ label: 'server ' + t.host.name + ' (' + t.unit + ')', nature: t.host.nature,
                      unit: t.unit, data: t.host.points.map(pts), yAxisID: 'mem',
                      borderColor: '#785ea1', borderWidth: 1.5, pointRadius: 0 });
    }
    if (t.capacity) {
      const end = Math.max(t.duration_s, 1e-3);
      datasets.push({ label: 'GPU capacity (' + t.unit + ')', nature: t.memory[0].nature,
                      unit: t.unit, hline: true, data: [{ x: 0, y: t.capacity }, { x: end, y: t.capacity }],
                      yAxisID: 'mem', borderColor: CAPACITY, borderDash: [8, 5], borderWidth: 1.5,
                      pointRadius: 0, pointHoverRadius: 0 });
    }
    if (t.kv) {
      datasets.push({ label: 'KV cache usage (%)', nature: t.kv.nature, unit: '%',
                      data: t.kv.points.map(pts), yAxisID: 'pct', borderColor: '#009e73',
                      backgroundColor: alpha('#009e73', 0.12), fill: 'origin', borderWidth: 1.4,
                      pointRadius: 0, stepped: 'before' });
    }
    if (t.in_flight) {
      datasets.push({ label: 'requests in flight', nature: t.in_flight.nature, unit: 'requests',
                      data: t.in_flight.points.map(pts), yAxisID: 'req', borderColor: '#e69e00',
                      borderWidth: 1.3, pointRadius: 0, stepped: 'before' });
    }
    if (t.captures.length) {
      datasets.push({ label: section.kind === 'bench' ? 'phases' : 'capture points',
                      nature: t.memory.length ? t.memory[0].nature : 'measured', unit: t.unit,
                      labels: t.captures.map(function (c) { return c.label; }),
                      data: t.captures.filter(function (c) { return c.v !== null; })
                                .map(function (c) { return { x: c.t, y: c.v }; }),
                      yAxisID: 'mem', showLine: false, pointStyle: 'rectRot', pointRadius: 7,
                      pointHoverRadius: 9, borderColor: '#1f1f26', backgroundColor: '#ffd24d',
                      borderWidth: 1.5 });
    }
    const bands = t.windows.map(function (w) { return { begin: w.begin, end: w.end }; })
        .concat(t.phases.map(function (p, i) {
          return { begin: p.begin, end: p.end,
                   color: i % 2 ? 'rgba(0,114,179,0.10)' : 'rgba(0,114,179,0.18)' };
        }));
    const where = function (x) {
      const out = [];
      t.phases.forEach(function (p) { if (x >= p.begin && x <= p.end) out.push('startup: ' + p.label); });
      t.windows.forEach(function (w) { if (x >= w.begin && x <= w.end) out.push('condition ' + w.label); });
      return out;
    };
    const chart = new Chart(canvas, {
      type: 'line',
      data: { datasets: datasets },
      plugins: [bandsPlugin],
      options: {
        parsing: false, normalized: true,
        interaction: { mode: 'nearest', axis: 'x', intersect: false },
        scales: {
          x: { type: 'linear', min: 0, max: t.duration_s > 0 ? t.duration_s : undefined,
               title: { display: true, text: 'time since the first sample (s)' },
               ticks: { maxRotation: 0, callback: function (v) {
                 return Number.isInteger(v) ? v.toLocaleString('en-US') : String(+v.toFixed(3));
               } },
               grid: { color: '#f1f1f4' } },
          mem: { position: 'left', grace: '5%',
                 title: { display: true, text: t.memory_label + ' (' + t.unit + ')' },
                 grid: { color: '#ececf0' } },
          pct: { position: 'right', display: !!t.kv, min: 0, max: 100,
                 title: { display: true, text: 'KV cache usage (%)' }, grid: { display: false } },
          req: { position: 'right', display: !!t.in_flight, beginAtZero: true,
                 title: { display: true, text: 'requests in flight' }, grid: { display: false },
                 ticks: { precision: 0 } }
        },
        plugins: Object.assign(titleOptions(
            (section.kind === 'bench' ? 'Engine memory' : 'Memory') + ' over the run',
            [section.caption, natureLine(section),
             'shaded: ' + (t.phases.length ? 'startup phases (blue), ' : '') +
                 'one band per condition; diamonds: ' +
                 (section.kind === 'bench' ? 'engine phases' : 'capture points (baseline, post-warmup, peak)')]), {
          kvprofBands: { bands: bands },
          legend: { position: 'bottom', labels: { boxWidth: 22, boxHeight: 2, padding: 12 } },
          decimation: { enabled: false },
          tooltip: {
            enabled: false, external: externalTooltip,
            filter: function (item) { return !item.dataset.hline; },
            callbacks: {
              title: function (items) {
                if (!items.length) return '';
                return ['t = ' + num(items[0].parsed.x, 3) + ' s'].concat(where(items[0].parsed.x));
              },
              label: function (item) {
                const d = item.dataset;
                const name = d.labels ? d.labels[item.dataIndex] : d.label;
                const v = d.unit === 'requests' ? String(item.parsed.y) : num(item.parsed.y) + ' ' + d.unit;
                return name.replace(/ \([^)]*\)$/, '') + ': ' + v + ' (' + d.nature + ')';
              }
            }
          }
        })
      }
    });
    register(id, 'timeline', chart);
  }

  function breakdownChart(parent, section) {
    const b = section.breakdown;
    if (!b.components.length) return;
    const id = section.run_id + '-breakdown';
    const canvas = card(parent, id, 320, 'wide');
    canvas.setAttribute('aria-label', 'memory breakdown');
    const datasets = b.components.map(function (c) {
      return { label: c.name, nature: c.nature, confidence: c.confidence,
               data: [c.measured, c.estimated], backgroundColor: COMPONENT_COLORS[c.name] || '#888',
               borderColor: '#fff', borderWidth: 1, barPercentage: 0.62 };
    });
    const memory = b.memory === 'GPU' ? 'GPU memory' : 'host memory';
    const measuredLabel = b.measured_label || 'measured';
    const chart = new Chart(canvas, {
      type: 'bar',
      data: { labels: [measuredLabel, 'estimated'], datasets: datasets },
      options: {
        indexAxis: 'y',
        scales: {
          x: { stacked: true, beginAtZero: true, title: { display: true, text: memory + ' (' + b.unit + ')' },
               grid: { color: '#ececf0' } },
          y: { stacked: true, grid: { display: false } }
        },
        plugins: Object.assign(titleOptions('Where the ' + memory + ' goes: ' + measuredLabel + ' vs estimated',
            [section.caption, natureLine(section),
             b.estimate_note ? 'estimate: ' + b.estimate_note : 'no estimate for this run']), {
          legend: { position: 'bottom', labels: { boxWidth: 14, padding: 14 } },
          tooltip: {
            enabled: false, external: externalTooltip,
            callbacks: {
              label: function (item) {
                const d = item.dataset;
                const measured = item.dataIndex === 0;
                return d.label + ': ' + num(item.parsed.x) + ' ' + b.unit + ' (' +
                    (!measured ? 'estimated' : measuredLabel !== 'measured' ? measuredLabel
                        : d.nature + (d.confidence ? ', confidence ' + d.confidence : '')) + ')';
              }
            }
          }
        })
      }
    });
    register(id, 'breakdown', chart);
  }

  function natureLine(section) {
    return 'data: ' + section.header.natures.map(function (n) {
      return n.what + ' ' + n.nature;
    }).join(' · ');
  }

  function headerBlock(parent, section) {
    const h = section.header;
    const head = el('div', 'run-head');
    const title = el('h2', null, 'Run ' + section.run_id);
    if (h.simulated) title.appendChild(el('span', 'badge sim', 'SIMULATED'));
    if (h.interrupted) title.appendChild(el('span', 'badge warn', 'INTERRUPTED'));
    title.appendChild(el('span', 'badge kind', section.kind));
    head.appendChild(title);
    const dl = el('dl', 'facts');
    [['Model', h.model], ['Engine', h.engine + (h.engine_version ? ' ' + h.engine_version : '')],
     ['Device', h.device], ['kvprof', h.kvprof_version], ['Started', h.started_at || '–'],
     ['Folder', section.dir]].forEach(function (kv) {
      dl.appendChild(el('dt', null, kv[0]));
      dl.appendChild(el('dd', null, kv[1] || '–'));
    });
    head.appendChild(dl);
    const chips = el('div', 'chips');
    h.natures.forEach(function (n) {
      const c = el('span', 'chip ' + n.nature.replace(/[^a-z]/g, ''));
      c.appendChild(el('b', null, n.nature));
      c.appendChild(document.createTextNode(' ' + n.what));
      chips.appendChild(c);
    });
    head.appendChild(chips);
    if (h.simulated) {
      head.appendChild(el('p', 'note sim',
          'This run used kvprof\'s SIMULATED server: no real GPU or model was measured. ' +
          'Memory and latency come from the simulator, sized by the planner.'));
    }
    parent.appendChild(head);
  }

  function conditionsTable(parent, section) {
    if (!section.conditions.length) return;
    const isGpu = section.breakdown.memory === 'GPU';
    const peak = Math.max.apply(null, section.conditions.map(function (c) {
      return Math.max(c.peak_bytes || 0, c.estimate_bytes || 0);
    }));
    const unit = peak >= 1073741824 ? 'GiB' : 'MiB';
    const scale = function (b) { return b === null ? null : b / (unit === 'GiB' ? 1073741824 : 1048576); };
    const wrap = el('div', 'card wide table-card');
    wrap.appendChild(el('h3', null, 'Conditions'));
    const table = el('table', 'conds');
    const head = el('tr');
    ['condition', 'concurrency', 'peak ' + (isGpu ? 'GPU' : 'RSS') + ' (' + unit + ')',
     'estimate (' + unit + ')',
     'KV peak (%)', 'output tok/s', 'TTFT p50 (ms)', 'TTFT p99 (ms)', 'ITL p50 (ms)',
     'E2E p50 (ms)', 'E2E p99 (ms)'].forEach(function (t) { head.appendChild(el('th', null, t)); });
    const thead = el('thead');
    thead.appendChild(head);
    table.appendChild(thead);
    const body = el('tbody');
    section.conditions.forEach(function (c) {
      const tr = el('tr');
      [c.label, String(c.concurrency), num(scale(c.peak_bytes), unit === 'GiB' ? 3 : 1),
       num(scale(c.estimate_bytes), unit === 'GiB' ? 3 : 1),
       c.kv_peak === null ? '–' : num(c.kv_peak * 100, 1), num(c.tokens_per_s, 1),
       num(c.ttft_p50_ms, 1), num(c.ttft_p99_ms, 1), num(c.itl_p50_ms, 2), num(c.e2e_p50_ms, 1),
       num(c.e2e_p99_ms, 1)].forEach(function (v, i) { tr.appendChild(el('td', i ? 'n' : null, v)); });
      body.appendChild(tr);
    });
    table.appendChild(body);
    wrap.appendChild(table);
    parent.appendChild(wrap);
  }

  function renderRun(section) {
    const s = el('section', 'run');
    s.id = 'run-' + section.run_id;
    headerBlock(s, section);
    const grid = el('div', 'grid');
    s.appendChild(grid);
    root.appendChild(s);
    if (section.timeline.memory.length) timelineChart(grid, section);
    const lines = section.caption_lines;
    section.figures.forEach(function (f) {
      if (f.series.length) figureChart(grid, section.run_id, f, lines);
    });
    breakdownChart(grid, section);
    conditionsTable(grid, section);
    if (section.warnings.length) {
      const w = el('div', 'card wide');
      w.appendChild(el('h3', null, 'Warnings'));
      const ul = el('ul');
      section.warnings.forEach(function (t) { ul.appendChild(el('li', null, t)); });
      w.appendChild(ul);
      grid.appendChild(w);
    }
  }

  function renderCompare(section) {
    const s = el('section', 'compare');
    s.id = 'compare';
    const head = el('div', 'run-head');
    head.appendChild(el('h2', null, 'Runs side by side'));
    head.appendChild(el('p', 'note', section.run_ids.join(' · ')));
    s.appendChild(head);
    const grid = el('div', 'grid');
    s.appendChild(grid);
    root.appendChild(s);
    section.figures.forEach(function (f) {
      if (f.series.length) figureChart(grid, 'compare', f, f.subtitle.split(' | '));
    });
    if (section.deltas && renderers.deltas) renderers.deltas(grid, section.deltas);
  }

  const renderers = { run: renderRun, compare: renderCompare };
  // What report_experiments.js (sweeps, find-max, comparison deltas) draws with.
  window.kvprofLib = {
    data: data, root: root, el: el, num: num, color: color, alpha: alpha, card: card,
    register: register, titleOptions: titleOptions, externalTooltip: externalTooltip,
    CAPACITY: CAPACITY, renderers: renderers
  };

  // Drawn once every script of the page has run (the experiment renderers come after this one).
  document.addEventListener('DOMContentLoaded', function () {
    const top = el('header', 'page-head');
    top.appendChild(el('h1', null, 'kvprof report'));
    top.appendChild(el('p', 'note', 'generated by ' + data.generator + ' at ' + data.generated_at +
        ' · hover a chart for values · click a legend entry to hide a series'));
    root.appendChild(top);
    data.sections.forEach(function (section) {
      const render = renderers[section.type];
      if (render) render(section);
    });
    document.body.dataset.rendered = 'true';
  });
})();
