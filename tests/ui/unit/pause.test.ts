import { describe, expect, it } from 'vitest';
import { PAUSE_CHOICES, PAUSE_MAX_S, pauseOver, remainingText } from '../../../ui/src/pause';

const NOW = 1_800_000_000_000;

describe('pause', () => {
  it('offers 5 min, 1 h and until resumed (the API\'s longest pause)', () => {
    expect(PAUSE_CHOICES.map((c) => c.seconds)).toEqual([300, 3600, PAUSE_MAX_S]);
    expect(PAUSE_MAX_S).toBe(2_592_000);
  });

  it('counts down minutes and seconds under an hour', () => {
    expect(remainingText({ paused: true, until_ms: NOW + 300_000 }, NOW)).toBe('5:00 left');
    expect(remainingText({ paused: true, until_ms: NOW + 298_500 }, NOW)).toBe('4:59 left'); // whole seconds, rounded up
    expect(remainingText({ paused: true, until_ms: NOW + 9_000 }, NOW)).toBe('0:09 left');
  });

  it('says hours and minutes up to a day, and "until resumed" beyond', () => {
    expect(remainingText({ paused: true, until_ms: NOW + 3_600_000 }, NOW)).toBe('1 h 00 min left');
    expect(remainingText({ paused: true, until_ms: NOW + 5_460_000 }, NOW)).toBe('1 h 31 min left');
    expect(remainingText({ paused: true, until_ms: NOW + PAUSE_MAX_S * 1000 }, NOW)).toBe('until resumed');
  });

  it('is empty when not paused or over, and over by the page\'s clock', () => {
    expect(remainingText({ paused: false, until_ms: 0 }, NOW)).toBe('');
    expect(remainingText({ paused: true, until_ms: NOW - 1 }, NOW)).toBe('');
    expect(pauseOver({ paused: true, until_ms: NOW }, NOW)).toBe(true);
    expect(pauseOver({ paused: true, until_ms: NOW + 1 }, NOW)).toBe(false);
    expect(pauseOver({ paused: false, until_ms: 0 }, NOW)).toBe(false);
  });
});
