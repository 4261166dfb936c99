// The Security page's logic and the login's second factor (tests/ui/unit/security.test.ts).
// The server does the TOTP work (src/admin/auth.c: POST /api/auth/totp shows a new secret once,
// /api/auth/totp/confirm {code} enrols it, DELETE /api/auth/totp {code} removes it, a login
// sends `totp`); the page only shows what it got, checks a code's shape before sending it, and
// reads the server's answers.
import { ApiError } from './api';

/** The login answers that mean "ask for the authenticator's code" (or ask again). */
const CODE_ERRORS = new Set(['totp_required', 'invalid_totp', 'totp_replayed']);

/** Does this login failure ask for (another) code? */
export function wantsCode(e: unknown): boolean {
  return e instanceof ApiError && e.status === 401 && CODE_ERRORS.has(e.code);
}

/** The code as typed (spaces, "123 456"), reduced to its digits. */
export function cleanCode(s: string): string {
  return s.replace(/[\s-]/g, '');
}

/** A 6-digit code (the server's NX_ADMIN_TOTP_DIGITS): checked here to say so at once. */
export function codeProblem(s: string): string {
  const c = cleanCode(s);
  if (!c) return 'Enter the 6-digit code from the authenticator app.';
  if (!/^[0-9]{6}$/.test(c)) return 'The code is 6 digits.';
  return '';
}

/** The base32 secret in groups of four, as authenticator apps show it for typing in. */
export function groupSecret(secret: string): string {
  return secret.replace(/(.{4})/g, '$1 ').trim();
}

/** What an enrolment answer (201 {secret, uri, expires_in}) shows. */
export interface Enrolment { secret: string; uri: string; expires_in: number }

/** The enrolment's deadline in words ("10 minutes"). */
export function expiresText(seconds: number): string {
  const m = Math.round(seconds / 60);
  return m >= 2 ? `${m} minutes` : `${Math.max(1, Math.round(seconds))} seconds`;
}

/* ---- backup and restore ------------------------------------------------------------------- */

/** GET /api/backup's address: the query log only when asked (it can be large). */
export function backupHref(withQuerylog: boolean): string {
  return withQuerylog ? '/api/backup?querylog=true' : '/api/backup';
}

/** POST /api/restore's answer (src/admin/api_backup.c). */
export interface Restored { config: boolean; lists: boolean; tls: boolean; querylog: boolean; restart_recommended: boolean }

/** The restore's answer in words. */
export function restoredText(r: Restored): string {
  const parts = ['the configuration'];
  if (r.lists) parts.push('the lists');
  if (r.tls) parts.push('the TLS certificate');
  const what = parts.length > 1 ? `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}` : parts[0];
  let s = `Restored ${what}; the configuration is in effect.`;
  s += ' The query log was kept (a restore never replaces it while the server runs).';
  if (r.restart_recommended) s += ' Restart nxdns so the restored lists and certificate are used everywhere.';
  return s;
}
