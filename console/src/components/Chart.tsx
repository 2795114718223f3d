import { useId, useState } from 'react';
import './charts.css';

export interface Datum {
  label: string;
  value: number;
}

/**
 * A bar chart drawn as SVG, with its data as a table one button away: the SVG is `role="img"` named by its title and
 * described by a summary (the total, the largest bar), and the table says every value in words. Drawn here rather
 * than by a chart library: a few rects and labels, no inline styles (the console's Content-Security-Policy refuses
 * them, and most chart libraries set them), colours from the stylesheet's variables, so the dark palette follows.
 *
 * `vertical` (default): one column per datum, labels under every `labelEvery`-th column; `horizontal`: one row per datum
 * with its label and value beside the bar (few categories).
 */
export function BarChart({
  title,
  data,
  format = (v) => String(v),
  unit,
  orientation = 'vertical',
  labelEvery = 1,
  note,
}: {
  title: string;
  data: Datum[];
  format?: (value: number) => string;
  /** What a value counts, for the summary and the table's heading ("conversations"). */
  unit: string;
  orientation?: 'vertical' | 'horizontal';
  labelEvery?: number;
  /** A line under the chart (what the data leaves out). */
  note?: string;
}) {
  const id = useId();
  const [table, setTable] = useState(false);
  const max = Math.max(0, ...data.map((d) => d.value));
  const top = data.reduce<Datum | null>((best, d) => (best === null || d.value > best.value ? d : best), null);
  const total = data.reduce((sum, d) => sum + d.value, 0);
  // `unit` is plural ("conversations"); one of it drops the s.
  const counted = (n: number) => `${format(n)} ${n === 1 ? unit.replace(/s$/, '') : unit}`;
  const summary = !data.length
    ? `${title}: no data.`
    : max === 0
      ? `${title}: no ${unit} in this range.`
      : `${title}: ${data.length} bars; ${counted(total)} in all; the largest, ${top!.label}, with ${format(top!.value)}.`;
  return (
    <figure className="chart card" aria-labelledby={`${id}-title`}>
      <figcaption className="chart-head">
        <h2 id={`${id}-title`} className="card-title">
          {title}
        </h2>
        <button type="button" className="button small" aria-expanded={table} aria-controls={`${id}-table`} onClick={() => setTable((t) => !t)}>
          {table ? 'Hide the table' : 'Show as a table'}
        </button>
      </figcaption>
      {orientation === 'vertical' ? <Columns data={data} max={max} labelEvery={labelEvery} summary={summary} /> : <Rows data={data} max={max} format={format} summary={summary} />}
      {note ? <p className="hint">{note}</p> : null}
      <div id={`${id}-table`} hidden={!table}>
        {table ? (
          <table className="table chart-table">
            <caption className="visually-hidden">{title}</caption>
            <thead>
              <tr>
                <th scope="col">{orientation === 'vertical' ? 'When' : 'What'}</th>
                <th scope="col">{unit[0].toUpperCase() + unit.slice(1)}</th>
              </tr>
            </thead>
            <tbody>
              {data.map((d) => (
                <tr key={d.label}>
                  <th scope="row">{d.label}</th>
                  <td>{format(d.value)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
      </div>
    </figure>
  );
}

const W = 640;
const H = 200;
const PAD = { top: 12, right: 8, bottom: 28, left: 40 };

function Columns({ data, max, labelEvery, summary }: { data: Datum[]; max: number; labelEvery: number; summary: string }) {
  const innerW = W - PAD.left - PAD.right;
  const innerH = H - PAD.top - PAD.bottom;
  const step = data.length ? innerW / data.length : innerW;
  const bar = Math.max(1, step * 0.75);
  const y = (v: number) => PAD.top + innerH - (max ? (v / max) * innerH : 0);
  return (
    <svg className="chart-svg" viewBox={`0 0 ${W} ${H}`} role="img" aria-label={summary} preserveAspectRatio="xMidYMid meet">
      <line className="chart-axis" x1={PAD.left} x2={W - PAD.right} y1={PAD.top + innerH} y2={PAD.top + innerH} />
      <text className="chart-tick" x={PAD.left - 6} y={PAD.top + 4} textAnchor="end">
        {max}
      </text>
      <text className="chart-tick" x={PAD.left - 6} y={PAD.top + innerH} textAnchor="end">
        0
      </text>
      {data.map((d, i) => (
        <g key={d.label}>
          <rect className="chart-bar" x={PAD.left + i * step + (step - bar) / 2} y={y(d.value)} width={bar} height={PAD.top + innerH - y(d.value)}>
            <title>{`${d.label}: ${d.value}`}</title>
          </rect>
          {i % labelEvery === 0 ? (
            <text className="chart-tick" x={PAD.left + i * step + step / 2} y={H - 10} textAnchor="middle">
              {d.label}
            </text>
          ) : null}
        </g>
      ))}
    </svg>
  );
}

function Rows({ data, max, format, summary }: { data: Datum[]; max: number; format: (v: number) => string; summary: string }) {
  const row = 28;
  const labelW = 200;
  const valueW = 70;
  const h = Math.max(row, data.length * row) + 8;
  const innerW = W - labelW - valueW;
  return (
    <svg className="chart-svg" viewBox={`0 0 ${W} ${h}`} role="img" aria-label={summary} preserveAspectRatio="xMidYMid meet">
      {data.map((d, i) => {
        const width = max ? (d.value / max) * innerW : 0;
        return (
          <g key={d.label}>
            <text className="chart-label" x={labelW - 8} y={i * row + 19} textAnchor="end">
              {d.label}
            </text>
            <rect className="chart-bar" x={labelW} y={i * row + 6} width={Math.max(width, d.value ? 2 : 0)} height={row - 10}>
              <title>{`${d.label}: ${format(d.value)}`}</title>
            </rect>
            <text className="chart-label" x={labelW + width + 6} y={i * row + 19}>
              {format(d.value)}
            </text>
          </g>
        );
      })}
    </svg>
  );
}
