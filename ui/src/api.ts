// The JSON API client: one place that knows the session rules (cookie + X-CSRF-Token on every
// change), turns every failure into an ApiError with the server's words, and tells the app
// when the session is gone. Same origin only: the pages never talk to another host.

/** A failed call: `status` 0 for a network failure or an unreadable answer. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field?: string;
  readonly retryAfterS?: number;

  constructor(status: number, code: string, message: string, field?: string, retryAfterS?: number) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field;
    this.retryAfterS = retryAfterS;
  }
}

/** 401 answers that mean "log in (again)", as src/admin/auth.c names them. */
const SESSION_GONE = new Set(['unauthorized', 'session_expired', 'setup_required']);

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface AuthStatus {
  setup_required: boolean;
  authenticated: boolean;
  tls: boolean;
  /** a second factor (TOTP) is enrolled: the login needs a code */
  totp?: boolean;
  csrf?: string;
}

export class Api {
  private csrf: string | null = null;
  /** Called once per call that finds the session gone (401), before the call rejects. */
  onSessionGone: (() => void) | null = null;

  constructor(private readonly fetchFn: FetchLike = (i, o) => fetch(i, o)) {}

  setCsrf(token: string | null): void {
    this.csrf = token;
  }

  request<T>(method: string, path: string, body?: unknown): Promise<T> {
    return this.exchange<T>(method, path,
      body === undefined ? undefined : JSON.stringify(body), 'application/json');
  }

  /** POST a file as the raw body (POST /api/restore streams it to disk, never parsed as JSON). */
  upload<T>(path: string, data: Blob): Promise<T> {
    return this.exchange<T>('POST', path, data, 'application/octet-stream');
  }

  private async exchange<T>(method: string, path: string, body: BodyInit | undefined,
    contentType: string): Promise<T> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (body !== undefined) {
      headers['Content-Type'] = contentType;
    }
    if (method !== 'GET' && this.csrf) {
      headers['X-CSRF-Token'] = this.csrf;
    }
    let resp: Response;
    try {
      resp = await this.fetchFn(path, {
        method,
        headers,
        body,
        credentials: 'same-origin',
        cache: 'no-store',
      });
    } catch (e) {
      throw new ApiError(0, 'network', `the server did not answer (${errText(e)})`);
    }
    const text = await resp.text().catch(() => '');
    let doc: unknown = null;
    if (text) {
      try {
        doc = JSON.parse(text);
      } catch {
        if (resp.ok) {
          throw new ApiError(resp.status, 'bad_response', `unreadable answer from ${path}`);
        }
      }
    }
    if (resp.ok) {
      return doc as T;
    }
    const o = (doc && typeof doc === 'object' ? doc : {}) as Record<string, unknown>;
    const code = typeof o.error === 'string' ? o.error : `http_${resp.status}`;
    const message =
      typeof o.message === 'string' && o.message ? o.message : `${path}: HTTP ${resp.status}`;
    const field = typeof o.field === 'string' ? o.field : undefined;
    const ra = Number(resp.headers.get('Retry-After'));
    const err = new ApiError(resp.status, code, message, field,
      Number.isFinite(ra) && ra > 0 ? ra : undefined);
    if (resp.status === 401 && SESSION_GONE.has(code) && path !== '/api/auth/login') {
      this.csrf = null;
      this.onSessionGone?.();
    }
    throw err;
  }

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  post<T>(path: string, body?: unknown): Promise<T> {
    return this.request<T>('POST', path, body ?? {});
  }

  async status(): Promise<AuthStatus> {
    const st = await this.get<AuthStatus>('/api/auth/status');
    this.csrf = st.authenticated && st.csrf ? st.csrf : null;
    return st;
  }

  /** totp: the authenticator's code, sent only when given (the server asks with 401
   * totp_required when a second factor is enrolled). */
  async login(password: string, totp?: string): Promise<void> {
    const r = await this.post<{ csrf: string }>('/api/auth/login', totp ? { password, totp } : { password });
    this.csrf = r.csrf;
  }

  async setup(token: string, password: string): Promise<void> {
    const r = await this.post<{ csrf?: string }>('/api/auth/setup', { token, password });
    this.csrf = r && typeof r.csrf === 'string' ? r.csrf : null;
  }

  async logout(): Promise<void> {
    try {
      await this.post('/api/auth/logout');
    } finally {
      this.csrf = null;
    }
  }
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** What a person reads for a failed call (a form's error line). */
export function describe(e: unknown): string {
  if (e instanceof ApiError) {
    if (e.status === 429) {
      return e.retryAfterS
        ? `Too many attempts: try again in ${e.retryAfterS} s.`
        : 'Too many attempts: try again in a minute.';
    }
    return e.message;
  }
  return errText(e);
}
