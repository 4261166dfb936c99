// First start: the one-time setup token from the server's log and the admin password.
import { useState } from 'preact/hooks';
import { Api, ApiError, describe } from '../api';
import { Field } from '../components/Field';

export const PASSWORD_MIN = 8; // src/admin/auth.c: NX_ADMIN_PASSWORD_MIN

export function Setup({ api, onDone }: { api: Api; onDone: () => void }) {
  const [token, setToken] = useState('');
  const [pw, setPw] = useState('');
  const [pw2, setPw2] = useState('');
  const [errs, setErrs] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    if (pw !== pw2) {
      setErrs({ password2: 'The two passwords differ.' });
      return;
    }
    setBusy(true);
    setErrs({});
    try {
      await api.setup(token.trim(), pw);
      onDone();
    } catch (err) {
      const f = err instanceof ApiError && err.field ? err.field : 'form';
      setErrs({ [f === 'token' || f === 'password' ? f : 'form']: describe(err) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="card narrow" aria-labelledby="setup-h">
      <h1 id="setup-h">Set up nxdns</h1>
      <p>
        This server has no admin password yet. Its log shows a one-time setup token (the line
        “admin setup token: …”); paste it here and choose the password.
      </p>
      <form onSubmit={submit} noValidate={false}>
        <Field id="token" label="Setup token" value={token} onInput={setToken}
          autocomplete="off" autofocus error={errs.token} />
        <Field id="password" label="New password" type="password" value={pw} onInput={setPw}
          autocomplete="new-password" minLength={PASSWORD_MIN}
          hint={`At least ${PASSWORD_MIN} characters.`} error={errs.password} />
        <Field id="password2" label="Repeat the password" type="password" value={pw2}
          onInput={setPw2} autocomplete="new-password" minLength={PASSWORD_MIN}
          error={errs.password2} />
        {errs.form && <p class="error" role="alert">{errs.form}</p>}
        <button type="submit" disabled={busy}>{busy ? 'Saving…' : 'Set password'}</button>
      </form>
    </section>
  );
}
