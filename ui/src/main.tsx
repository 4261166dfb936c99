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
import { Rules } from './pages/Rules';
import { Groups } from './pages/Groups';
import { Clients } from './pages/Clients';
import { LocalRecords } from './pages/LocalRecords';
import { Settings } from './pages/Settings';
import { Security } from './pages/Security';
import { PauseControl } from './components/Pause';
import { SyncBanner } from './components/SyncBanner';
import { pageOf, PAGES } from './pages';
import 'uplot/dist/uPlot.min.css';
import './style.css';

type View = 'loading' | 'setup' | 'login' | 'dashboard' | 'error';

const api = new Api();

// The signed-in page for a route id (pages.ts maps the address's #fragment to one).
function Page({ id }: { id: string }) {
  switch (id) {
    case 'queries': return <QueryLog api={api} />;
    case 'lists': return <Lists api={api} />;
    case 'rules': return <Rules api={api} />;
    case 'groups': return <Groups api={api} />;
    case 'clients': return <Clients api={api} />;
    case 'local': return <LocalRecords api={api} />;
    case 'settings': return <Settings api={api} />;
    case 'security': return <Security api={api} />;
    default: return <Dashboard api={api} />;
  }
}

function App() {
  const [view, setView] = useState<View>('loading');
  const [error, setError] = useState('');
  const [notice, setNotice] = useState('');
  const [totp, setTotp] = useState(false);
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
      setTotp(!!st.totp);
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
    document.title = view === 'dashboard' ? `${pageOf(page).title} · nxdns` : titles[view];
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
            {PAGES.map((p) => (
              <a key={p.hash} href={p.hash} aria-current={pageOf(page).id === p.id ? 'page' : undefined}>{p.title}</a>
            ))}
          </nav>
        )}
        {view === 'dashboard' && (
          <button type="button" class="ghost" onClick={logout}>
            Log out
          </button>
        )}
      </header>
      {view === 'dashboard' && <SyncBanner api={api} />}
      {view === 'dashboard' && <PauseControl api={api} />}
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
          <Login api={api} notice={notice} totp={totp} onDone={() => { setNotice(''); void refresh(); }} />
        )}
        {view === 'dashboard' && <Page id={pageOf(page).id} />}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
