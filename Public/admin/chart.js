// The overview's charts: SVG drawn here (no library, nothing loaded from elsewhere). Series are
// told apart by colour AND pattern (and lines by dash), named in a legend, and each chart has a
// table of the same numbers behind it for people who do not see it.
import { h, uid, table } from './ui.js';
import { t, day, number } from './i18n.js';

const SVG = 'http://www.w3.org/2000/svg';
const HEIGHT = 240;
const MARGIN = { top: 12, right: 12, bottom: 30, left: 52 };
// The marks over each series' colour: none, diagonal lines, dots, cross-hatch, horizontal, vertical.
const PATTERNS = [null, 'M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2', 'dots', 'M0,0 L6,6 M6,0 L0,6', 'M0,3 L6,3', 'M3,0 L3,6'];

function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) if (value !== undefined && value !== null) element.setAttribute(name, String(value));
  for (const child of children) if (child) element.append(child);
  return element;
}

/** A step of 1, 2 or 5 × 10ⁿ that splits 0…max into about four parts. */
function niceStep(max) {
  if (max <= 4) return 1;
  const rough = max / 4;
  const power = 10 ** Math.floor(Math.log10(rough));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= rough);
}

function patternDefs(prefix, count) {
  const defs = svg('defs');
  for (let i = 0; i < count; i++) {
    const kind = PATTERNS[i % PATTERNS.length];
    if (!kind) continue;
    const pattern = svg('pattern', { id: `${prefix}-p${i}`, patternUnits: 'userSpaceOnUse', width: 6, height: 6 });
    pattern.append(svg('rect', { width: 6, height: 6, class: `c${i}` }));
    pattern.append(kind === 'dots' ? svg('circle', { cx: 3, cy: 3, r: 1.3, class: 'mark-dot' }) : svg('path', { d: kind, class: 'mark' }));
    defs.append(pattern);
  }
  return defs;
}

const fillOf = (prefix, index) => (PATTERNS[index % PATTERNS.length] ? `url(#${prefix}-p${index})` : null);
// A series' class: its colour (cN) only when it has no pattern (a class's fill would override
// the pattern's fill attribute).
const areaClass = (index) => (PATTERNS[index % PATTERNS.length] ? 'area' : `c${index} area`);

/** A legend swatch: the series' fill (colour + pattern) or its line (colour + dash). */
function swatch(prefix, index, line) {
  const box = svg('svg', { width: 28, height: 14, viewBox: '0 0 28 14', 'aria-hidden': 'true', focusable: 'false', class: 'swatch' });
  if (line) box.append(svg('line', { x1: 1, y1: 7, x2: 27, y2: 7, class: `line l${index}` }));
  else box.append(svg('rect', { x: 0.5, y: 0.5, width: 27, height: 13, class: areaClass(index), fill: fillOf(prefix, index) }));
  return box;
}

/**
 * A chart of `days` (the adoption series, oldest first).
 * - `stacked`: [{label, value: (day) => number}] drawn as a stacked area (`kind: 'area'`) or
 *   stacked bars (`kind: 'bars'`);
 * - `lines`: [{label, value}] drawn over them as lines, not stacked;
 * - `summary`: a sentence of what the chart shows (the picture's accessible description).
 * Returns a <figure> that redraws itself at its width.
 */
export function chart({ title, summary, days, stacked = [], lines = [], kind = 'bars' }) {
  const prefix = uid('chart');
  const titleId = `${prefix}-title`;
  const descId = `${prefix}-desc`;
  const picture = svg('svg', { role: 'img', 'aria-labelledby': `${titleId} ${descId}`, class: 'chart', height: HEIGHT });
  const legend = h('ul', { class: 'legend' },
    stacked.map((series, index) => h('li', {}, swatch(prefix, index, false), series.label)),
    lines.map((series, index) => h('li', {}, swatch(prefix, index, true), series.label)));
  const columns = [{ label: t('chart.date'), cell: (row) => day(row.date, true) }]
    .concat([...stacked, ...lines].map((series) => ({ label: series.label, cell: (row) => number(series.value(row)), class: 'number' })));
  const data = h('details', { class: 'chart-data' }, h('summary', {}, t('chart.show_table')),
    table({ caption: title, columns, rows: days, empty: t('chart.no_data') }));
  const figure = h('figure', { class: 'chart-figure' },
    h('h3', { id: titleId }, title),
    h('p', { id: descId, class: 'hint' }, summary),
    h('div', { class: 'chart-box' }, picture),
    legend,
    data);

  let drawnWidth = 0;
  const draw = () => {
    const width = Math.max(280, Math.floor(picture.parentElement ? picture.parentElement.clientWidth : 600));
    if (width === drawnWidth) return;
    drawnWidth = width;
    render(picture, { prefix, width, days, stacked, lines, kind });
  };
  // Drawn once it is in the page (its width is known), and again when that width changes.
  const observer = new ResizeObserver(() => { if (figure.isConnected) draw(); else observer.disconnect(); });
  queueMicrotask(() => observer.observe(figure));
  return figure;
}

function render(picture, { prefix, width, days, stacked, lines, kind }) {
  picture.replaceChildren();
  picture.setAttribute('width', width);
  picture.setAttribute('viewBox', `0 0 ${width} ${HEIGHT}`);
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const n = days.length;
  const totals = days.map((row) => stacked.reduce((sum, series) => sum + (series.value(row) || 0), 0));
  const peak = Math.max(1, ...totals, ...lines.flatMap((series) => days.map((row) => series.value(row) || 0)));
  const step = niceStep(peak);
  const top = Math.ceil(peak / step) * step;
  const y = (value) => MARGIN.top + plotHeight - (value / top) * plotHeight;
  const band = n ? plotWidth / n : plotWidth;
  // Bars thinner than 4 px show neither their pattern nor their gaps: a long range at a narrow
  // width is drawn as a stacked area instead.
  if (kind === 'bars' && n > 1 && band < 4) kind = 'area';
  // Bars sit in bands; an area's points run edge to edge.
  const x = kind === 'area' && n > 1 ? (index) => MARGIN.left + (index * plotWidth) / (n - 1) : (index) => MARGIN.left + band * index + band / 2;

  picture.append(patternDefs(prefix, stacked.length));

  // The value axis: grid lines and their numbers.
  const grid = svg('g', { class: 'grid', 'aria-hidden': 'true' });
  for (let value = 0; value <= top; value += step) {
    grid.append(svg('line', { x1: MARGIN.left, x2: width - MARGIN.right, y1: y(value), y2: y(value) }));
    const label = svg('text', { x: MARGIN.left - 6, y: y(value) + 4, 'text-anchor': 'end', class: 'tick' });
    label.textContent = number(value);
    grid.append(label);
  }
  picture.append(grid);

  // The time axis: the first and last day, and some between (about one per 80 px).
  const axis = svg('g', { class: 'axis', 'aria-hidden': 'true' });
  axis.append(svg('line', { x1: MARGIN.left, x2: width - MARGIN.right, y1: y(0), y2: y(0) }));
  const labels = Math.max(2, Math.min(n, Math.floor(plotWidth / 80)));
  const shown = new Set(n ? Array.from({ length: labels }, (_, i) => Math.round((i * (n - 1)) / Math.max(1, labels - 1))) : []);
  for (const index of shown) {
    const anchor = index === 0 && n > 1 ? 'start' : index === n - 1 && n > 1 ? 'end' : 'middle';
    const at = kind === 'area' || n === 1 ? x(index) : anchor === 'start' ? MARGIN.left + band * index : anchor === 'end' ? MARGIN.left + band * (index + 1) : x(index);
    const label = svg('text', { x: at, y: HEIGHT - 10, 'text-anchor': anchor, class: 'tick' });
    label.textContent = day(days[index].date);
    axis.append(label);
  }
  picture.append(axis);

  const marks = svg('g', { 'aria-hidden': 'true' });
  if (kind === 'area' && n > 1) {
    let below = days.map(() => 0);
    stacked.forEach((series, index) => {
      const above = days.map((row, i) => below[i] + (series.value(row) || 0));
      const points = above.map((value, i) => `${x(i).toFixed(1)},${y(value).toFixed(1)}`)
        .concat(below.map((value, i) => `${x(i).toFixed(1)},${y(value).toFixed(1)}`).reverse());
      marks.append(svg('polygon', { points: points.join(' '), class: areaClass(index), fill: fillOf(prefix, index) }));
      below = above;
    });
  } else {
    const barWidth = Math.max(1, band * (n > 60 ? 0.9 : 0.72));
    days.forEach((row, i) => {
      let base = 0;
      stacked.forEach((series, index) => {
        const value = series.value(row) || 0;
        if (value <= 0) return;
        marks.append(svg('rect', {
          x: (x(i) - barWidth / 2).toFixed(2), y: y(base + value).toFixed(2), width: barWidth.toFixed(2),
          height: Math.max(0.5, y(base) - y(base + value)).toFixed(2), class: areaClass(index), fill: fillOf(prefix, index),
        }));
        base += value;
      });
    });
  }
  lines.forEach((series, index) => {
    const points = days.map((row, i) => `${x(i).toFixed(1)},${y(series.value(row) || 0).toFixed(1)}`);
    marks.append(svg('polyline', { points: points.join(' '), class: `line l${index}` }));
    if (n <= 31) days.forEach((row, i) => marks.append(svg('circle', { cx: x(i).toFixed(1), cy: y(series.value(row) || 0).toFixed(1), r: 2.5, class: `point l${index}` })));
  });
  picture.append(marks);

  // A pointer's look at one day: a title per day column (the table holds the same numbers).
  const hover = svg('g', { class: 'hover' });
  days.forEach((row, i) => {
    const left = kind === 'area' && n > 1 ? x(i) - plotWidth / (2 * (n - 1)) : MARGIN.left + band * i;
    const columnWidth = kind === 'area' && n > 1 ? plotWidth / (n - 1) : band;
    const column = svg('rect', { x: Math.max(MARGIN.left, left).toFixed(2), y: MARGIN.top, width: columnWidth.toFixed(2), height: plotHeight, class: 'hit' });
    const tip = svg('title');
    tip.textContent = [day(row.date, true), ...[...stacked, ...lines].map((series) => `${series.label}: ${number(series.value(row) || 0)}`)].join('\n');
    column.append(tip);
    hover.append(column);
  });
  picture.append(hover);
}
