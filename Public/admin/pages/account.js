// One account: its facts, passkeys, sessions and audit trail, and (for admins) what can be done
// to it. Every action answers from the server; the page then shows the account again.
import { get, post, del, segment } from '../api.js';
import { t, when, number } from '../i18n.js';
import { h, section, table, facts, badge, button, icon, shortId, busy, confirm, ask, showOnce, say } from '../ui.js';
import { accountBadges } from './accounts.js';
import { auditTable } from './audit.js';

/** "Synced", "Can sync, not synced yet" or "Device-bound". */
export const backup = (passkey) => t(passkey.backedUp ? 'passkey.synced' : passkey.backupEligible ? 'passkey.not_synced_yet' : 'passkey.device_bound');

function attestation(passkey) {
  const statement = passkey.attestation || {};
  const format = statement.format || 'none';
  const trust = format === 'none' ? null : statement.trusted ? badge(t('passkey.trusted'), 'good') : badge(t('passkey.untrusted'), 'warn');
  return [h('code', {}, format), ' ', trust];
}

function verdict(passkey) {
  const policy = passkey.policy || {};
  const anomalies = passkey.counterAnomalies > 0 ? [' ', badge(t('passkey.counter_anomalies', { count: passkey.counterAnomalies }), 'bad')] : null;
  return [verdictBadge(policy), anomalies];
}

function verdictBadge(policy) {
  if (policy.allowed === false) return [badge(t('passkey.refused'), 'bad'), policy.reason ? h('span', { class: 'reason' }, ' ' + policy.reason) : null];
  if (policy.allowed === true) return badge(t('passkey.allowed'), 'good');
  return '—';
}

export default async function account({ id, canChange, reload, go }) {
  const answer = await get('/accounts/' + segment(id));
  const person = answer.account;
  const path = '/accounts/' + segment(person.id);
  const passkeys = answer.passkeys || [];
  const sessions = answer.sessions || [];

  // MARK: actions (admins only: absent for viewers)

  const act = (control, work, notice) => busy(control, async () => {
    const result = await work();
    if (result !== false) { await reload(); say(notice, 'success'); }
  });

  const toggle = () => button(person.disabled ? t('account.enable') : t('account.disable'), (event) => {
    const control = event.currentTarget;
    return person.disabled
      ? act(control, () => post(path + '/enable'), t('status.enabled', { username: person.username }))
      : act(control, async () => {
        if (!(await confirm({ title: t('account.disable_title', { username: person.username }), text: t('account.disable_text'), confirmLabel: t('account.disable') }))) return false;
        return post(path + '/disable');
      }, t('status.disabled', { username: person.username }));
  });

  const revokeSessions = () => button(t('account.revoke_sessions'), (event) => act(event.currentTarget, async () => {
    if (!(await confirm({ title: t('account.revoke_sessions_title', { username: person.username }), text: t('account.revoke_sessions_text'), confirmLabel: t('account.revoke_sessions') }))) return false;
    return post(path + '/revoke-sessions');
  }, t('status.sessions_revoked', { username: person.username })));

  const recoveryLink = () => button(t('account.recovery_link'), (event) => busy(event.currentTarget, async () => {
    const values = await ask({
      title: t('account.recovery_link_title', { username: person.username }),
      text: t('account.recovery_link_text'),
      fields: [{ name: 'reason', label: t('account.reason'), type: 'textarea', required: true, maxlength: '500', hint: t('account.reason_hint') }],
      submitLabel: t('account.recovery_link_issue'),
    });
    if (!values) return;
    const issued = await post(path + '/recovery-link', { reason: values.reason });
    await showOnce({
      title: t('account.recovery_link_ready'),
      lead: t('account.recovery_link_lead', { username: person.username }),
      secret: issued.link,
      details: [[t('common.expires'), when(issued.expiresAt)]],
    });
    await reload();
  }));

  const remove = () => button(t('account.delete'), (event) => busy(event.currentTarget, async () => {
    const values = await ask({
      title: t('account.delete_title', { username: person.username }),
      text: t('account.delete_text', { username: person.username }),
      fields: [{
        name: 'confirm', label: t('account.delete_type', { username: person.username }), required: true, maxlength: '128',
        check: (value) => (value === person.username ? null : t('error.confirmation_mismatch')),
      }],
      submitLabel: t('account.delete'),
      danger: true,
    });
    if (!values) return;
    await del(path, { confirm: values.confirm });
    go('#/accounts', t('status.account_deleted', { username: person.username }));
  }), { kind: 'danger' });

  const removePasskey = (passkey) => button(t('passkey.remove'), (event) => act(event.currentTarget, async () => {
    if (!(await confirm({
      title: t('passkey.remove_title', { name: passkey.name }),
      text: t('passkey.remove_text', { name: passkey.name, username: person.username }),
      confirmLabel: t('passkey.remove'),
    }))) return false;
    return del(path + '/passkeys/' + segment(passkey.id));
  }, t('status.passkey_removed', { name: passkey.name })), { kind: 'link', class: 'link danger', 'aria-label': t('passkey.remove_named', { name: passkey.name }) });

  // MARK: the page

  const passkeyColumns = [
    { label: t('passkey.name'), cell: (row) => h('span', { class: 'with-icon' }, icon(row.provider && row.provider.icon), h('span', {}, row.name || '—')) },
    { label: t('passkey.provider'), cell: (row) => [(row.provider && row.provider.name) || t('passkey.unknown_provider'), h('br'), shortId(row.aaguid, 8)] },
    { label: t('passkey.created'), cell: (row) => when(row.createdAt) },
    { label: t('passkey.last_used'), cell: (row) => when(row.lastUsedAt) },
    { label: t('passkey.backup'), cell: (row) => backup(row) },
    { label: t('passkey.attestation'), cell: attestation },
    { label: t('passkey.policy'), cell: verdict },
    { label: t('passkey.id'), cell: (row) => shortId(row.id) },
  ];
  if (canChange) passkeyColumns.push({ label: t('common.actions'), cell: removePasskey });

  const title = person.displayName && person.displayName !== person.username ? `${person.displayName} (${person.username})` : person.username;
  return [
    h('p', { class: 'crumbs' }, h('a', { href: '#/accounts' }, t('accounts.back'))),
    h('div', { class: 'page-head' }, h('h1', {}, title), h('div', { class: 'badges' }, accountBadges(person))),
    section(t('account.facts'),
      facts([
        [t('account.username'), person.username],
        [t('account.display_name'), person.displayName || '—'],
        [t('account.id'), h('code', {}, person.id)],
        [t('account.external_id'), person.externalId || '—'],
        [t('account.created'), when(person.createdAt)],
        [t('account.last_sign_in'), when(person.lastSignInAt)],
        [t('account.state'), person.disabled ? t('account.disabled') : t('account.enabled')],
        [t('account.password'), person.hasPassword ? t('account.password_set') : t('account.password_none')],
        [t('account.recovery_codes'), number(person.recoveryCodesLeft ?? 0)],
        [t('account.role'), person.role ? t('role.' + person.role) : t('role.none')],
      ]),
      canChange ? h('div', { class: 'actions' }, toggle(), revokeSessions(), recoveryLink(), remove()) : null),
    section(t('account.passkeys', { count: passkeys.length }),
      table({ caption: t('account.passkeys_of', { username: person.username }), columns: passkeyColumns, rows: passkeys, empty: t('account.no_passkeys') })),
    section(t('account.sessions', { count: sessions.length }),
      table({
        caption: t('account.sessions_of', { username: person.username }),
        rows: sessions,
        empty: t('account.no_sessions'),
        columns: [
          { label: t('session.device'), cell: (row) => row.device || '—' },
          { label: t('session.method'), cell: (row) => t('method.' + row.method) === 'method.' + row.method ? row.method || '—' : t('method.' + row.method) },
          { label: t('session.created'), cell: (row) => when(row.createdAt) },
          { label: t('session.last_seen'), cell: (row) => when(row.lastSeenAt) },
          { label: t('session.address'), cell: (row) => row.ipAddress || '—' },
        ],
      })),
    section(t('account.audit'),
      auditTable(answer.audit || [], { caption: t('account.audit_of', { username: person.username }), showAccount: false }),
      h('p', {}, h('a', { href: '#/audit?account=' + encodeURIComponent(person.id) }, t('account.audit_all')))),
  ];
}
