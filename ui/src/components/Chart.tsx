// Queries vs blocked per interval (uPlot), with a text alternative for screen readers.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { Columns, columnTotals } from '../chart';
import { clock, count } from '../format';

const QUERIES = '#2563c9';
const BLOCKED = '#c2262e';
// Query counts are integers: no 2.5 tick that would print as "3".
const INTEGER_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5,
  2e5, 5e5, 1e6, 2e6, 5e6, 1e7];

export function HistoryChart({ data, stepS }: { data: Columns; stepS: number }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const el = box.current!;
    const width = () => Math.max(240, el.clientWidth);
    const opts: uPlot.Options = {
      width: width(),
      height: 220,
      cursor: { drag: { x: false, y: false } },
      legend: { show: true },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      axes: [
        { values: (_u, ticks) => ticks.map((t) => clock(t * 1000)), stroke: 'currentColor' },
        { values: (_u, ticks) => ticks.map((t) => count(t)), stroke: 'currentColor', size: 56,
          incrs: INTEGER_STEPS },
      ],
      series: [
        { label: 'Time', value: (_u, v) => (v == null ? '–' : clock(v * 1000)) },
        { label: 'Queries', stroke: QUERIES, fill: 'rgba(37,99,201,0.15)', width: 2,
          value: (_u, v) => count(v) },
        { label: 'Blocked', stroke: BLOCKED, fill: 'rgba(194,38,46,0.18)', width: 2,
          value: (_u, v) => count(v) },
      ],
    };
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: width(), height: 220 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  const t = columnTotals(data);
  return (
    <figure class="chart">
      <div ref={box} aria-hidden="true" />
      <figcaption>
        Queries and blocked queries per {stepS / 60} minutes over the last 24 hours:
        {' '}{count(t.queries)} queries, {count(t.blocked)} blocked, at most {count(t.peak)} in
        one interval.
      </figcaption>
    </figure>
  );
}
