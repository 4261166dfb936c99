import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../ui/src/api';
import {
  backupHref, cleanCode, codeProblem, expiresText, groupSecret, restoredText, wantsCode,
} from '../../../ui/src/security';

describe('second factor', () => {
  it('asks for a code on the login answers that need one, not on a wrong password', () => {
    expect(wantsCode(new ApiError(401, 'totp_required', 'm', 'totp'))).toBe(true);
    expect(wantsCode(new ApiError(401, 'invalid_totp', 'm', 'totp'))).toBe(true);
    expect(wantsCode(new ApiError(401, 'totp_replayed', 'm', 'totp'))).toBe(true);
    expect(wantsCode(new ApiError(401, 'unauthorized', 'wrong password'))).toBe(false);
    expect(wantsCode(new ApiError(429, 'rate_limited', 'slow down'))).toBe(false);
    expect(wantsCode(new Error('x'))).toBe(false);
  });

  it('takes a code with spaces and says what is wrong with one that is not 6 digits', () => {
    expect(cleanCode(' 123 456 ')).toBe('123456');
    expect(codeProblem('123 456')).toBe('');
    expect(codeProblem('')).toMatch(/Enter the 6-digit code/);
    expect(codeProblem('12345')).toBe('The code is 6 digits.');
    expect(codeProblem('12345a')).toBe('The code is 6 digits.');
    expect(codeProblem('1234567')).toBe('The code is 6 digits.');
  });

  it('groups the secret by four for typing and says the deadline', () => {
    expect(groupSecret('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGH')).toBe(
      'ABCD EFGH IJKL MNOP QRST UVWX YZ23 4567 ABCD EFGH');
    expect(groupSecret('ABCDEF')).toBe('ABCD EF');
    expect(expiresText(600)).toBe('10 minutes');
    expect(expiresText(45)).toBe('45 seconds');
  });
});

describe('backup and restore', () => {
  it('asks for the query log only when wanted', () => {
    expect(backupHref(false)).toBe('/api/backup');
    expect(backupHref(true)).toBe('/api/backup?querylog=true');
  });

  it('says what the restore put back and when a restart is needed', () => {
    const only = restoredText({ config: true, lists: false, tls: false, querylog: false, restart_recommended: false });
    expect(only).toMatch(/^Restored the configuration;/);
    expect(only).not.toMatch(/Restart/);
    const all = restoredText({ config: true, lists: true, tls: true, querylog: false, restart_recommended: true });
    expect(all).toMatch(/^Restored the configuration, the lists and the TLS certificate;/);
    expect(all).toMatch(/Restart nxdns/);
  });
});
