/**
 * The dashboard page's script, served as is (no build step): it reads `/events` (server-sent events, the feed's
 * messages; a reconnection gets everything again and starts over), keeps the steps, and redraws at most every 150 ms:
 * the figures as text, uPlot's charts (when uplot is there), the step-time table, the timeline picture (an <img>
 * of the server's SVG), the events list and the configuration. Values go into the DOM as text only (textContent),
 * never as markup.
 */
export const PAGE_SCRIPT = String.raw`(function () {
  'use strict';
  var q = location.search;
  var PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];
  var state, charts = {}, timer = null, timelineUrl = null;
  function reset() {
    state = { steps: [], summary: null, status: 'connecting', ended: false };
    document.getElementById('events').textContent = '';
  }
  function $(id) { return document.getElementById(id); }
  function put(id, value) { var e = $(id); if (e.textContent !== value) e.textContent = value; }
  function fixed(x, d) { return typeof x === 'number' && isFinite(x) ? x.toFixed(d) : '–'; }
  function num(x) { return typeof x === 'number' && isFinite(x) ? x : null; }
  function mean(a) { return a.length ? a.reduce(function (s, x) { return s + x; }, 0) / a.length : NaN; }

  function addEvent(e) {
    var line = null, cls = e.type;
    var host = e.host !== undefined ? ' (host ' + e.host + ')' : '';
    switch (e.type) {
      case 'started': state.status = 'running'; return;
      case 'warning': line = 'warning' + host + (e.step > 0 ? ' at step ' + e.step : '') + ': ' + e.message; break;
      case 'failed': state.status = 'failed'; line = 'failed' + host + ': ' + e.message; break;
      case 'checkpoint': line = 'checkpoint at step ' + e.step + ': ' + e.path; break;
      case 'stopped': state.status = 'stopped after step ' + e.step; line = 'stopped after step ' + e.step; break;
      case 'auto': line = 'auto picked ' + e.strategy + ': ' + e.reason; break;
      case 'finished': if (state.status === 'running') state.status = 'finished'; return;
      default: return;
    }
    var li = document.createElement('li');
    li.className = cls;
    li.textContent = line;
    $('events').appendChild(li);
  }

  function handle(m) {
    switch (m.kind) {
      case 'config':
        put('run-title', m.title);
        put('config', JSON.stringify(m.config, null, 2));
        break;
      case 'step':
        var s = state.steps;
        while (s.length && s[s.length - 1].step >= m.step.step) s.pop();
        s.push(m.step);
        if (state.status === 'connecting') state.status = 'running';
        break;
      case 'event': addEvent(m.event); break;
      case 'timeline':
        if (timelineUrl) URL.revokeObjectURL(timelineUrl);
        timelineUrl = URL.createObjectURL(new Blob([m.svg], { type: 'image/svg+xml' }));
        $('timeline').src = timelineUrl;
        $('timeline').alt = 'timeline of the last steps: compute and comm lanes per device';
        break;
      case 'summary':
        state.summary = m.summary;
        if (m.summary.stoppedAt !== undefined) state.status = 'stopped after step ' + m.summary.stoppedAt;
        else if (state.status !== 'failed') state.status = 'finished';
        break;
    }
    schedule();
  }

  function schedule() { if (timer === null) timer = setTimeout(render, 150); }

  function figures() {
    var steps = state.steps, last = steps[steps.length - 1], sum = state.summary;
    put('run-status', state.status);
    if (!last && !sum) return;
    put('steps-done', String(sum ? sum.steps : last.step));
    put('final-loss', fixed(sum ? sum.finalLoss : last.loss, 4));
    put('final-accuracy', fixed(sum ? sum.finalAccuracy : last.accuracy, 4));
    put('samples-per-second', fixed(sum ? sum.samplesPerSecond : last.samplesPerSecond, 1));
    if (last) put('step-ms', fixed(last.stepMs, 1));
    var recent = steps.slice(-20);
    if (recent.length) put('overlap-share', fixed(100 * mean(recent.map(function (x) { return x.overlap; })), 0) + '%');
    var waited = recent.filter(function (x) { return isFinite(x.dataWaitMs) && x.stepMs > 0; });
    if (waited.length) {
      var share = mean(waited.map(function (x) { return x.dataWaitMs; })) /
        mean(waited.map(function (x) { return x.stepMs; }));
      put('data-wait-share', fixed(100 * share, 1) + '%');
    }
    if (sum && sum.heldOutAccuracy !== undefined) put('held-out-accuracy', fixed(sum.heldOutAccuracy, 4));
  }

  function splitTable() {
    var recent = state.steps.slice(-20), body = $('split').tBodies[0];
    if (!recent.length) return;
    var devices = recent[recent.length - 1].computeMs.length, rows = [], hosts = {};
    for (var d = 0; d < devices; d++) {
      var row = ['computeMs', 'exchangeMs', 'waitMs'].map(function (k) {
        return mean(recent.map(function (x) { return x[k][d] || 0; }));
      });
      rows.push(['device ' + d].concat(row));
      var h = recent[recent.length - 1].hosts[d] || 0;
      (hosts[h] = hosts[h] || []).push(row);
    }
    Object.keys(hosts).forEach(function (h) {
      rows.push(['host ' + h].concat([0, 1, 2].map(function (i) {
        return mean(hosts[h].map(function (r) { return r[i]; }));
      })));
    });
    while (body.rows.length > rows.length) body.deleteRow(-1);
    rows.forEach(function (r, i) {
      var tr = body.rows[i] || body.insertRow();
      r.forEach(function (v, j) {
        var cell = tr.cells[j] || tr.insertCell();
        cell.textContent = j === 0 ? v : fixed(v, 1);
      });
    });
  }

  function chart(id, series, data) {
    if (typeof uPlot === 'undefined') return;
    var el = $(id);
    if (!charts[id] || charts[id].series.length !== series.length + 1) {
      if (charts[id]) charts[id].destroy();
      var opts = { width: Math.max(320, el.clientWidth - 8), height: 220, legend: { live: false },
        scales: { x: { time: false } },
        series: [{ label: 'step' }].concat(series.map(function (s, i) {
          return { label: s, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: true };
        })) };
      charts[id] = new uPlot(opts, data, el);
    } else charts[id].setData(data);
  }

  function drawCharts() {
    var s = state.steps;
    if (!s.length) return;
    var x = s.map(function (v) { return v.step; });
    var col = function (f) { return s.map(function (v) { return num(f(v)); }); };
    var lossData = [x, col(function (v) { return v.loss; }), col(function (v) { return v.accuracy; })];
    var lossSeries = ['loss', 'accuracy'];
    if (state.summary && state.summary.heldOutAccuracy !== undefined) {
      lossSeries.push('held-out accuracy');
      lossData.push(x.map(function (_, i) { return i === x.length - 1 ? state.summary.heldOutAccuracy : null; }));
    }
    chart('chart-loss', lossSeries, lossData);
    chart('chart-throughput', ['samples/s'], [x, col(function (v) { return v.samplesPerSecond; })]);
    var devices = s[s.length - 1].computeMs.length, names = ['step time'];
    var data = [x, col(function (v) { return v.stepMs; })];
    names.push('data wait');
    data.push(col(function (v) { return v.dataWaitMs; }));
    ['compute', 'exchange', 'wait'].forEach(function (k) {
      for (var d = 0; d < devices; d++) {
        names.push(k + ' ' + d);
        data.push(col(function (v) { return v[k + 'Ms'][d]; }));
      }
    });
    chart('chart-time', names, data);
    chart('chart-overlap', ['overlap share'], [x, col(function (v) { return v.overlap; })]);
    var bytes = [x], bytesNames = [];
    for (var b = 0; b < devices; b++) {
      bytesNames.push('device ' + b);
      bytes.push(col(function (v) { return v.exchangeBytes ? v.exchangeBytes[b] / 1e6 : null; }));
    }
    chart('chart-bytes', bytesNames, bytes);
  }

  function render() {
    timer = null;
    figures();
    splitTable();
    drawCharts();
    document.body.dataset.state = state.status;
    if (state.ended) document.body.dataset.ended = 'true'; // after the values it ended on are in the DOM
    else delete document.body.dataset.ended;
  }

  reset();
  if (typeof uPlot === 'undefined') put('note', 'charts are unavailable (uplot is not installed); values below');
  var source = new EventSource('events' + q);
  source.onopen = function () { reset(); put('note', ''); };
  source.onmessage = function (e) { handle(JSON.parse(e.data)); };
  source.addEventListener('end', function () {
    source.close();
    state.ended = true;
    if (state.status === 'running' || state.status === 'connecting') state.status = 'ended';
    put('note', 'the run has ended; this page keeps its last values');
    schedule();
  });
  source.onerror = function () {
    if (source.readyState !== EventSource.CLOSED) put('note', 'the connection to the run was lost; retrying');
  };
})();
`;
