import { describe, expect, it } from 'vitest';
import { bytes, clock, count, percent, share } from '../../../ui/src/format';

describe('count', () => {
  it('groups digits by three with a narrow no-break space', () => {
    expect(count(0)).toBe('0');
    expect(count(999)).toBe('999');
    expect(count(1000)).toBe('1\u202f000');
    expect(count(1234567)).toBe('1\u202f234\u202f567');
    expect(count(-4200)).toBe('-4\u202f200');
  });
  it('rounds and shows a dash for missing values', () => {
    expect(count(2.6)).toBe('3');
    expect(count(null)).toBe('–');
    expect(count(undefined)).toBe('–');
    expect(count(NaN)).toBe('–');
    expect(count(Infinity)).toBe('–');
  });
});

describe('percent and share', () => {
  it('formats one decimal and clamps to 0..100', () => {
    expect(percent(12.345)).toBe('12.3\u00a0%');
    expect(percent(0)).toBe('0.0\u00a0%');
    expect(percent(140)).toBe('100.0\u00a0%');
    expect(percent(-3)).toBe('0.0\u00a0%');
    expect(percent(NaN)).toBe('–');
  });
  it('never divides by zero', () => {
    expect(share(3, 0)).toBe(0);
    expect(share(1, 4)).toBe(25);
  });
});

describe('bytes', () => {
  it('uses binary units with three significant digits', () => {
    expect(bytes(512)).toBe('512\u00a0B');
    expect(bytes(1024)).toBe('1.00\u00a0KiB');
    expect(bytes(1536)).toBe('1.50\u00a0KiB');
    expect(bytes(10.5 * 1024 * 1024)).toBe('10.5\u00a0MiB');
    expect(bytes(300 * 1024 * 1024)).toBe('300\u00a0MiB');
    expect(bytes(5 * 1024 ** 5)).toBe('5120\u00a0TiB');
  });
  it('shows a dash for the API\'s "unknown" (-1)', () => {
    expect(bytes(-1)).toBe('–');
    expect(bytes(undefined)).toBe('–');
  });
});

describe('clock', () => {
  it('is HH:MM in local time', () => {
    const d = new Date(2024, 0, 2, 7, 5, 59);
    expect(clock(d.getTime())).toBe('07:05');
  });
});
