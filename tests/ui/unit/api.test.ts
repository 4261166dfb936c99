import { describe, expect, it, vi } from 'vitest';
import { Api, ApiError, describe as describeErr, FetchLike } from '../../../ui/src/api';

interface Call { path: string; init: RequestInit }

function fake(answers: (Response | Error)[]): { fetch: FetchLike; calls: Call[] } {
  const calls: Call[] = [];
  const fetch: FetchLike = async (path, init) => {
    calls.push({ path, init: init ?? {} });
    const a = answers.shift();
    if (!a) throw new Error('no more answers');
    if (a instanceof Error) throw a;
    return a;
  };
  return { fetch, calls };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });

const header = (c: Call, name: string) => (c.init.headers as Record<string, string>)[name];

describe('Api', () => {
  it('sends the CSRF token from login on changes, not on reads', async () => {
    const f = fake([json(200, { csrf: 'tok1', expires_in: 60 }), json(200, { queries: 1 }), json(200, { logged_out: true })]);
    const api = new Api(f.fetch);
    await api.login('pw');
    expect(JSON.parse(f.calls[0].init.body as string)).toEqual({ password: 'pw' });
    await api.get('/api/stats/summary');
    expect(header(f.calls[1], 'X-CSRF-Token')).toBeUndefined();
    await api.logout();
    expect(header(f.calls[2], 'X-CSRF-Token')).toBe('tok1');
    expect(f.calls[2].init.method).toBe('POST');
  });

  it('sends the second factor only when given', async () => {
    const f = fake([json(200, { csrf: 't' }), json(200, { csrf: 't2' })]);
    const api = new Api(f.fetch);
    await api.login('pw', '123456');
    expect(JSON.parse(f.calls[0].init.body as string)).toEqual({ password: 'pw', totp: '123456' });
    await api.login('pw', '');
    expect(JSON.parse(f.calls[1].init.body as string)).toEqual({ password: 'pw' });
  });

  it('uploads a file as the raw body with the CSRF token', async () => {
    const f = fake([json(200, { csrf: 'c9' }), json(200, { config: true })]);
    const api = new Api(f.fetch);
    await api.login('pw');
    const blob = new Blob([new Uint8Array([0x1f, 0x8b, 8])]);
    expect(await api.upload('/api/restore', blob)).toEqual({ config: true });
    expect(f.calls[1].init.method).toBe('POST');
    expect(f.calls[1].init.body).toBe(blob);
    expect(header(f.calls[1], 'Content-Type')).toBe('application/octet-stream');
    expect(header(f.calls[1], 'X-CSRF-Token')).toBe('c9');
  });

  it('takes the CSRF token back from the auth status after a reload', async () => {
    const f = fake([json(200, { setup_required: false, authenticated: true, tls: false, csrf: 'c2' }), json(200, {})]);
    const api = new Api(f.fetch);
    expect((await api.status()).authenticated).toBe(true);
    await api.post('/api/x', { a: 1 });
    expect(header(f.calls[1], 'X-CSRF-Token')).toBe('c2');
  });

  it('turns an error body into an ApiError with code, message and field', async () => {
    const api = new Api(fake([json(400, { error: 'bad_request', message: 'the password must have at least 8 bytes', field: 'password' })]).fetch);
    const e = await api.setup('t', 'short').catch((x) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect(e.status).toBe(400);
    expect(e.code).toBe('bad_request');
    expect(e.field).toBe('password');
    expect(describeErr(e)).toBe('the password must have at least 8 bytes');
  });

  it('reports a failed connection as status 0, code network', async () => {
    const api = new Api(fake([new TypeError('Failed to fetch')]).fetch);
    const e = await api.get('/api/memory').catch((x) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect(e.status).toBe(0);
    expect(e.code).toBe('network');
    expect(e.message).toContain('Failed to fetch');
  });

  it('names the status when an error answer is not JSON', async () => {
    const api = new Api(fake([new Response('<html>bad gateway</html>', { status: 502 })]).fetch);
    const e = await api.get('/api/memory').catch((x) => x);
    expect(e.status).toBe(502);
    expect(e.code).toBe('http_502');
    expect(e.message).toBe('/api/memory: HTTP 502');
  });

  it('refuses a 200 answer that is not JSON', async () => {
    const api = new Api(fake([new Response('<html></html>', { status: 200 })]).fetch);
    const e = await api.get('/api/memory').catch((x) => x);
    expect(e.code).toBe('bad_response');
  });

  it('calls onSessionGone for an expired session and forgets the token', async () => {
    const f = fake([json(200, { csrf: 'tok' }), json(401, { error: 'session_expired', message: 'expired' }), json(200, {})]);
    const api = new Api(f.fetch);
    const gone = vi.fn();
    api.onSessionGone = gone;
    await api.login('pw');
    await expect(api.get('/api/memory')).rejects.toThrow('expired');
    expect(gone).toHaveBeenCalledTimes(1);
    await api.post('/api/x');
    expect(header(f.calls[2], 'X-CSRF-Token')).toBeUndefined();
  });

  it('does not treat a wrong password as a lost session', async () => {
    const api = new Api(fake([json(401, { error: 'invalid_password', message: 'wrong password', field: 'password' })]).fetch);
    const gone = vi.fn();
    api.onSessionGone = gone;
    await expect(api.login('nope')).rejects.toThrow('wrong password');
    expect(gone).not.toHaveBeenCalled();
  });

  it('says when to retry after the login limit (429 + Retry-After)', async () => {
    const api = new Api(fake([json(429, { error: 'rate_limited', message: 'slow down' }, { 'Retry-After': '42' })]).fetch);
    const e = await api.login('x').catch((x) => x);
    expect(e.retryAfterS).toBe(42);
    expect(describeErr(e)).toBe('Too many attempts: try again in 42 s.');
  });
});
