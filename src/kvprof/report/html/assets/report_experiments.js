// kvprof report page, experiment sections, drawn with Chart.js through window.kvprofLib (see
// report.js): a sweep (per configuration, heatmaps over input length x concurrency, and measured
// vs estimated memory across configurations), a find-max search (its steps, what each tried
// concurrency used, the answer) and the deltas of runs compared against the first.
(function () {
  'use strict';
  const K = window.kvprofLib;
  const el = K.el, num = K.num;
  const PASS = '#009e73', FAIL = '#c72929', CUT = '#8a8a96';
  // A step's verdict: an interrupted step is not a result.
  function verdict(st) { return st.interrupted ? 'INTERRUPTED' : st.pass ? 'PASS' : 'FAIL'; }
  function verdictColour(st) { return st.interrupted ? CUT : st.pass ? PASS : FAIL; }
  // A sequential scale, light to dark: low values pale, high values dark.
  const SCALE = ['#f7fcf0', '#e0f3db', '#ccebc5', '#a8ddb5', '#7bccc4', '#4eb3d3', '#2b8cbe',
                 '#0868ac', '#084081'];
  const EMPTY = '#ececf0';

  // The colour of `v` on the scale from `lo` (palest) to `hi` (darkest).
  function cellColor(v, lo, hi) {
    if (v === null || v === undefined) return EMPTY;
    const f = hi > lo ? Math.max(0, Math.min(1, (v - lo) / (hi - lo))) : 1;
    return SCALE[Math.round(f * (SCALE.length - 1))];
  }
  // A round axis end at or above `x` (1, 1.5, 2, 2.5, ... times a power of ten).
  function niceCeil(x) {
    if (!(x > 0)) return 1;
    const step = Math.pow(10, Math.floor(Math.log10(x)));
    return Math.ceil(x / step * 2) / 2 * step;
  }
  function darkCell(hex) {
    const n = parseInt(hex.slice(1), 16);
    return 0.299 * (n >> 16 & 255) + 0.587 * (n >> 8 & 255) + 0.114 * (n & 255) < 140;
  }
  // "model · engine version · device" of the runs a section made ('' before any ran).
  function ranOn(section) {
    const h = section.header;
    if (!h) return '';
    return [h.model, h.engine + (h.engine_version ? ' ' + h.engine_version : ''), h.device]
        .filter(Boolean).join(' · ');
  }
  function headerFacts(section) {
    const h = section.header || {};
    return [['Model', h.model], ['Engine', h.engine ? h.engine + (h.engine_version ? ' ' + h.engine_version : '') : ''],
            ['Device', h.device], ['kvprof', h.kvprof_version]];
  }
  function natureLine(natures) {
    return 'data: ' + natures.map(function (n) { return n.what + ' ' + n.nature; }).join(' · ');
  }
  function tooltip(callbacks, extra) {
    return Object.assign({ enabled: false, external: K.externalTooltip, callbacks: callbacks },
                         extra || {});
  }
  function table(parent, title, header, rows, size) {
    const wrap = el('div', 'card ' + (size || 'wide') + ' table-card');
    if (title) wrap.appendChild(el('h3', null, title));
    const t = el('table', 'conds');
    const thead = el('thead'), hr = el('tr');
    header.forEach(function (h) { hr.appendChild(el('th', null, h)); });
    thead.appendChild(hr);
    t.appendChild(thead);
    const body = el('tbody');
    rows.forEach(function (r) {
      const tr = el('tr');
      r.forEach(function (v, i) { tr.appendChild(el('td', i ? 'n' : null, v)); });
      body.appendChild(tr);
    });
    t.appendChild(body);
    wrap.appendChild(t);
    parent.appendChild(wrap);
    return wrap;
  }
  function head(parent, title, badges, facts, natures) {
    const h = el('div', 'run-head');
    const h2 = el('h2', null, title);
    badges.forEach(function (b) { h2.appendChild(el('span', 'badge ' + b[0], b[1])); });
    h.appendChild(h2);
    const dl = el('dl', 'facts');
    facts.forEach(function (kv) {
      dl.appendChild(el('dt', null, kv[0]));
      dl.appendChild(el('dd', null, kv[1] === null || kv[1] === undefined || kv[1] === '' ? '–' : String(kv[1])));
    });
    h.appendChild(dl);
    const chips = el('div', 'chips');
    natures.forEach(function (n) {
      const c = el('span', 'chip ' + n.nature.replace(/[^a-z]/g, ''));
      c.appendChild(el('b', null, n.nature));
      c.appendChild(document.createTextNode(' ' + n.what));
      chips.appendChild(c);
    });
    h.appendChild(chips);
    parent.appendChild(h);
  }

  // Each cell's value written on it.
  const cellLabels = {
    id: 'kvprofCellLabels',
    afterDatasetsDraw: function (chart) {
      const ctx = chart.ctx;
      ctx.save();
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.font = '600 11.5px ' + Chart.defaults.font.family;
      chart.data.datasets.forEach(function (d, di) {
        chart.getDatasetMeta(di).data.forEach(function (bar, i) {
          const v = d.values[i];
          ctx.fillStyle = darkCell(d.backgroundColor[i]) ? '#fff' : '#1f1f26';
          ctx.fillText(v === null ? 'not run' : num(v, d.digits), bar.x, (bar.y + bar.base) / 2);
        });
      });
      ctx.restore();
    }
  };

  // A heatmap: a stacked bar per concurrency, one unit-high segment per input length.
  function heatmap(parent, id, title, lines, hm, metric, unit, digits, nature) {
    const canvas = K.card(parent, id, 120 + 46 * Math.max(2, hm.input_lens.length), 'third');
    canvas.setAttribute('aria-label', title);
    let lo = Infinity, hi = -Infinity;
    hm.cells.forEach(function (c) {
      if (c[metric] === null) return;
      lo = Math.min(lo, c[metric]);
      hi = Math.max(hi, c[metric]);
    });
    if (hi < lo) lo = hi = 0;
    if (digits === null) digits = hi >= 10 ? 1 : hi >= 0.1 ? 2 : 4;
    const datasets = hm.input_lens.map(function (len, r) {
      const cells = hm.batch_sizes.map(function (_, col) {
        return hm.cells.find(function (c) { return c.row === r && c.col === col; }) || null;
      });
      const values = cells.map(function (c) { return c ? c[metric] : null; });
      return { label: 'input ' + len, inputLen: len, cells: cells, values: values, digits: digits,
               data: values.map(function () { return 1; }),
               backgroundColor: values.map(function (v) { return cellColor(v, lo, hi); }),
               borderColor: '#fff', borderWidth: 1.5, barPercentage: 1, categoryPercentage: 1 };
    });
    const n = hm.input_lens.length;
    const chart = new Chart(canvas, {
      type: 'bar',
      data: { labels: hm.batch_sizes.map(String), datasets: datasets },
      plugins: [cellLabels],
      options: {
        scales: {
          x: { stacked: true, grid: { display: false },
               title: { display: true, text: 'concurrency (requests at once)' } },
          y: { stacked: true, min: 0, max: n, grid: { display: false },
               title: { display: true, text: 'input length (tokens)' },
               afterBuildTicks: function (axis) {
                 axis.ticks = hm.input_lens.map(function (_, i) { return { value: i + 0.5 }; });
               },
               ticks: { callback: function (v) { return String(hm.input_lens[Math.floor(v)]); } } }
        },
        plugins: Object.assign(K.titleOptions(title, lines.concat([
          'palest ' + num(lo, digits) + ', darkest ' + num(hi, digits) + ' ' + unit + ' · ' +
          nature + (hi > lo ? '' : ' · all cells equal')])), {
          legend: { display: false },
          tooltip: tooltip({
            title: function (items) {
              if (!items.length) return '';
              const d = items[0].dataset;
              return 'input ' + d.inputLen + ' · concurrency ' + hm.batch_sizes[items[0].dataIndex];
            },
            label: function (item) {
              const v = item.dataset.values[item.dataIndex];
              return title.replace(/ \([^)]*\)$/, '') + ': ' +
                  (v === null ? 'not run' : num(v, digits) + ' ' + unit) + ' (' + nature + ')';
            },
            footer: function (items) {
              const c = items.length ? items[0].dataset.cells[items[0].dataIndex] : null;
              if (!c) return '';
              return [c.condition + (c.fits ? '' : ' · the plan says it does not fit') +
                      (c.errors > 0 ? ' · ' + c.errors + ' request(s) failed' : '')];
            }
          }, { mode: 'point', intersect: true })
        })
      }
    });
    K.register(id, 'heatmap', chart);
  }

  function configurationsChart(parent, section) {
    const cfgs = section.configurations.filter(function (c) {
      return c.estimate_total !== null || c.measured_peak !== null;
    });
    if (!cfgs.length) return;
    const id = 'sweep-configurations';
    const canvas = K.card(parent, id, 360, 'wide');
    canvas.setAttribute('aria-label', 'memory per configuration');
    const measured = section.simulated ? 'simulated' : 'measured';
    const chart = new Chart(canvas, {
      type: 'bar',
      data: {
        labels: cfgs.map(function (c) { return c.id; }),
        datasets: [
          { label: 'estimated', nature: 'estimated', backgroundColor: K.alpha('#0072b3', 0.35),
            borderColor: '#0072b3', borderWidth: 1.2, maxBarThickness: 90,
            data: cfgs.map(function (c) { return c.estimate_total; }) },
          { label: 'peak ' + measured, nature: measured, backgroundColor: '#0072b3',
            maxBarThickness: 90,
            data: cfgs.map(function (c) { return c.measured_peak; }) }]
      },
      options: {
        scales: {
          x: { grid: { display: false }, title: { display: true, text: 'configuration' } },
          y: { beginAtZero: true, grid: { color: '#ececf0' },
               title: { display: true,
                        text: section.memory_label +
                            (section.memory_label === 'GPU memory' ? ', all GPUs' : '') +
                            ' (' + section.unit + ')' } }
        },
        plugins: Object.assign(K.titleOptions(section.memory_label +
            ' per configuration: estimated vs peak ' +
            measured, ['sweep ' + section.name + ' · ' + cfgs.length + ' configuration(s)' +
                       (ranOn(section) ? ' · ' + ranOn(section) : ''),
                       natureLine(section.natures)]), {
          legend: { position: 'bottom' },
          tooltip: tooltip({
            title: function (items) {
              return items.length ? cfgs[items[0].dataIndex].label : '';
            },
            label: function (item) {
              return item.dataset.label + ': ' + num(item.parsed.y) + ' ' + section.unit +
                  ' (' + item.dataset.nature + ')';
            }
          }, { mode: 'index', intersect: false })
        })
      }
    });
    K.register(id, 'configurations', chart);
  }

  function renderSweep(section) {
    const s = el('section', 'sweep');
    s.id = 'sweep';
    const n = section.configurations.length;
    const ran = section.configurations.filter(function (c) { return c.run_id; }).length;
    head(s, 'Sweep ' + section.name, [section.simulated ? ['sim', 'SIMULATED'] : null,
                                       ['kind', 'sweep']].filter(Boolean),
         [['Status', section.status], ['Configurations', n + ' (' + ran + ' ran)'],
          ['File', section.config_file], ['Folder', section.dir]].concat(headerFacts(section)),
         section.natures);
    const grid = el('div', 'grid');
    s.appendChild(grid);
    K.root.appendChild(s);
    configurationsChart(grid, section);
    table(grid, 'Configurations', ['#', 'configuration', 'GPU', 'status', 'run', 'why'],
          section.configurations.map(function (c) {
            return [c.id, c.label, c.gpu, c.status, c.run_id || '–', c.reason || ''];
          }));
    const natureOf = section.simulated ? 'simulated' : 'measured';
    section.configurations.forEach(function (c) {
      const measured = c.heatmaps.some(function (h) {
        return h.cells.some(function (x) { return x.peak !== null || x.kv_pct !== null; });
      });
      const box = el('div', 'card wide');
      box.appendChild(el('h3', null, 'Configuration ' + c.id + ': ' + c.label));
      box.appendChild(el('p', 'note', c.model_id + ' on ' + c.gpu + ' · ' + c.server + ' · ' +
          c.status + (c.run_id ? ' · run ' + c.run_id + ' (its section is below)' : '') +
          (measured ? '' : ' · nothing measured yet: the estimate only')));
      grid.appendChild(box);
      c.heatmaps.forEach(function (hm) {
        const base = 'sweep-' + c.id + '-out' + hm.output_len;
        const lines = [c.model_id + ' on ' + c.gpu + ' · ' + (c.simulated ? 'simulator' : c.server),
                       'configuration ' + c.id + ' · output ' + hm.output_len + ' tokens'];
        if (measured) {
          heatmap(grid, base + '-peak', 'Peak ' + section.memory_label + ' (' + section.unit + ')',
                  lines, hm, 'peak',
                  section.unit, 2, natureOf);
          heatmap(grid, base + '-kv', 'KV cache usage, peak (%)', lines, hm, 'kv_pct', '%', null,
                  'engine-reported');
        }
        heatmap(grid, base + '-estkv', 'KV needed by the batch (% of the KV pool)', lines, hm,
                'est_kv_pct', '%', null, 'estimated');
      });
    });
    if (section.left_out && section.left_out.length) {
      table(grid, 'Runs left out of this page', ['why'],
            section.left_out.map(function (t) { return [t]; }));
    }
  }

  function renderFindMax(section) {
    const s = el('section', 'find-max');
    s.id = 'find-max';
    const bound = section.step_bound;
    head(s, 'find-max ' + section.run_id, [section.simulated ? ['sim', 'SIMULATED'] : null,
                                            section.interrupted ? ['warn', 'INTERRUPTED'] : null,
                                            ['kind', 'find-max']].filter(Boolean),
         [['Answer', section.answer === null ? 'none passes' : 'concurrency ' + section.answer],
          ['First failing', section.first_fail], ['Margin', section.margin],
          ['Lengths', 'input ' + section.input_len + ' · output ' + section.output_len],
          ['Steps', section.n_steps + ' (at most ' + bound + '; a grid: ' + section.grid_steps + ')'],
          ['Start', section.start === null ? 'the middle of the range'
                                           : section.start + ' (' + section.start_source + ')'],
          ['Server', section.launch || section.endpoint], ['Folder', section.dir]]
             .concat(headerFacts(section)),
         section.natures);
    const grid = el('div', 'grid');
    s.appendChild(grid);
    K.root.appendChild(s);
    const steps = section.steps;
    const lines = [ranOn(section), 'input ' + section.input_len + ' · output ' + section.output_len +
                   ' tokens · range ' + section.min_concurrency + '–' + section.max_concurrency,
                   natureLine(section.natures)].filter(Boolean);
    const limitLine = function (label, y, colour, xs) {
      return { label: label, hline: true, data: [{ x: xs[0], y: y }, { x: xs[1], y: y }],
               borderColor: colour, borderDash: [8, 5], borderWidth: 1.6, pointRadius: 0,
               pointHoverRadius: 0 };
    };
    // 1: the concurrency each step tried.
    {
      const id = 'find-max-steps';
      const canvas = K.card(grid, id, 380, 'half');
      canvas.setAttribute('aria-label', 'search steps');
      const xs = [0.5, steps.length + 0.5];
      const datasets = [{
        label: 'concurrency tried', data: steps.map(function (st) { return { x: st.step, y: st.concurrency }; }),
        borderColor: '#8a8a96', borderWidth: 1.4, pointRadius: 7, pointHoverRadius: 9,
        pointBackgroundColor: steps.map(verdictColour),
        pointBorderColor: '#fff', pointBorderWidth: 1.5 }];
      if (section.answer !== null) datasets.push(limitLine('answer: ' + section.answer, section.answer, PASS, xs));
      if (section.first_fail !== null) datasets.push(limitLine('first failing: ' + section.first_fail, section.first_fail, FAIL, xs));
      const chart = new Chart(canvas, {
        type: 'line', data: { datasets: datasets },
        options: {
          parsing: false,
          scales: {
            x: { type: 'linear', min: xs[0], max: xs[1], title: { display: true, text: 'step' },
                 afterBuildTicks: function (axis) {
                   axis.ticks = steps.map(function (st) { return { value: st.step }; });
                 },
                 grid: { display: false } },
            y: { beginAtZero: true, title: { display: true, text: 'concurrency' },
                 grid: { color: '#ececf0' }, ticks: { precision: 0 } }
          },
          plugins: Object.assign(K.titleOptions('The search: each step (green passed, red failed, grey interrupted)', lines), {
            legend: { position: 'bottom', labels: { boxWidth: 22, boxHeight: 2 } },
            tooltip: tooltip({
              title: function (items) {
                if (!items.length) return '';
                const st = steps[items[0].dataIndex];
                return 'step ' + st.step + ' (' + st.phase + ')';
              },
              label: function (item) {
                const st = steps[item.dataIndex];
                return 'concurrency ' + st.concurrency + ': ' + verdict(st);
              },
              footer: function (items) { return items.length ? [steps[items[0].dataIndex].why] : ''; }
            }, { mode: 'point', intersect: false, filter: function (i) { return !i.dataset.hline; } })
          })
        }
      });
      K.register(id, 'find-max-steps', chart);
    }
    // 2: what each concurrency tried used, against the limits.
    const byC = steps.slice().sort(function (a, b) { return a.concurrency - b.concurrency; });
    const xs = [0, niceCeil(Math.max.apply(null, byC.map(function (st) { return st.concurrency; })) * 1.05)];
    const point = function (key) {
      return byC.filter(function (st) { return st[key] !== null; })
          .map(function (st) { return { x: st.concurrency, y: st[key], step: st }; });
    };
    const series = function (label, key, colour, nature, unit) {
      const pts = point(key);
      return { label: label, nature: nature, unit: unit, data: pts, borderColor: colour,
               backgroundColor: colour, borderWidth: 2, pointRadius: 5, pointHoverRadius: 7,
               pointBackgroundColor: pts.map(function (p) { return verdictColour(p.step); }) };
    };
    const measured = section.simulated ? 'simulated' : 'measured';
    const usage = [series('KV cache usage, peak (%)', 'kv_pct', '#009e73', 'engine-reported', '%'),
                   series('memory used (%: busiest GPU, or RAM on CPU)', 'memory_pct', '#0072b3', measured, '%')]
        .filter(function (d) { return d.data.length; });
    const xScale = { type: 'linear', min: xs[0], max: xs[1], title: { display: true, text: 'concurrency' },
                     grid: { color: '#f1f1f4' }, ticks: { precision: 0 } };
    const pointTooltip = tooltip({
      title: function (items) { return items.length ? 'concurrency ' + items[0].parsed.x : ''; },
      label: function (item) {
        const d = item.dataset;
        return d.label.replace(/ \([^)]*\)$/, '') + ': ' + num(item.parsed.y) + ' ' + d.unit +
            ' (' + d.nature + ', ' + ({ PASS: 'passed', FAIL: 'failed', INTERRUPTED: 'interrupted' })[verdict(d.data[item.dataIndex].step)] + ')';
      }
    }, { mode: 'nearest', intersect: false, filter: function (i) { return !i.dataset.hline; } });
    // A line chart over the concurrencies tried (x) with the pass/fail-coloured points.
    const perConcurrencyChart = function (id, label, title, datasets, y) {
      const canvas = K.card(grid, id, 380, 'half');
      canvas.setAttribute('aria-label', label);
      K.register(id, id, new Chart(canvas, {
        type: 'line', data: { datasets: datasets },
        options: {
          parsing: false,
          scales: { x: xScale, y: { beginAtZero: true, suggestedMax: y.suggestedMax,
                                    grid: { color: '#ececf0' }, title: { display: true, text: y.text } } },
          plugins: Object.assign(K.titleOptions(title, lines), {
            legend: { position: 'bottom', labels: { boxWidth: 22, boxHeight: 2 } },
            tooltip: pointTooltip
          })
        }
      }));
    };
    if (usage.length) {
      if (section.max_memory_frac !== null) usage.push(limitLine('memory limit (' + num(section.max_memory_frac * 100, 1) + '%)', section.max_memory_frac * 100, '#0072b3', xs));
      usage.push(limitLine('KV cache full (100%)', 100, FAIL, xs));
      perConcurrencyChart('find-max-usage', 'memory and KV usage per concurrency',
                          'What each concurrency used', usage,
                          { suggestedMax: 100, text: 'peak during the step (%)' });
    }
    // 3: the latency SLOs, when any step measured latency.
    const latency = [series('TTFT p99 (ms)', 'ttft_p99_ms', '#e69e00', measured, 'ms'),
                     series('ITL p99 (ms)', 'itl_p99_ms', '#cc78a6', measured, 'ms')]
        .filter(function (d) { return d.data.length; });
    if (latency.length) {
      if (section.slo_ttft_ms !== null) latency.push(limitLine('TTFT SLO ' + section.slo_ttft_ms + ' ms', section.slo_ttft_ms, '#e69e00', xs));
      if (section.slo_itl_ms !== null) latency.push(limitLine('ITL SLO ' + section.slo_itl_ms + ' ms', section.slo_itl_ms, '#cc78a6', xs));
      perConcurrencyChart('find-max-latency', 'latency per concurrency', 'Latency against the SLOs',
                          latency, { text: 'latency (ms)' });
    }
    table(grid, 'Steps', ['step', 'phase', 'concurrency', 'verdict', 'KV peak (%)', 'memory (%)',
                          'TTFT p99 (ms)', 'errors', 'time (s)', 'why'],
          steps.map(function (st) {
            return [String(st.step), st.phase, String(st.concurrency), verdict(st),
                    num(st.kv_pct, 1), num(st.memory_pct, 1), num(st.ttft_p99_ms, 1),
                    st.n_errors === null ? '–' : String(st.n_errors), num(st.wall_s, 1), st.why];
          }));
  }

  function renderDeltas(grid, d) {
    const others = d.run_ids.slice(1);
    if (d.memory.length) {
      const id = 'compare-deltas';
      const canvas = K.card(grid, id, 140 + 30 * d.memory.length * Math.max(1, others.length), 'wide');
      canvas.setAttribute('aria-label', 'memory differences');
      const labels = d.memory.map(function (r) { return r.section + ': ' + r.name; });
      const datasets = others.map(function (rid, i) {
        return { label: rid + ' − ' + d.run_ids[0], run: i + 1,
                 data: d.memory.map(function (r) { return r.diff[i] === undefined ? null : r.diff[i]; }),
                 backgroundColor: K.color(i + 1), borderColor: K.color(i + 1), barPercentage: 0.8 };
      });
      K.register(id, 'deltas', new Chart(canvas, {
        type: 'bar', data: { labels: labels, datasets: datasets },
        options: {
          indexAxis: 'y',
          scales: {
            x: { grid: { color: '#ececf0' }, title: { display: true, text: 'difference against ' + d.run_ids[0] + ' (' + d.unit + ')' } },
            y: { grid: { display: false } }
          },
          plugins: Object.assign(K.titleOptions('Memory: each run against the first',
              ['reference: ' + d.run_ids[0] + ' · bars: run − reference; the tooltip gives both figures and the % change',
               'data: each figure as its run has it (measured, engine-reported or estimated: the row says which)' +
                   (d.simulated.some(Boolean) ? ' · SIMULATED runs: ' + d.run_ids.filter(function (_, i) { return d.simulated[i]; }).join(', ') : '')]), {
            legend: { position: 'bottom' },
            tooltip: tooltip({
              title: function (items) { return items.length ? labels[items[0].dataIndex] : ''; },
              label: function (item) {
                const r = d.memory[item.dataIndex], k = item.dataset.run;
                const diff = r.diff[k - 1], pct = r.pct[k - 1];
                return item.dataset.label + ': ' + (diff > 0 ? '+' : '') + num(diff) + ' ' + d.unit +
                    (pct === null ? '' : ' (' + (pct > 0 ? '+' : '') + num(pct, 1) + '%)') + ', ' +
                    num(r.values[0]) + ' → ' + num(r.values[k]) + ' ' + d.unit;
              }
            }, { mode: 'index', intersect: false })
          })
        }
      }));
    }
    if (d.settings.length) {
      table(grid, 'Settings that differ', ['setting'].concat(d.run_ids),
            d.settings.map(function (s) { return [s.name].concat(s.values); }));
    }
    if (d.graphs.length) {
      const mib = function (v) { return v === null ? '–' : num(v / 1048576, 1); };
      table(grid, 'CUDA graphs against ' + d.run_ids[0],
            ['run', 'graphs', 'extra graphs', 'memory figure', 'overhead (MiB)', 'increase (%)',
             'per extra graph (MiB)', 'estimated extra', 'estimated overhead (MiB)'],
            d.graphs.map(function (g) {
              return [g.run_id, (g.graphs_first === null ? '–' : g.graphs_first) + ' → ' +
                      (g.graphs === null ? '–' : g.graphs),
                      g.extra_graphs === null ? '–' : String(g.extra_graphs), g.memory_figure || '–',
                      mib(g.overhead_bytes), num(g.increase_pct, 1), mib(g.per_graph_bytes),
                      g.estimated_extra_graphs === null ? '–' : String(g.estimated_extra_graphs),
                      mib(g.estimated_overhead_bytes)];
            }));
    }
  }

  K.renderers.sweep = renderSweep;
  K.renderers.find_max = renderFindMax;
  K.renderers.deltas = renderDeltas;
})();
