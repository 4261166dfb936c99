// Number and time formatting for the pages: pure functions, unit-tested (tests/ui/unit).

const GROUP = /\B(?=(\d{3})+(?!\d))/g;

/** An integer count with thin-space digit groups ("1 234 567"); "–" for a missing value. */
export function count(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) {
    return '–';
  }
  const sign = n < 0 ? '-' : '';
  return sign + Math.round(Math.abs(n)).toString().replace(GROUP, '\u202f');
}

/** A share in percent with one decimal ("12.5 %"); the API already sends percent values. */
export function percent(p: number | null | undefined): string {
  if (p === null || p === undefined || !Number.isFinite(p)) {
    return '–';
  }
  const clamped = Math.min(100, Math.max(0, p));
  return `${clamped.toFixed(1)}\u00a0%`;
}

/** part / whole as a percent value, 0 when whole is 0 (no NaN on an empty day). */
export function share(part: number, whole: number): number {
  return whole > 0 ? (100 * part) / whole : 0;
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** Bytes in binary units, 3 significant digits ("1.50 MiB", "512 B"); "–" when unknown (< 0). */
export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n) || n < 0) {
    return '–';
  }
  let v = n;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  if (u === 0) {
    return `${v}\u00a0B`;
  }
  const digits = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  return `${v.toFixed(digits)}\u00a0${UNITS[u]}`;
}

/** "HH:MM" of an epoch-ms instant in the browser's time zone (chart axis, tooltips). */
export function clock(ms: number): string {
  const d = new Date(ms);
  const hh = String(d.getHours()).padStart(2, '0');
  const mm = String(d.getMinutes()).padStart(2, '0');
  return `${hh}:${mm}`;
}

/**
 * A client as a person reads it: its name (from the config's clients or a reverse lookup) with
 * the address beside it, or the address alone. Rows from servers without `client_name` (or
 * with null or "") get the address: both shapes of the API read the same way.
 */
export function clientLabel(address: string, name?: string | null): { main: string; aside: string } {
  const n = typeof name === 'string' ? name.trim() : '';
  return n && n !== address ? { main: n, aside: address } : { main: address, aside: '' };
}
