// Accounts: search by username, display name, external id, account id or credential id (a
// prefix, any case), one page at a time (keyset: the server's cursor).
import { get, query } from '../api.js';
import { t, when } from '../i18n.js';
import { h, section, table, badge, uid, shortId } from '../ui.js';

const FIELDS = ['username', 'displayName', 'externalId', 'id', 'credentialId'];

/** An account's state in badges: disabled, password, role. */
export function accountBadges(account) {
  return [
    account.disabled ? badge(t('account.disabled'), 'bad') : null,
    account.hasPassword ? badge(t('account.has_password')) : null,
    account.role ? badge(t('role.' + account.role), 'role') : null,
  ].filter(Boolean);
}

export default async function accounts({ params, go }) {
  const q = (params.get('q') || '').slice(0, 128);
  const by = FIELDS.includes(params.get('by')) ? params.get('by') : 'username';
  // The cursors of the pages before this one ("after" of each), so Previous works too.
  const trail = (params.get('trail') || '').split(',').filter(Boolean);
  const after = params.get('after') || '';

  const inputId = uid('q');
  const selectId = uid('by');
  const input = h('input', { id: inputId, name: 'q', type: 'search', value: q, maxlength: '128', autocomplete: 'off', spellcheck: 'false', autocapitalize: 'none', 'aria-describedby': inputId + '-hint' });
  const select = h('select', { id: selectId, name: 'by' }, FIELDS.map((field) => h('option', { value: field, selected: field === by ? true : null }, t('search.by.' + field))));
  const form = h('form', {
    class: 'search', role: 'search',
    onsubmit: (event) => {
      event.preventDefault();
      go('#/accounts' + query({ q: input.value.trim().slice(0, 128), by: select.value }));
    },
  },
  h('div', { class: 'field' }, h('label', { for: selectId }, t('search.field')), select),
  h('div', { class: 'field grow' }, h('label', { for: inputId }, t('search.text')), input),
  h('button', { type: 'submit', class: 'primary inline' }, t('search.button')),
  h('p', { class: 'hint', id: inputId + '-hint' }, t('search.hint')));

  let results;
  let answer = null;
  try {
    answer = await get('/accounts' + query({ q, by, after, limit: 25 }));
  } catch (error) {
    // The list without a search text is the server's choice; say what to do instead of failing.
    if (!q && error.code === 'invalid_query') results = h('p', { class: 'empty' }, t('search.prompt'));
    else throw error;
  }
  if (answer) {
    const rows = Array.isArray(answer.accounts) ? answer.accounts : [];
    const caption = q ? t('search.results_for', { text: q, field: t('search.by.' + by) }) : t('search.all');
    const pager = h('div', { class: 'pager' },
      after ? h('a', { href: '#/accounts' + query({ q, by, after: trail[trail.length - 1] || '', trail: trail.slice(0, -1).join(',') }) }, t('paging.previous')) : null,
      answer.next ? h('a', { href: '#/accounts' + query({ q, by, after: answer.next, trail: [...trail, after].filter((c, i) => c || i > 0).join(',') }), rel: 'next' }, t('paging.next')) : null);
    results = [
      table({
        caption,
        rows,
        empty: q ? t('search.none') : t('search.none_at_all'),
        columns: [
          { label: t('account.username'), cell: (row) => h('a', { href: '#/accounts/' + encodeURIComponent(row.id) }, row.username) },
          { label: t('account.display_name'), cell: (row) => row.displayName || '—' },
          { label: t('account.external_id'), cell: (row) => row.externalId || '—' },
          { label: t('account.state'), cell: (row) => accountBadges(row) },
          { label: t('account.created'), cell: (row) => when(row.createdAt) },
          { label: t('account.last_sign_in'), cell: (row) => when(row.lastSignInAt) },
          { label: t('account.id'), cell: (row) => shortId(row.id, 8) },
        ],
      }),
      pager,
    ];
  }
  return [h('div', { class: 'page-head' }, h('h1', {}, t('accounts.title'))), section(t('search.title'), form, results)];
}
