// Integrations: OpenID Connect clients, API keys, webhook endpoints and their deliveries, and
// the keys tokens are signed with. Secrets are shown once, in a dialog, when they are made.
import { get, post, del, segment } from '../api.js';
import { t, when, number } from '../i18n.js';
import { h, section, table, badge, button, busy, confirm, showOnce, say, uid, shortId, field } from '../ui.js';
import { KINDS, kindLabel } from './audit.js';

const SCOPES = ['introspect', 'users:read', 'users:write', 'webhooks', 'clients'];
const scopeLabel = (scope) => t('scope.' + scope.replace(':', '_'));

function checkboxes(legend, name, values, label, checked = []) {
  return h('fieldset', { class: 'checks' }, h('legend', {}, legend), values.map((value) => {
    const id = uid('c');
    return h('div', { class: 'check' }, h('input', { type: 'checkbox', id, name, value, checked: checked.includes(value) }), h('label', { for: id }, label(value)));
  }));
}

const checkedValues = (form, name) => [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((input) => input.value);

export default async function integrations({ admin, canChange, reload }) {
  // `tenants` manages the server's tenants: a server operator's keys only.
  const scopes = admin && admin.role === 'operator' ? [...SCOPES, 'tenants'] : SCOPES;
  const answer = await get('/integrations');
  const clients = answer.clients || [];
  const apiKeys = answer.apiKeys || [];
  const webhooks = answer.webhooks || [];
  const signing = answer.signingKeys || { jwks: { keys: [] }, keys: [] };

  /** Runs a change (after `ask` says yes), then shows the page again and says `notice`. */
  const change = (control, { ask, work, notice }) => busy(control, async () => {
    if (ask && !(await confirm(ask))) return;
    const result = await work();
    await reload();
    if (notice) say(typeof notice === 'function' ? notice(result) : notice, 'success');
  });

  // MARK: OpenID Connect clients

  const clientColumns = [
    { label: t('clients.name'), cell: (row) => row.name },
    { label: t('clients.id'), cell: (row) => h('code', {}, row.clientId) },
    { label: t('clients.redirect_uris'), cell: (row) => h('ul', { class: 'plain' }, (row.redirectUris || []).map((uri) => h('li', {}, h('code', {}, uri)))) },
    { label: t('common.created'), cell: (row) => when(row.createdAt) },
  ];
  if (canChange) {
    clientColumns.push({
      label: t('common.actions'),
      cell: (row) => h('div', { class: 'row-actions' },
        button(t('clients.rotate'), (event) => busy(event.currentTarget, async () => {
          if (!(await confirm({ title: t('clients.rotate_title', { name: row.name }), text: t('clients.rotate_text'), confirmLabel: t('clients.rotate'), danger: false }))) return;
          const { secret } = await post('/clients/' + segment(row.clientId) + '/rotate-secret');
          await showOnce({ title: t('clients.secret_title', { name: row.name }), lead: t('clients.secret_lead'), secret, details: [[t('clients.id'), row.clientId]] });
        }), { 'aria-label': t('clients.rotate_named', { name: row.name }) }),
        button(t('common.remove'), (event) => change(event.currentTarget, {
          ask: { title: t('clients.remove_title', { name: row.name }), text: t('clients.remove_text'), confirmLabel: t('common.remove') },
          work: () => del('/clients/' + segment(row.clientId)),
          notice: t('status.client_removed', { name: row.name }),
        }), { kind: 'link', class: 'link danger', 'aria-label': t('common.remove_named', { name: row.name }) })),
    });
  }
  const clientName = h('input', { type: 'text', name: 'name', maxlength: '128', required: true, autocomplete: 'off' });
  const clientUris = h('textarea', { name: 'redirectUris', rows: '3', required: true, spellcheck: 'false' });
  const addClient = canChange ? h('form', {
    class: 'add-form', novalidate: true,
    onsubmit: (event) => {
      event.preventDefault();
      const form = event.currentTarget;
      const redirectUris = clientUris.value.split(/\s+/).filter(Boolean);
      if (!clientName.value.trim()) { say(t('common.required', { field: t('clients.name') }), 'error'); clientName.focus(); return; }
      if (!redirectUris.length) { say(t('common.required', { field: t('clients.redirect_uris') }), 'error'); clientUris.focus(); return; }
      busy(form, async () => {
        const made = await post('/clients', { name: clientName.value.trim(), redirectUris });
        await showOnce({ title: t('clients.secret_title', { name: made.client.name }), lead: t('clients.secret_lead'), secret: made.secret, details: [[t('clients.id'), made.client.clientId]] });
        await reload();
        say(t('status.client_added', { name: made.client.name }), 'success');
      });
    },
  }, h('h3', {}, t('clients.add')),
  field(t('clients.name'), clientName),
  field(t('clients.redirect_uris'), clientUris, t('clients.redirect_uris_hint')),
  h('button', { type: 'submit', class: 'primary inline' }, t('clients.add_button'))) : null;

  // MARK: API keys

  const keyColumns = [
    { label: t('keys.name'), cell: (row) => row.name },
    { label: t('keys.scopes'), cell: (row) => h('ul', { class: 'plain' }, (row.scopes || []).map((scope) => h('li', {}, h('code', {}, scope)))) },
    { label: t('common.created'), cell: (row) => when(row.createdAt) },
    { label: t('keys.last_used'), cell: (row) => when(row.lastUsedAt) },
    { label: t('keys.state'), cell: (row) => (row.revokedAt ? badge(t('keys.revoked_at', { time: when(row.revokedAt) }), 'bad') : badge(t('keys.active'), 'good')) },
  ];
  if (canChange) {
    keyColumns.push({
      label: t('common.actions'),
      cell: (row) => (row.revokedAt ? '—' : button(t('keys.revoke'), (event) => change(event.currentTarget, {
        ask: { title: t('keys.revoke_title', { name: row.name }), text: t('keys.revoke_text'), confirmLabel: t('keys.revoke') },
        work: () => del('/api-keys/' + segment(row.id)),
        notice: t('status.key_revoked', { name: row.name }),
      }), { kind: 'link', class: 'link danger', 'aria-label': t('keys.revoke_named', { name: row.name }) })),
    });
  }
  const keyName = h('input', { type: 'text', name: 'name', maxlength: '128', required: true, autocomplete: 'off' });
  const addKey = canChange ? h('form', {
    class: 'add-form', novalidate: true,
    onsubmit: (event) => {
      event.preventDefault();
      const form = event.currentTarget;
      const scopes = checkedValues(form, 'scopes');
      if (!keyName.value.trim()) { say(t('common.required', { field: t('keys.name') }), 'error'); keyName.focus(); return; }
      if (!scopes.length) { say(t('keys.scope_needed'), 'error'); form.querySelector('input[name=scopes]').focus(); return; }
      busy(form, async () => {
        const made = await post('/api-keys', { name: keyName.value.trim(), scopes });
        await showOnce({ title: t('keys.secret_title', { name: made.apiKey.name }), lead: t('keys.secret_lead'), secret: made.key });
        await reload();
        say(t('status.key_created', { name: made.apiKey.name }), 'success');
      });
    },
  }, h('h3', {}, t('keys.add')),
  field(t('keys.name'), keyName),
  checkboxes(t('keys.scopes'), 'scopes', scopes, (scope) => [h('code', {}, scope), ' ', scopeLabel(scope)]),
  h('button', { type: 'submit', class: 'primary inline' }, t('keys.add_button'))) : null;

  // MARK: webhooks

  const deliveryColumns = (hook) => {
    const columns = [
      { label: t('deliveries.event'), cell: (row) => [row.kind ? [kindLabel(row.kind), h('br')] : null, shortId(row.eventId, 12)] },
      { label: t('deliveries.status'), cell: (row) => deliveryStatus(row) },
      { label: t('deliveries.latency'), cell: (row) => (typeof row.latencyMs === 'number' ? t('deliveries.ms', { ms: number(row.latencyMs) }) : '—'), class: 'number' },
      { label: t('deliveries.attempts'), cell: (row) => number(row.attempts ?? 0), class: 'number' },
      { label: t('deliveries.delivered'), cell: (row) => when(row.deliveredAt, '—') },
      { label: t('deliveries.next_attempt'), cell: (row) => (row.deliveredAt ? '—' : when(row.nextAttemptAt, '—')) },
      { label: t('deliveries.last_error'), cell: (row) => row.lastError || '—' },
    ];
    if (canChange) {
      columns.push({
        label: t('common.actions'),
        cell: (row) => (failed(row) ? button(t('deliveries.retry'), (event) => change(event.currentTarget, {
          work: () => post('/webhooks/' + segment(hook.id) + '/deliveries/' + segment(row.eventId) + '/retry'),
          notice: t('status.delivery_retried'),
        }), { 'aria-label': t('deliveries.retry_named', { event: row.eventId }) }) : '—'),
      });
    }
    return columns;
  };

  const hookCard = (hook) => {
    const name = hook.url;
    const actions = canChange ? h('div', { class: 'actions' },
      hook.paused
        ? button(t('hooks.resume'), (event) => change(event.currentTarget, { work: () => post('/webhooks/' + segment(hook.id) + '/resume'), notice: t('status.hook_resumed') }))
        : button(t('hooks.pause'), (event) => change(event.currentTarget, { work: () => post('/webhooks/' + segment(hook.id) + '/pause'), notice: t('status.hook_paused') })),
      button(t('hooks.rotate'), (event) => busy(event.currentTarget, async () => {
        if (!(await confirm({ title: t('hooks.rotate_title'), text: t('hooks.rotate_text', { url: name }), confirmLabel: t('hooks.rotate'), danger: false }))) return;
        const { secret } = await post('/webhooks/' + segment(hook.id) + '/rotate-secret');
        await showOnce({ title: t('hooks.secret_title'), lead: t('hooks.secret_lead', { url: name }), secret });
      })),
      button(t('common.remove'), (event) => change(event.currentTarget, {
        ask: { title: t('hooks.remove_title'), text: t('hooks.remove_text', { url: name }), confirmLabel: t('common.remove') },
        work: () => del('/webhooks/' + segment(hook.id)),
        notice: t('status.hook_removed'),
      }), { kind: 'danger' })) : null;
    const events = hook.events && hook.events.length && !hook.events.includes('*') ? hook.events : null;
    return h('article', { class: 'hook' },
      h('h3', {}, h('code', { class: 'url' }, name), ' ', hook.paused ? badge(t('hooks.paused'), 'warn') : badge(t('hooks.active'), 'good')),
      h('p', { class: 'hint' }, t('hooks.added', { time: when(hook.createdAt) }), ' · ',
        events ? t('hooks.events_some', { events: events.map(kindLabel).join(', ') }) : t('hooks.events_all')),
      actions,
      table({ caption: t('deliveries.caption', { url: name }), columns: deliveryColumns(hook), rows: hook.deliveries || [], empty: t('deliveries.none') }));
  };

  const hookUrl = h('input', { type: 'url', name: 'url', maxlength: '2048', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'https://' });
  const allEvents = h('input', { type: 'checkbox', id: uid('c'), name: 'all', checked: true });
  const addHook = canChange ? h('form', {
    class: 'add-form', novalidate: true,
    onsubmit: (event) => {
      event.preventDefault();
      const form = event.currentTarget;
      const chosen = checkedValues(form, 'events');
      const events = allEvents.checked ? ['*'] : chosen;
      if (!hookUrl.value.trim()) { say(t('common.required', { field: t('hooks.url') }), 'error'); hookUrl.focus(); return; }
      if (!events.length) { say(t('hooks.event_needed'), 'error'); allEvents.focus(); return; }
      busy(form, async () => {
        const made = await post('/webhooks', { url: hookUrl.value.trim(), events });
        await showOnce({ title: t('hooks.secret_title'), lead: t('hooks.secret_lead', { url: made.webhook.url }), secret: made.secret });
        await reload();
        say(t('status.hook_added'), 'success');
      });
    },
  }, h('h3', {}, t('hooks.add')),
  field(t('hooks.url'), hookUrl, t('hooks.url_hint')),
  h('div', { class: 'check' }, allEvents, h('label', { for: allEvents.id }, t('hooks.all_events'))),
  h('details', { class: 'events' }, h('summary', {}, t('hooks.choose_events')),
    checkboxes(t('hooks.events'), 'events', KINDS, (kind) => [kindLabel(kind), ' ', h('code', { class: 'muted' }, kind)])),
  h('button', { type: 'submit', class: 'primary inline' }, t('hooks.add_button'))) : null;
  if (addHook) {
    // Choosing an event means "these events", not "every event".
    addHook.addEventListener('change', (event) => { if (event.target.name === 'events' && event.target.checked) allEvents.checked = false; });
  }

  // MARK: signing keys

  const rotateKeys = canChange ? button(t('signing.rotate'), (event) => change(event.currentTarget, {
    ask: { title: t('signing.rotate_title'), text: t('signing.rotate_text'), confirmLabel: t('signing.rotate'), danger: false },
    work: () => post('/signing-keys/rotate'),
    notice: t('status.keys_rotated'),
  }), { kind: 'primary' }) : null;

  return [
    h('div', { class: 'page-head' }, h('h1', {}, t('integrations.title'))),
    section(t('clients.title'), h('p', { class: 'hint' }, t('clients.hint')),
      table({ caption: t('clients.caption'), columns: clientColumns, rows: clients, empty: t('clients.none') }), addClient),
    section(t('keys.title'), h('p', { class: 'hint' }, t('keys.hint')),
      table({ caption: t('keys.caption'), columns: keyColumns, rows: apiKeys, empty: t('keys.none') }), addKey),
    section(t('hooks.title'), h('p', { class: 'hint' }, t('hooks.hint')),
      webhooks.length ? webhooks.map(hookCard) : h('p', { class: 'empty' }, t('hooks.none')), addHook),
    section(t('signing.title'),
      table({
        caption: t('signing.caption'),
        rows: signing.keys || [],
        empty: t('signing.none'),
        columns: [
          { label: t('signing.kid'), cell: (row) => h('code', {}, row.kid) },
          { label: t('signing.alg'), cell: (row) => row.alg },
          { label: t('common.created'), cell: (row) => when(row.createdAt) },
          { label: t('signing.retires'), cell: (row) => when(row.retiresAt, t('signing.not_retiring')) },
        ],
      }),
      rotateKeys,
      h('h3', {}, t('signing.jwks')),
      h('pre', { class: 'json', tabindex: '0', 'aria-label': t('signing.jwks') }, JSON.stringify(signing.jwks ?? {}, null, 2))),
  ];
}

/** A delivery that gave up or is failing (retry is offered): not delivered, and an error or "failed". */
function failed(delivery) {
  const status = String(delivery.status ?? '');
  return !delivery.deliveredAt && (status === 'failed' || status === 'dead' || !!delivery.lastError);
}

function deliveryStatus(delivery) {
  const status = delivery.status === null || delivery.status === undefined ? '' : String(delivery.status);
  const state = delivery.deliveredAt ? 'delivered' : failed(delivery) ? 'failed' : 'pending';
  const kind = state === 'delivered' ? 'good' : state === 'failed' ? 'bad' : 'warn';
  // The receiver's HTTP status when it answered, with the delivery's state in words.
  const words = /^[a-z_]+$/.test(status) && t('deliveries.state.' + status) !== 'deliveries.state.' + status ? t('deliveries.state.' + status) : t('deliveries.state.' + state);
  return [badge(words, kind), /^\d{3}$/.test(status) ? [' ', h('code', {}, 'HTTP ' + status)] : null];
}
