// Audit: the log, newest first, filtered by account, kind, address and time; "Older" pages by
// the last line's id (keyset); the same filter exported as CSV.
import { get, query } from '../api.js';
import { t, has, when } from '../i18n.js';
import { h, section, table, shortId, uid } from '../ui.js';

/** The kinds of line passkeyd writes (a datalist: a kind not listed can still be typed). */
export const KINDS = ['sign_up', 'sign_in', 'sign_in_failed', 'registration_failed', 'counter_anomaly', 'passkey_added', 'passkey_renamed',
  'passkey_replaced', 'passkey_deleted', 'session_revoked', 'password_changed', 'password_removed', 'recovery_codes_created', 'recovery_failed',
  'recovery_sign_in', 'admin_recovery_link', 'admin_account_disabled', 'admin_account_enabled', 'admin_passkey_revoked', 'admin_sessions_revoked',
  'import', 'account_created', 'admin_passkey_renamed', 'admin_registration_token', 'api_key_created', 'api_key_revoked', 'api_key_used',
  'oidc_authorized', 'oidc_token_issued', 'oidc_grant_reused', 'oauth_client_added', 'oauth_client_removed', 'passkey_prf_salt_rotated',
  'admin_console_sign_in', 'admin_console_refused', 'admin_console_sign_out', 'admin_console_step_up', 'admin_bootstrap_issued',
  'admin_bootstrap_used', 'admin_role_granted', 'admin_role_revoked', 'account_deleted', 'webhook_added', 'webhook_removed', 'webhook_paused',
  'webhook_resumed', 'webhook_secret_rotated', 'webhook_delivery_retried', 'oauth_client_secret_rotated', 'signing_key_rotated', 'account_imported',
  'email_verification_sent', 'email_verified', 'email_removed', 'email_recovery_requested', 'email_undo', 'email_recovery_closed',
  'email_recovery_opened', 'tenant_added', 'tenant_changed', 'tenant_removed'];

/** A kind in words when the catalogue has it, else as stored. */
export const kindLabel = (kind) => (has('kind.' + kind) ? t('kind.' + kind) : kind);

/** Audit lines as a table (the account page shows its own without the account column). */
export function auditTable(events, { caption, showAccount = true }) {
  const columns = [
    { label: t('audit.time'), cell: (row) => h('time', { datetime: row.time }, when(row.time)) },
    { label: t('audit.kind'), cell: (row) => [kindLabel(row.kind), h('br'), h('code', { class: 'muted' }, row.kind)] },
  ];
  if (showAccount) {
    columns.push({
      label: t('audit.account'),
      cell: (row) => (row.accountId ? h('a', { href: '#/accounts/' + encodeURIComponent(row.accountId) }, row.username || row.accountId) : '—'),
    });
  }
  columns.push(
    { label: t('audit.credential'), cell: (row) => shortId(row.credentialId) },
    { label: t('audit.address'), cell: (row) => row.ipAddress || '—' },
    { label: t('audit.user_agent'), cell: (row) => (row.userAgent ? h('span', { class: 'clip', title: row.userAgent }, row.userAgent) : '—') },
    { label: t('audit.detail'), cell: (row) => row.detail || '—' },
  );
  return table({ caption, columns, rows: events, empty: t('audit.none') });
}

/** A date field's day (YYYY-MM-DD, a UTC day: the API reads a day given as `to` as that whole day). */
const moment = (date) => (/^\d{4}-\d{2}-\d{2}$/.test(date) ? date : '');

export default async function audit({ params, go }) {
  const filter = {
    account: params.get('account') || '',
    kind: params.get('kind') || '',
    address: params.get('address') || '',
    from: params.get('from') || '',
    to: params.get('to') || '',
  };
  const before = params.get('before') || '';
  const apiFilter = { account: filter.account, kind: filter.kind, address: filter.address, from: moment(filter.from), to: moment(filter.to) };
  const answer = await get('/audit' + query({ ...apiFilter, before, limit: 50 }));
  const events = Array.isArray(answer.events) ? answer.events : [];

  const inputs = {};
  const listId = uid('kinds');
  const field = (name, label, attributes = {}) => {
    const id = uid('f');
    inputs[name] = h('input', { id, name, type: 'text', value: filter[name], autocomplete: 'off', spellcheck: 'false', autocapitalize: 'none', ...attributes });
    return h('div', { class: 'field' }, h('label', { for: id }, label), inputs[name]);
  };
  const form = h('form', {
    class: 'filters', role: 'search',
    onsubmit: (event) => {
      event.preventDefault();
      go('#/audit' + query(Object.fromEntries(Object.entries(inputs).map(([name, input]) => [name, input.value.trim()]))));
    },
  },
  field('account', t('audit.filter.account'), { maxlength: '36', placeholder: t('audit.filter.account_placeholder') }),
  field('kind', t('audit.filter.kind'), { list: listId, maxlength: '64' }),
  h('datalist', { id: listId }, KINDS.map((kind) => h('option', { value: kind }, kindLabel(kind)))),
  field('address', t('audit.filter.address'), { maxlength: '64', inputmode: 'decimal' }),
  field('from', t('audit.filter.from'), { type: 'date' }),
  field('to', t('audit.filter.to'), { type: 'date' }),
  h('div', { class: 'field buttons' },
    h('button', { type: 'submit', class: 'primary inline' }, t('audit.filter.apply')),
    h('a', { href: '#/audit', class: 'button-link' }, t('audit.filter.clear'))));

  const pager = h('div', { class: 'pager' },
    before ? h('a', { href: '#/audit' + query(filter) }, t('paging.newest')) : null,
    answer.next ? h('a', { href: '#/audit' + query({ ...filter, before: answer.next }), rel: 'next' }, t('paging.older')) : null);

  return [
    h('div', { class: 'page-head' }, h('h1', {}, t('audit.title')),
      h('a', { class: 'button-link', href: '/admin/api/audit.csv' + query(apiFilter), download: 'passkeyd-audit.csv' }, t('audit.export'))),
    section(t('audit.filters'), form),
    section(before ? t('audit.older_events') : t('audit.events'), auditTable(events, { caption: t('audit.caption') }), pager),
  ];
}
