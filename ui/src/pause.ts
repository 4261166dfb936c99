// The pause control's logic (tests/ui/unit/pause.test.ts): the choices, the request each one
// sends, and the remaining time in words. The server keeps the pause (POST /api/filter/pause
// {seconds} | {until_resumed: true} | {resume: true}) and answers {paused, until_ms,
// until_resumed}; the page counts down to until_ms (null for a pause with no end) and asks
// again at the end.

export type PauseBody = { seconds: number } | { until_resumed: true } | { resume: true };

export const PAUSE_CHOICES: readonly { label: string; body: PauseBody }[] = [
  { label: '5 min', body: { seconds: 300 } },
  { label: '1 h', body: { seconds: 3600 } },
  { label: 'Until resumed', body: { until_resumed: true } },
];

export interface PauseState {
  paused: boolean;
  /** When the pause ends (ms); null (or absent) for a pause until resumed, 0 when not paused */
  until_ms: number | null;
  until_resumed?: boolean;
}

/** Paused with no end (an older server without until_resumed never says so). */
export function untilResumed(s: PauseState): boolean {
  return s.paused && (s.until_resumed === true || s.until_ms === null);
}

/**
 * The remaining time: "until resumed" for a pause with no end, "4:59 left" under an hour,
 * "1 h 05 min left" under a day, "2 d 3 h left" beyond. "" when not paused or over.
 */
export function remainingText(s: PauseState, nowMs: number): string {
  if (!s.paused) return '';
  if (untilResumed(s)) return 'until resumed';
  const left = Math.ceil(((s.until_ms ?? 0) - nowMs) / 1000);
  if (left <= 0) return '';
  if (left < 3600) return `${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')} left`;
  const m = Math.floor(left / 60);
  if (left < 86400) return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min left`;
  const h = Math.floor(m / 60);
  return `${Math.floor(h / 24)} d ${h % 24} h left`;
}

/** Is the pause over by the page's clock (then it asks the server again)? Never for one
 * with no end. */
export function pauseOver(s: PauseState, nowMs: number): boolean {
  return s.paused && !untilResumed(s) && (s.until_ms ?? 0) <= nowMs;
}

/** The accessible name of a choice's button. */
export function choiceName(label: string): string {
  return `Pause filtering ${label === 'Until resumed' ? 'until resumed' : `for ${label}`}`;
}
