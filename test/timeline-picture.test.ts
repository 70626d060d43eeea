// The timeline picture as SVG and as PNG from one layout: the bitmap font
// draws the glyphs it should, the PNG has the span colours where the SVG has
// its rectangles and text where the SVG has its text, the default range keeps
// the last three steps, and `tandem trace` draws the range asked for.
import t from 'tap';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PNG } from 'pngjs';
import { timelineSvg, timelinePng, writeChromeTrace, SPAN_COLOURS, type Span } from '../src/index.js';
import { drawnRangeMs } from '../src/monitor/timeline-picture.js';
import { createRaster, drawText } from '../src/monitor/raster.js';
import { glyphPixel, textWidth, GLYPH_HEIGHT, GLYPH_DESCENT } from '../src/monitor/bitmap-font.js';
import { drawnSpans, timelineLayout } from '../src/monitor/timeline-layout.js';
import { DEFAULT_STEP_RANGE, parseStepRange, selectSteps } from '../src/monitor/step-range.js';
import { runTandem } from './fixtures/cli-process.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'tandem-picture-'));

/** Six steps of 100 ms on two devices, in the wall clock spans use. */
function sixSteps(): Span[] {
  const spans: Span[] = [],
    origin = 1.7e12;
  for (let step = 1; step <= 6; step++) {
    for (const device of [0, 1]) {
      const at = origin + (step - 1) * 100 + device * 3;
      const span = (
        thread: Span['thread'],
        kind: Span['kind'],
        name: string,
        start: number,
        end: number,
        group?: number,
      ) =>
        spans.push({
          device,
          thread,
          kind,
          name,
          step,
          start: at + start,
          end: at + end,
          ...(group === undefined ? {} : { group }),
        });
      span('compute', 'load', 'load', 0, 4);
      span('compute', 'forward', 'forward', 4, 40);
      span('compute', 'backward', 'backward fc', 40, 55);
      span('compute', 'backward', 'backward conv', 55, 80);
      span('compute', 'backward', 'backward group 0', 40, 80, 0); // covered by the per-layer ones: not drawn
      span('compute', 'handoff', 'handoff fc', 80, 84);
      span('comm', 'wait', 'wait fc', 0, 55);
      span('comm', 'exchange', 'exchange fc', 55, 85);
      span('comm', 'apply', 'apply fc', 85, 92);
    }
  }
  return spans;
}

const rgbAt = (png: PNG, x: number, y: number) => {
  const i = (Math.floor(y) * png.width + Math.floor(x)) * 4;
  return `#${[0, 1, 2].map(k => png.data[i + k].toString(16).padStart(2, '0')).join('')}`;
};

interface SvgRect {
  x: number;
  y: number;
  width: number;
  height: number;
  fill: string;
  span: boolean;
}
function svgRects(svg: string): SvgRect[] {
  return [
    ...svg.matchAll(
      /<rect( class="span")? x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" fill="(#[0-9a-f]{6})"/g,
    ),
  ].map(m => ({ span: m[1] !== undefined, x: +m[2], y: +m[3], width: +m[4], height: +m[5], fill: m[6] }));
}

interface SvgText {
  x: number;
  y: number;
  size: number;
  anchor: string;
  text: string;
}
function svgTexts(svg: string): SvgText[] {
  const unescape = (s: string) => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  return [
    ...svg.matchAll(
      /<text x="([\d.]+)" y="([\d.]+)"(?: font-size="(\d+)")?(?: text-anchor="(\w+)")? fill="#222222">([^<]*)<\/text>/g,
    ),
  ].map(m => ({ x: +m[1], y: +m[2], size: m[3] ? +m[3] : 11, anchor: m[4] ?? 'start', text: unescape(m[5]) }));
}

t.test('the bitmap font: drawText puts the glyph pixels of A and g where they belong', async t => {
  // Written out by hand, independently of the font table: A on rows 0-6, g reaching one row below the baseline.
  const A = ['.###.', '#...#', '#...#', '#...#', '#####', '#...#', '#...#', '.....'];
  const g = ['.....', '.....', '.####', '#...#', '#...#', '.####', '....#', '####.'];
  const raster = createRaster(40, 20);
  const left = drawText(raster, 'Ag', 7, 12, '#000000');
  t.equal(left, 7, 'start anchor: drawn from x');
  const at = (x: number, y: number) => raster.data[(y * raster.width + x) * 4] === 0;
  const drawn = (dx: number) =>
    Array.from({ length: 8 }, (_, row) =>
      Array.from({ length: 5 }, (_, col) => (at(7 + dx + col, 12 - 7 + row) ? '#' : '.')).join(''),
    );
  t.same(drawn(0), A, 'A');
  t.same(drawn(6), g, 'g, one column of space after A');
  let ink = 0;
  for (let i = 0; i < raster.data.length; i += 4) if (raster.data[i] === 0) ink++;
  const expected = [...A, ...g]
    .join('')
    .split('')
    .filter(c => c === '#').length;
  t.equal(ink, expected, 'nothing drawn outside the two glyphs');
  t.equal(textWidth('Ag'), 11, '5 + 1 + 5 pixels');
  t.equal(textWidth('Ag', 2), 22);
  t.ok(glyphPixel('\u00e9', 1, 0) === glyphPixel('?', 1, 0), 'outside ASCII: drawn as ?');
});

t.test('drawText: scale and anchors place the ink box where textWidth says', async t => {
  for (const anchor of ['start', 'middle', 'end'] as const) {
    const raster = createRaster(200, 40);
    drawText(raster, 'HIM', 100, 30, '#000000', 2, anchor);
    let minX = Infinity,
      maxX = -Infinity,
      minY = Infinity,
      maxY = -Infinity;
    for (let y = 0; y < 40; y++)
      for (let x = 0; x < 200; x++) {
        if (raster.data[(y * 200 + x) * 4] === 0) {
          minX = Math.min(minX, x);
          maxX = Math.max(maxX, x);
          minY = Math.min(minY, y);
          maxY = Math.max(maxY, y);
        }
      }
    const w = textWidth('HIM', 2),
      left = anchor === 'start' ? 100 : anchor === 'middle' ? 100 - w / 2 : 100 - w;
    t.same(
      [minX, maxX + 1, minY, maxY + 1],
      [left, left + w, 30 - 14, 30],
      `${anchor}: ink box [${minX}, ${maxX + 1}) × [${minY}, ${maxY + 1})`,
    );
  }
});

t.test(
  'the PNG has each span colour where the SVG has its rectangle, and the text where the SVG has its text',
  async t => {
    const spans = sixSteps();
    const svg = timelineSvg(spans, 'six steps', { steps: { kind: 'all' } });
    const png = PNG.sync.read(timelinePng(spans, 'six steps', { steps: { kind: 'all' } }));
    const height = +/height="(\d+)"/.exec(svg)![1];
    t.same([png.width, png.height], [1200, height], 'same size');
    const rects = svgRects(svg),
      spanRects = rects.filter(r => r.span);
    t.equal(spanRects.length, drawnSpans(spans).length, 'one rectangle per drawn span');
    t.equal(spanRects.length, 6 * 2 * 8, 'the per-group backward spans are left out');
    for (const r of rects) {
      const cx = r.x + Math.min(r.width, 10) / 2,
        cy = r.y + r.height / 2;
      if (rgbAt(png, cx, cy) !== r.fill)
        t.fail(`pixel (${cx}, ${cy}) is ${rgbAt(png, cx, cy)}, the SVG rectangle is ${r.fill}`);
    }
    t.same(
      new Set(rects.filter(r => !r.span).map(r => r.fill)),
      new Set(Object.values(SPAN_COLOURS)),
      'a legend swatch per kind',
    );
    t.pass(`${rects.length} rectangles checked`);
    const texts = svgTexts(svg);
    t.ok(
      texts.some(x => x.text === 'six steps; all steps 1-6'),
      'the title says which steps',
    );
    for (const label of [
      'device 0 compute',
      'device 0 comm',
      'device 1 compute',
      'device 1 comm',
      '0 ms',
      '500 ms',
      'step 1',
      'step 6',
      ...Object.keys(SPAN_COLOURS),
    ]) {
      t.ok(
        texts.some(x => x.text === label),
        `text ${label}`,
      );
    }
    for (const x of texts) {
      const scale = x.size === 13 ? 2 : 1,
        w = textWidth(x.text, scale);
      const left = x.anchor === 'start' ? x.x : x.anchor === 'middle' ? x.x - w / 2 : x.x - w;
      let ink = 0,
        glyphInk = 0;
      for (let py = x.y - GLYPH_HEIGHT * scale - 1; py < x.y + GLYPH_DESCENT * scale + 1; py++) {
        for (let px = Math.floor(left) - 1; px < Math.ceil(left + w) + 1; px++)
          if (rgbAt(png, px, py) === '#222222') ink++;
      }
      for (const ch of x.text)
        for (let c = 0; c < 5; c++)
          for (let r = 0; r < GLYPH_HEIGHT + GLYPH_DESCENT; r++) if (glyphPixel(ch, c, r)) glyphInk += scale * scale;
      if (ink !== glyphInk)
        t.fail(`text "${x.text}": ${ink} ink pixels in its box in the PNG, its glyphs have ${glyphInk}`);
    }
    t.pass(`${texts.length} texts checked`);
  },
);

t.test('step ranges: the default keeps the last three steps; A..B, A.., ..B, A; refusals name the flag', async t => {
  const spans = sixSteps();
  const last = selectSteps(spans, DEFAULT_STEP_RANGE);
  t.same([last.first, last.last, last.runFirst, last.runLast], [4, 6, 1, 6]);
  t.same(
    last.spans,
    spans.filter(s => s.step >= 4),
    'exactly the spans of steps 4-6',
  );
  const svg = timelineSvg(spans, 'x', { steps: DEFAULT_STEP_RANGE });
  t.equal((svg.match(/<rect class="span"/g) ?? []).length, drawnSpans(spans.filter(s => s.step >= 4)).length);
  t.match(svg, 'x; steps 4-6 of 1-6');
  t.equal(
    (timelineSvg(spans).match(/<rect class="span"/g) ?? []).length,
    drawnSpans(spans).length,
    'no options: every span, as before',
  );
  t.same(parseStepRange('2..4'), { kind: 'between', first: 2, last: 4 });
  t.same(parseStepRange('5'), { kind: 'between', first: 5, last: 5 });
  t.same(
    selectSteps(spans, parseStepRange('5..')).spans,
    spans.filter(s => s.step >= 5),
  );
  t.same(
    selectSteps(spans, parseStepRange('..2')).spans,
    spans.filter(s => s.step <= 2),
  );
  t.throws(() => parseStepRange('4..2'), {
    code: 'BAD_CONFIG',
    message: /--steps 4\.\.2: the first step is after the last \(write 2\.\.4\)/,
  });
  t.throws(() => parseStepRange('a-b'), { code: 'BAD_CONFIG', message: /--steps a-b: expected A\.\.B/ });
  const none = timelineSvg(spans, 'x', { steps: { kind: 'between', first: 9, last: 12 } });
  t.match(none, 'no spans');
});

const runCli = (args: string[]) => runTandem(args);

/** Separate runs of forward blue along the device 0 compute lane: one per step drawn. */
function forwardRuns(png: PNG, laneY: number): number {
  let runs = 0,
    inRun = false;
  for (let x = 0; x < png.width; x++) {
    const blue = rgbAt(png, x, laneY) === SPAN_COLOURS.forward;
    if (blue && !inRun) runs++;
    inRun = blue;
  }
  return runs;
}

t.test('tandem trace --png draws the last three steps by default, --steps A..B or --all when asked', async t => {
  const spans = sixSteps();
  const trace = path.join(tmp, 'trace.json');
  await writeChromeTrace(trace, spans);
  const laneY = timelineLayout(spans, '').spans.find(b => b.span.device === 0 && b.span.thread === 'compute')!.y + 11;
  for (const [args, steps, said] of [
    [[], 3, 'steps 4-6'],
    [['--steps', '2..3'], 2, 'steps 2-3'],
    [['--all'], 6, 'steps 1-6'],
    [['--last', '1'], 1, 'step 6'],
  ] as const) {
    const out = path.join(tmp, `${args.join('') || 'default'}.png`);
    const r = await runCli(['trace', trace, '--png', out, ...args]);
    t.equal(r.code, 0, `tandem trace ${args.join(' ')}: ${r.stderr}`);
    t.match(r.stdout, `(${(drawnSpans(spans).length / 6) * steps} spans drawn, ${said})`);
    const png = PNG.sync.read(readFileSync(out));
    t.same([png.width, png.height], [1200, timelineLayout(spans, '').height], 'the picture size');
    t.equal(
      forwardRuns(png, laneY),
      steps,
      `${args.join(' ') || 'default'}: ${steps} forward spans across device 0's compute lane`,
    );
  }
  const svgOut = path.join(tmp, 'default.svg');
  t.equal((await runCli(['trace', trace, '--svg', svgOut])).code, 0);
  t.match(readFileSync(svgOut, 'utf8'), `${trace}; steps 4-6 of 1-6`, 'the SVG title says which steps');
  const empty = await runCli(['trace', trace, '--png', path.join(tmp, 'x.png'), '--steps', '9..12']);
  t.not(empty.code, 0);
  t.match(empty.stderr, 'no span in the steps asked for; the trace holds steps 1-6');
  for (const last of ['0x2', '1e1', ' 2', '0']) {
    // Number() reads the first three as 2, 10 and 2
    const bad = await runCli(['trace', trace, '--png', path.join(tmp, 'x.png'), '--last', last]);
    t.match(bad.stderr, `--last ${last}: expected a number of steps (1 or more)`, `--last '${last}' refused`);
  }
  const both = await runCli(['trace', trace, '--png', path.join(tmp, 'x.png'), '--steps', '2..3', '--all']);
  t.match(both.stderr, '--steps and --all both choose the steps drawn; give one');
  const unknown = await runCli(['trace', trace, '--pgn', path.join(tmp, 'x.png')]);
  t.not(unknown.code, 0, 'an unknown flag fails');
  t.match(
    unknown.stderr,
    /^tandem: tandem trace: Unknown option '--pgn'.*; usage: tandem trace TRACE\.json --svg/,
    'naming the flag, with the usage',
  );
  t.notMatch(unknown.stderr, /\n\s+at /, 'no stack trace');
});

t.test('--help after any command prints the help, exit 0', async t => {
  for (const command of ['train', 'trace', 'launch', 'profile']) {
    const r = await runCli([command, '--help']);
    t.equal(r.code, 0, `tandem ${command} --help: exit 0 ${r.stderr}`);
    t.match(r.stdout, /tandem launch --hosts N[\s\S]*tandem trace TRACE\.json/, `tandem ${command} --help: the help`);
  }
});

t.test('spanMs: two pictures given the same spanMs draw a span of the same length at the same width', async t => {
  const spans = sixSteps();
  const short = spans.filter(s => s.step <= 2),
    long = spans;
  const widthOf = (drawn: Span[], spanMs?: number) => {
    const layout = timelineLayout(drawn, 'x', spanMs);
    const box = layout.spans.find(b => b.span.name === 'exchange fc' && b.span.device === 0);
    return box!.width;
  };
  t.not(
    widthOf(short).toFixed(3),
    widthOf(long).toFixed(3),
    'each on its own scale: the same 30 ms span differs in width',
  );
  const spanMs = drawnRangeMs(long);
  t.equal(
    Math.round(spanMs),
    595,
    'six steps 100 ms apart, the last apply ending 92 ms into step 6 on device 1 (3 ms later): 595 ms drawn',
  );
  t.equal(widthOf(short, spanMs).toFixed(3), widthOf(long, spanMs).toFixed(3), 'on one scale: the same width');
  t.equal(
    drawnRangeMs(long, { kind: 'last', count: 3 }).toFixed(3),
    drawnRangeMs(spans.filter(s => s.step >= 4)).toFixed(3),
    'drawnRangeMs of the last three steps',
  );
});
