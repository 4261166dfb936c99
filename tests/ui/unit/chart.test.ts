import { describe, expect, it } from 'vitest';
import { columnTotals, dayWindow, historyColumns, topOwners } from '../../../ui/src/chart';

describe('historyColumns', () => {
  it('turns points into uPlot columns in seconds, sorted by time', () => {
    const c = historyColumns({
      from: 0, to: 0, step: 1800,
      points: [
        { t: 3_600_000, queries: 7, blocked: 2 },
        { t: 1_800_000, queries: 5, blocked: 1 },
      ],
    });
    expect(c).toEqual([[1800, 3600], [5, 7], [1, 2]]);
  });
  it('treats missing or malformed counts as zero and drops points without a time', () => {
    const c = historyColumns({
      from: 0, to: 0, step: 60,
      points: [
        { t: 60_000, queries: 3 } as never,
        { t: 120_000, queries: 'x', blocked: null } as never,
        { queries: 9, blocked: 9 } as never,
        null as never,
      ],
    });
    expect(c).toEqual([[60, 120], [3, 0], [0, 0]]);
  });
  it('sums duplicate buckets and caps blocked at queries', () => {
    const c = historyColumns({
      from: 0, to: 0, step: 60,
      points: [
        { t: 60_000, queries: 2, blocked: 1 },
        { t: 60_000, queries: 1, blocked: 5 },
      ],
    });
    expect(c).toEqual([[60], [3], [3]]);
  });
  it('gives empty columns for no data', () => {
    expect(historyColumns(null)).toEqual([[], [], []]);
    expect(historyColumns({ from: 0, to: 0, step: 60, points: [] })).toEqual([[], [], []]);
  });
});

describe('columnTotals', () => {
  it('adds the series and finds the peak', () => {
    expect(columnTotals([[1, 2, 3], [4, 10, 1], [1, 2, 0]])).toEqual({ queries: 15, blocked: 3, peak: 10 });
  });
});

describe('dayWindow', () => {
  it('ends at the end of the current bucket and spans 24 h', () => {
    const step = 1800;
    const now = Date.UTC(2024, 5, 1, 10, 7, 0);
    const w = dayWindow(now, step);
    expect(w.to).toBe(Date.UTC(2024, 5, 1, 10, 30, 0));
    expect(w.to - w.from).toBe(86_400_000);
    expect(w.to % (step * 1000)).toBe(0);
  });
  it('moves to the next bucket exactly at a boundary', () => {
    const now = Date.UTC(2024, 5, 1, 10, 30, 0);
    expect(dayWindow(now, 1800).to).toBe(Date.UTC(2024, 5, 1, 11, 0, 0));
  });
});

describe('topOwners', () => {
  const o = (owner: string, bytes: number) => ({ owner, bytes, count: 1, help: owner });
  it('drops empty owners and sorts largest first', () => {
    expect(topOwners([o('a', 10), o('b', 0), o('c', 30)], 5).map((x) => x.owner)).toEqual(['c', 'a']);
  });
  it('folds the rest into one row that keeps the total', () => {
    const r = topOwners([o('a', 1), o('b', 2), o('c', 3), o('d', 4)], 2);
    expect(r.map((x) => x.owner)).toEqual(['d', 'c', '2 others']);
    expect(r[2].bytes).toBe(3);
    expect(r[2].count).toBe(2);
    expect(r.reduce((s, x) => s + x.bytes, 0)).toBe(10);
  });
});
