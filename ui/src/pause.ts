// The pause control's logic (tests/ui/unit/pause.test.ts): the choices, and the remaining time
// in words. The server keeps the pause (POST /api/filter/pause {seconds} | {resume: true}) and
// answers {paused, until_ms}; the page only counts down to until_ms and asks again at the end.

/** The longest pause the API takes (src/admin/api_filter.c PAUSE_MAX_S): "until resumed". */
export const PAUSE_MAX_S = 30 * 86400;

export const PAUSE_CHOICES = [
  { label: '5 min', seconds: 300 },
  { label: '1 h', seconds: 3600 },
  { label: 'Until resumed', seconds: PAUSE_MAX_S },
] as const;

export interface PauseState { paused: boolean; until_ms: number }

/**
 * The remaining time: "4:59" under an hour, "1 h 05 min" under a day, else "until resumed"
 * (the API has no unbounded pause: the page's "until resumed" is its 30-day maximum, and no
 * choice here lasts between a day and that). "" when not paused or over.
 */
export function remainingText(s: PauseState, nowMs: number): string {
  if (!s.paused) return '';
  const left = Math.ceil((s.until_ms - nowMs) / 1000);
  if (left <= 0) return '';
  if (left > 86400) return 'until resumed';
  if (left < 3600) return `${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')} left`;
  const m = Math.floor(left / 60);
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min left`;
}

/** Is the pause over by the page's clock (then it asks the server again)? */
export function pauseOver(s: PauseState, nowMs: number): boolean {
  return s.paused && s.until_ms <= nowMs;
}
