// The operator's console: sign-in, the first admin's bootstrap, and the pages, one per address
// (#/overview, #/accounts, #/accounts/<id>, #/audit, #/integrations, #/policy, #/admins, and
// #/tenants for a server operator).
// Each page is a module in pages/ that returns its content; this file decides which one shows.
import * as api from './api.js';
import { loadLanguage, t, translate } from './i18n.js';
import { say, fail, busy, h } from './ui.js';

const $ = (id) => document.getElementById(id);
const PAGES = {
  overview: () => import('./pages/overview.js'),
  accounts: () => import('./pages/accounts.js'),
  account: () => import('./pages/account.js'),
  audit: () => import('./pages/audit.js'),
  integrations: () => import('./pages/integrations.js'),
  policy: () => import('./pages/policy.js'),
  admins: () => import('./pages/admins.js'),
  tenants: () => import('./pages/tenants.js'),
};

let admin = null;          // {id, username, displayName, role} once signed in
let bootstrapToken = null; // the token of a #bootstrap= link, kept out of the address bar
let generation = 0;        // the latest route(): an older page that finishes late is dropped
let notice = null;         // a success to say once the next page shows (after a go())

// MARK: views

function show(name) {
  for (const view of ['loading', 'signin', 'bootstrap', 'page']) $('view-' + view).hidden = view !== name;
  const signedIn = name === 'page';
  $('nav').hidden = !signedIn;
  $('who').hidden = !signedIn;
}

function focusHeading(root) {
  const heading = root.querySelector('h1');
  if (heading) { heading.setAttribute('tabindex', '-1'); heading.focus({ preventScroll: false }); }
}

function showAdmin() {
  $('who-name').textContent = admin.displayName && admin.displayName !== admin.username ? `${admin.displayName} (${admin.username})` : admin.username;
  $('who-role').textContent = t('role.' + admin.role);
  // Tenants are a server operator's (the server answers 403 operator_role_required to others).
  $('nav-tenants').hidden = admin.role !== 'operator';
}

/** `#/accounts/<id>?q=…` → {page, id, params}. */
function parse(hash) {
  const [path, search = ''] = hash.replace(/^#\/?/, '').split('?');
  const parts = path.split('/').filter(Boolean).map((part) => { try { return decodeURIComponent(part); } catch { return part; } });
  let page = parts[0] || 'overview';
  let id = null;
  if (page === 'accounts' && parts[1]) { page = 'account'; id = parts[1]; }
  if (!PAGES[page]) page = 'overview';
  return { page, id, params: new URLSearchParams(search) };
}

/** Goes to `hash` (a hashchange renders it), then says `success` there. */
function go(hash, success = null) {
  notice = success;
  if (location.hash === hash) route();
  else location.hash = hash;
}

async function route({ focus = true } = {}) {
  const hash = location.hash;
  if (hash.startsWith('#bootstrap=')) {
    bootstrapToken = hash.slice('#bootstrap='.length);
    // The token leaves the address bar (and history) before anything else happens.
    history.replaceState(null, '', location.pathname + location.search + '#bootstrap');
  }
  if (bootstrapToken && (location.hash === '#bootstrap' || !admin)) {
    show('bootstrap');
    $('bootstrap-username').focus();
    return;
  }
  if (!admin) { showSignIn(); return; }

  const { page, id, params } = parse(hash || '#/overview');
  for (const link of $('nav').querySelectorAll('a')) {
    const current = link.dataset.page === page || (page === 'account' && link.dataset.page === 'accounts');
    if (current) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
  }
  const mine = ++generation;
  const container = $('view-page');
  show('page');
  container.setAttribute('aria-busy', 'true');
  const loading = h('p', { class: 'loading', role: 'status' }, t('app.loading'));
  if (!container.firstChild) container.append(loading);
  else container.prepend(loading);
  let content;
  try {
    const module = await PAGES[page]();
    content = await module.default({ id, params, admin, canChange: admin.role !== 'viewer', go, reload: () => route({ focus: false }) });
  } catch (error) {
    if (mine !== generation) return;
    if (error && error.code === 'admin_required') return; // signedOut() took over
    content = h('section', { class: 'card' }, h('h1', {}, t('app.page_failed')), h('p', { class: 'message error', role: 'alert' }, error && error.name === 'ConsoleError' ? error.message : t('error.unknown')));
    if (!(error && error.name === 'ConsoleError')) console.error(error);
  }
  if (mine !== generation) return;
  container.replaceChildren(...[].concat(content));
  container.removeAttribute('aria-busy');
  document.title = `${container.querySelector('h1')?.textContent ?? ''} · passkeyd ${t('app.console')}`;
  if (focus) focusHeading(container);
  if (notice) { say(notice, 'success'); notice = null; }
}

// MARK: sign-in, bootstrap, sign-out

function showSignIn() {
  show('signin');
  document.title = `${t('signin.title')} · passkeyd`;
}

async function entered(session, notice) {
  admin = session.admin;
  showAdmin();
  if (!location.hash.startsWith('#/')) history.replaceState(null, '', '#/overview');
  await route();
  if (notice) say(notice, 'success');
}

async function signIn() {
  say('');
  await busy($('signin-button'), async () => {
    const session = await api.signIn();
    await entered(session, t('status.signed_in', { username: session.admin.username }));
  });
}

async function createFirstAdmin(event) {
  event.preventDefault();
  say('');
  const username = $('bootstrap-username').value.trim();
  if (!username) { say(t('common.required', { field: t('field.username') }), 'error'); $('bootstrap-username').focus(); return; }
  await busy($('bootstrap-form'), async () => {
    const session = await api.bootstrap(bootstrapToken, username, $('bootstrap-display-name').value.trim());
    bootstrapToken = null;
    history.replaceState(null, '', '#/overview');
    await entered(session, t('status.bootstrapped', { username: session.admin.username }));
  });
}

async function signOut() {
  try { await api.signOut(); } catch { /* signed out either way */ }
  admin = null;
  generation++;
  $('view-page').replaceChildren();
  showSignIn();
  say(t('status.signed_out'), 'success');
  $('signin-button').focus();
}

/** The session ended (idle timeout, revoked): back to the sign-in screen, the address kept. */
function signedOut() {
  if (!admin) return;
  admin = null;
  generation++;
  api.forget();
  $('view-page').replaceChildren();
  showSignIn();
  say(t('status.session_ended'), 'error');
}

// MARK: start

api.configure({
  onStepUp: () => say(t('status.step_up'), 'info'),
  onSignedOut: signedOut,
});
$('signin-button').addEventListener('click', signIn);
$('bootstrap-form').addEventListener('submit', createFirstAdmin);
$('signout-button').addEventListener('click', signOut);
window.addEventListener('hashchange', () => { say(''); route(); });

await loadLanguage();
translate(document);
if (!api.webAuthnAvailable()) say(t('app.no_webauthn'), 'error');
try {
  const session = location.hash.startsWith('#bootstrap=') ? null : await api.session();
  if (session) { admin = session.admin; showAdmin(); }
  route({ focus: false });
} catch (error) {
  show('signin');
  fail(error);
}
