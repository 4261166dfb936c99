import { describe, expect, it } from 'vitest';
import { PAUSE_CHOICES, choiceName, pauseOver, remainingText, untilResumed } from '../../../ui/src/pause';

const NOW = 1_800_000_000_000;

describe('pause', () => {
  it('offers 5 min, 1 h and until resumed, the last as a pause with no end', () => {
    expect(PAUSE_CHOICES.map((c) => c.body)).toEqual([{ seconds: 300 }, { seconds: 3600 }, { until_resumed: true }]);
    expect(PAUSE_CHOICES.map((c) => choiceName(c.label))).toEqual([
      'Pause filtering for 5 min', 'Pause filtering for 1 h', 'Pause filtering until resumed',
    ]);
  });

  it('counts down minutes and seconds under an hour', () => {
    expect(remainingText({ paused: true, until_ms: NOW + 300_000 }, NOW)).toBe('5:00 left');
    expect(remainingText({ paused: true, until_ms: NOW + 298_500 }, NOW)).toBe('4:59 left'); // whole seconds, rounded up
    expect(remainingText({ paused: true, until_ms: NOW + 9_000 }, NOW)).toBe('0:09 left');
  });

  it('says hours and minutes up to a day, days and hours beyond', () => {
    expect(remainingText({ paused: true, until_ms: NOW + 3_600_000 }, NOW)).toBe('1 h 00 min left');
    expect(remainingText({ paused: true, until_ms: NOW + 5_460_000 }, NOW)).toBe('1 h 31 min left');
    // a long timed pause (from the API) is not mistaken for one until resumed
    expect(remainingText({ paused: true, until_ms: NOW + (2 * 86400 + 3 * 3600) * 1000 }, NOW)).toBe('2 d 3 h left');
  });

  it('says "until resumed" for a pause with no end, which is never over', () => {
    const st = { paused: true, until_ms: null, until_resumed: true };
    expect(untilResumed(st)).toBe(true);
    expect(remainingText(st, NOW)).toBe('until resumed');
    expect(pauseOver(st, NOW)).toBe(false);
    expect(untilResumed({ paused: true, until_ms: null })).toBe(true);
    expect(untilResumed({ paused: true, until_ms: NOW + 1000, until_resumed: false })).toBe(false);
    expect(untilResumed({ paused: false, until_ms: 0, until_resumed: false })).toBe(false);
  });

  it('is empty when not paused or over, and over by the page\'s clock', () => {
    expect(remainingText({ paused: false, until_ms: 0 }, NOW)).toBe('');
    expect(remainingText({ paused: true, until_ms: NOW - 1 }, NOW)).toBe('');
    expect(pauseOver({ paused: true, until_ms: NOW }, NOW)).toBe(true);
    expect(pauseOver({ paused: true, until_ms: NOW + 1 }, NOW)).toBe(false);
    expect(pauseOver({ paused: false, until_ms: 0 }, NOW)).toBe(false);
  });
});
