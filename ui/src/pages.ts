// The signed-in pages and their addresses (#/<route>), in the navigation's order; unit-tested
// (tests/ui/unit/pages.test.ts). An unknown fragment is the dashboard.
export interface PageDef { id: string; hash: string; title: string }

export const PAGES: readonly PageDef[] = [
  { id: 'dashboard', hash: '#/', title: 'Dashboard' },
  { id: 'queries', hash: '#/queries', title: 'Query log' },
  { id: 'lists', hash: '#/lists', title: 'Lists' },
  { id: 'rules', hash: '#/rules', title: 'Rules' },
  { id: 'groups', hash: '#/groups', title: 'Groups' },
  { id: 'clients', hash: '#/clients', title: 'Clients' },
  { id: 'local', hash: '#/local', title: 'Local records' },
  { id: 'settings', hash: '#/settings', title: 'Settings' },
  { id: 'security', hash: '#/security', title: 'Security' },
];

/** The page a location.hash shows ("#/rules", "#/rules?x", "" -> dashboard). */
export function pageOf(hash: string): PageDef {
  const route = hash.replace(/[?].*$/, '').replace(/\/+$/, '');
  return PAGES.find((p) => p.hash === route && p.id !== 'dashboard') ?? PAGES[0];
}
