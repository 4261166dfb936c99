// The admin app: which page shows follows the server's auth state (GET /api/auth/status):
// first start -> setup, no session -> login, else the dashboard. No client-side router: a
// reload asks the server again, so the page can never disagree with it.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Api, describe } from './api';
import { Setup } from './pages/Setup';
import { Login } from './pages/Login';
import { Dashboard } from './pages/Dashboard';
import { QueryLog } from './pages/QueryLog';
import { Lists } from './pages/Lists';
import 'uplot/dist/uPlot.min.css';
import './style.css';

type View = 'loading' | 'setup' | 'login' | 'dashboard' | 'error';

const api = new Api();

function App() {
  const [view, setView] = useState<View>('loading');
  const [error, setError] = useState('');
  const [notice, setNotice] = useState('');
  // Which signed-in page shows: the address's #fragment, so a link or a reload keeps it.
  const [page, setPage] = useState(location.hash);
  useEffect(() => {
    const on = () => setPage(location.hash);
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);

  const refresh = async () => {
    try {
      const st = await api.status();
      setView(st.setup_required ? 'setup' : st.authenticated ? 'dashboard' : 'login');
    } catch (e) {
      setError(describe(e));
      setView('error');
    }
  };

  useEffect(() => {
    api.onSessionGone = () => {
      setNotice('Your session ended: log in again.');
      void refresh();
    };
    void refresh();
  }, []);

  useEffect(() => {
    const titles: Record<View, string> = {
      loading: 'nxdns',
      setup: 'Set up · nxdns',
      login: 'Log in · nxdns',
      dashboard: 'Dashboard · nxdns',
      error: 'Unreachable · nxdns',
    };
    const pageTitles: Record<string, string> = {
      '#/queries': 'Query log · nxdns',
      '#/lists': 'Lists · nxdns',
    };
    document.title = view === 'dashboard' && pageTitles[page] ? pageTitles[page] : titles[view];
  }, [view, page]);

  const logout = async () => {
    try {
      await api.logout();
    } catch {
      /* the session is dropped on our side either way */
    }
    setNotice('You are logged out.');
    await refresh();
  };

  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="bar">
        <span class="brand">nxdns</span>
        {view === 'dashboard' && (
          <nav class="nav" aria-label="Pages">
            <a href="#/" aria-current={page !== '#/queries' && page !== '#/lists' ? 'page' : undefined}>Dashboard</a>
            <a href="#/queries" aria-current={page === '#/queries' ? 'page' : undefined}>Query log</a>
            <a href="#/lists" aria-current={page === '#/lists' ? 'page' : undefined}>Lists</a>
          </nav>
        )}
        {view === 'dashboard' && (
          <button type="button" class="ghost" onClick={logout}>
            Log out
          </button>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {view === 'loading' && <p aria-live="polite">Loading…</p>}
        {view === 'error' && (
          <section class="card narrow">
            <h1>The server is unreachable</h1>
            <p role="alert">{error}</p>
            <button type="button" onClick={() => void refresh()}>
              Try again
            </button>
          </section>
        )}
        {view === 'setup' && <Setup api={api} onDone={() => { setNotice(''); void refresh(); }} />}
        {view === 'login' && (
          <Login api={api} notice={notice} onDone={() => { setNotice(''); void refresh(); }} />
        )}
        {view === 'dashboard' && page !== '#/queries' && page !== '#/lists' && <Dashboard api={api} />}
        {view === 'dashboard' && page === '#/queries' && <QueryLog api={api} />}
        {view === 'dashboard' && page === '#/lists' && <Lists api={api} />}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
