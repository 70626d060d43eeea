/**
 * The dashboard's page and style. Every value the page shows is text in the DOM under a stable id and a label (the
 * figures list, the step-time table, the events list, the configuration), so a screen reader — and a test — reads
 * what the charts draw. The page loads only what its own server serves (dashboard-assets.ts).
 */

const FIGURES: readonly [id: string, label: string][] = [
  ['run-status', 'status'],
  ['steps-done', 'steps done'],
  ['final-loss', 'loss'],
  ['final-accuracy', 'accuracy'],
  ['samples-per-second', 'samples/s'],
  ['step-ms', 'step time (ms)'],
  ['overlap-share', 'exchange under backward'],
  ['data-wait-share', 'waiting for data'],
  ['held-out-accuracy', 'held-out accuracy'],
];

/** The page; `token`: put in every URL it loads (the server requires it off loopback). */
export function pageHtml(token: string | undefined): string {
  const q = token === undefined ? '' : `?token=${encodeURIComponent(token)}`;
  const figures = FIGURES.map(
    ([id, label]) =>
      `<div class="figure"><dt id="${id}-label">${label}</dt>` +
      `<dd id="${id}" aria-labelledby="${id}-label" aria-live="polite">–</dd></div>`,
  ).join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tandem dashboard</title>
<link rel="stylesheet" href="uPlot.min.css${q}">
<link rel="stylesheet" href="dashboard.css${q}">
</head>
<body>
<header><h1 id="run-title">tandem</h1><p id="note" role="status"></p></header>
<main>
<section aria-labelledby="figures-heading"><h2 id="figures-heading">Now</h2><dl id="figures">
${figures}
</dl></section>
<section aria-labelledby="charts-heading" class="charts"><h2 id="charts-heading">Charts</h2>
<figure><figcaption>Loss and accuracy per step (held-out accuracy at the end)</figcaption>
<div id="chart-loss"></div></figure>
<figure><figcaption>Samples per second</figcaption><div id="chart-throughput"></div></figure>
<figure><figcaption>Step time and each device's compute, exchange and wait (ms)</figcaption>
<div id="chart-time"></div></figure>
<figure><figcaption>Share of the exchange that ran under backward</figcaption><div id="chart-overlap"></div></figure>
<figure><figcaption>Each device's bytes exchanged per step (MB)</figcaption><div id="chart-bytes"></div></figure>
</section>
<section aria-labelledby="split-heading"><h2 id="split-heading">Step time split (ms, mean of the last 20 steps)</h2>
<table id="split"><thead><tr><th scope="col">device / host</th><th scope="col">compute</th>
<th scope="col">exchange</th><th scope="col">wait</th></tr></thead><tbody></tbody></table></section>
<section aria-labelledby="timeline-heading"><h2 id="timeline-heading">Timeline of the last steps</h2>
<img id="timeline" alt="no timeline yet"></section>
<section aria-labelledby="events-heading"><h2 id="events-heading">Events: warnings, errors, checkpoints</h2>
<ul id="events" aria-live="polite"></ul></section>
<section aria-labelledby="config-heading"><h2 id="config-heading">Configuration</h2><pre id="config"></pre></section>
</main>
<script src="uPlot.iife.min.js${q}"></script>
<script src="dashboard.js${q}"></script>
</body>
</html>
`;
}

export const PAGE_CSS = `
body { font-family: system-ui, sans-serif; margin: 0 1.5rem 2rem; color: #1d2430; background: #fafbfc; }
header { display: flex; align-items: baseline; gap: 1.5rem; }
h1 { font-size: 1.3rem; } h2 { font-size: 1rem; margin: 1.2rem 0 0.4rem; }
#figures { display: flex; flex-wrap: wrap; gap: 0.6rem; margin: 0; }
.figure { background: white; border: 1px solid #d8dde5; border-radius: 6px; padding: 0.4rem 0.8rem; min-width: 8rem; }
dt { font-size: 0.75rem; color: #5a6473; } dd { margin: 0; font-size: 1.25rem; font-variant-numeric: tabular-nums; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 0.8rem; }
.charts h2 { grid-column: 1 / -1; }
figure { margin: 0; background: white; border: 1px solid #d8dde5; border-radius: 6px; padding: 0.5rem; }
figcaption { font-size: 0.8rem; color: #5a6473; margin-bottom: 0.3rem; }
table { border-collapse: collapse; background: white; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d8dde5; padding: 0.2rem 0.7rem; text-align: right; } th:first-child { text-align: left; }
#timeline { max-width: 100%; background: white; border: 1px solid #d8dde5; }
#events li.warning { color: #8a5a00; } #events li.failed { color: #b00020; font-weight: bold; }
#config { background: white; border: 1px solid #d8dde5; padding: 0.5rem; max-height: 20rem; overflow: auto; }
#note { color: #5a6473; }
`;
