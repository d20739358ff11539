// Admins: who may enter the console and with which role; admins grant and revoke.
import { get, post, del, segment } from '../api.js';
import { t, when } from '../i18n.js';
import { h, section, table, badge, button, busy, confirm, say, uid } from '../ui.js';

const ROLES = ['admin', 'viewer'];
// Only a server operator grants the operator role (the server refuses it to others).
const rolesFor = (admin) => (admin.role === 'operator' ? [...ROLES, 'operator'] : ROLES);

export default async function admins({ admin, canChange, reload }) {
  const answer = await get('/admins');
  const rows = answer.admins || [];
  const columns = [
    { label: t('account.username'), cell: (row) => h('a', { href: '#/accounts/' + encodeURIComponent(row.id) }, row.username) },
    { label: t('account.display_name'), cell: (row) => row.displayName || '—' },
    { label: t('account.role'), cell: (row) => [badge(t('role.' + row.role), 'role'), row.id === admin.id ? [' ', badge(t('admins.you'))] : null] },
    { label: t('admins.granted'), cell: (row) => when(row.grantedAt, '—') },
    { label: t('admins.granted_by'), cell: (row) => row.grantedBy || t('admins.bootstrap') },
  ];
  if (canChange) {
    columns.push({
      label: t('common.actions'),
      cell: (row) => button(t('admins.revoke'), (event) => busy(event.currentTarget, async () => {
        const self = row.id === admin.id;
        if (!(await confirm({
          title: t('admins.revoke_title', { username: row.username }),
          text: self ? t('admins.revoke_self') : t('admins.revoke_text', { username: row.username }),
          confirmLabel: t('admins.revoke'),
        }))) return;
        await del('/admins/' + segment(row.id));
        await reload();
        say(t('status.role_revoked', { username: row.username }), 'success');
      }), { kind: 'link', class: 'link danger', 'aria-label': t('admins.revoke_named', { username: row.username }) }),
    });
  }

  let grant = null;
  if (canChange) {
    const accountId = uid('f');
    const roleId = uid('f');
    const account = h('input', { id: accountId, name: 'account', type: 'text', maxlength: '64', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', 'aria-describedby': accountId + '-hint' });
    const role = h('select', { id: roleId, name: 'role' }, rolesFor(admin).map((name) => h('option', { value: name }, t('role.' + name) + ' — ' + t('role.' + name + '.description'))));
    role.value = 'viewer';
    grant = h('form', {
      class: 'add-form', novalidate: true,
      onsubmit: (event) => {
        event.preventDefault();
        const form = event.currentTarget;
        const who = account.value.trim();
        if (!who) { say(t('common.required', { field: t('admins.account') }), 'error'); account.focus(); return; }
        busy(form, async () => {
          await post('/admins', { account: who, role: role.value });
          await reload();
          say(t('status.role_granted', { username: who, role: t('role.' + role.value) }), 'success');
        });
      },
    }, h('h3', {}, t('admins.grant')),
    h('div', { class: 'field' }, h('label', { for: accountId }, t('admins.account')), account, h('p', { class: 'hint', id: accountId + '-hint' }, t('admins.account_hint'))),
    h('div', { class: 'field' }, h('label', { for: roleId }, t('account.role')), role),
    h('button', { type: 'submit', class: 'primary inline' }, t('admins.grant_button')));
  }

  return [
    h('div', { class: 'page-head' }, h('h1', {}, t('admins.title'))),
    section(t('admins.list'), h('p', { class: 'hint' }, t('admins.hint')), table({ caption: t('admins.caption'), columns, rows, empty: t('admins.none') }), grant),
  ];
}
