// Tenants: the relying parties this server serves beside its own, each on its hosts. Only a
// server operator sees this page; every change asks the operator's passkey again.
import { get, post, patch, del, segment } from '../api.js';
import { t, when, number } from '../i18n.js';
import { h, section, table, button, busy, ask, say, field } from '../ui.js';

/** Words of `text` split on commas and spaces. */
const words = (text) => text.split(/[\s,]+/).filter(Boolean);

/** The JSON merge patch (RFC 7396) that turns `before` into `after`. */
function mergePatch(before, after) {
  const out = {};
  for (const key of Object.keys(before)) if (!(key in after)) out[key] = null;
  for (const [key, value] of Object.entries(after)) {
    const old = before[key];
    const objects = (v) => v && typeof v === 'object' && !Array.isArray(v);
    if (objects(old) && objects(value)) {
      const inner = mergePatch(old, value);
      if (Object.keys(inner).length) out[key] = inner;
    } else if (JSON.stringify(old) !== JSON.stringify(value)) {
      out[key] = value;
    }
  }
  return out;
}

/** `text` as a JSON object, or a message saying why not. */
function parseSettings(text) {
  if (!text.trim()) return { value: {} };
  try {
    const value = JSON.parse(text);
    if (!value || typeof value !== 'object' || Array.isArray(value)) return { error: t('tenants.settings_object') };
    return { value };
  } catch {
    return { error: t('tenants.settings_json') };
  }
}

export default async function tenants({ canChange, reload }) {
  const answer = await get('/tenants');
  const rows = answer.tenants || [];

  const columns = [
    { label: t('tenants.name'), cell: (row) => h('code', {}, row.name) },
    { label: t('tenants.rp_id'), cell: (row) => row.settings && typeof row.settings.rpID === 'string' ? row.settings.rpID : '—' },
    { label: t('tenants.hosts'), cell: (row) => h('ul', { class: 'plain' }, (row.hosts || []).map((host) => h('li', {}, h('code', {}, host)))) },
    { label: t('tenants.accounts'), cell: (row) => number(row.accounts) },
    { label: t('tenants.updated'), cell: (row) => when(row.updatedAt) },
  ];
  if (canChange) {
    columns.push({
      label: t('common.actions'),
      cell: (row) => h('div', { class: 'row-actions' },
        button(t('tenants.change'), (event) => busy(event.currentTarget, async () => {
          const values = await ask({
            title: t('tenants.change_title', { name: row.name }),
            fields: [
              { name: 'hosts', label: t('tenants.hosts'), required: true, hint: t('tenants.hosts_hint') },
              { name: 'settings', label: t('tenants.settings'), type: 'textarea', rows: 12, required: true, hint: t('tenants.settings_hint'), check: (value) => parseSettings(value).error || null },
            ],
            submitLabel: t('tenants.change'),
            initial: { hosts: (row.hosts || []).join(' '), settings: JSON.stringify(row.settings || {}, null, 2) },
          });
          if (!values) return;
          const settings = parseSettings(values.settings).value;
          await patch('/tenants/' + segment(row.name), { hosts: words(values.hosts), settings: mergePatch(row.settings || {}, settings) });
          await reload();
          say(t('tenants.changed', { name: row.name }), 'success');
        }), { 'aria-label': t('tenants.change_named', { name: row.name }) }),
        button(t('tenants.remove'), (event) => busy(event.currentTarget, async () => {
          const values = await ask({
            title: t('tenants.remove_title', { name: row.name }),
            text: row.accounts ? t('tenants.remove_data_text', { name: row.name, count: number(row.accounts) }) : t('tenants.remove_text', { name: row.name }),
            fields: [{ name: 'confirm', label: t('tenants.confirm', { name: row.name }), required: true, check: (value) => (value === row.name ? null : t('tenants.confirm_mismatch')) }],
            submitLabel: t('tenants.remove'),
            danger: true,
          });
          if (!values) return;
          await del('/tenants/' + segment(row.name), { confirm: values.confirm, deleteData: row.accounts > 0 });
          await reload();
          say(t('tenants.removed', { name: row.name }), 'success');
        }), { kind: 'link', class: 'link danger', 'aria-label': t('tenants.remove_named', { name: row.name }) })),
    });
  }

  let add = null;
  if (canChange) {
    const name = h('input', { name: 'name', type: 'text', maxlength: '63', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false' });
    const rpID = h('input', { name: 'rpID', type: 'text', maxlength: '253', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false' });
    const origins = h('input', { name: 'origins', type: 'text', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false' });
    const hosts = h('input', { name: 'hosts', type: 'text', autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false' });
    const rpName = h('input', { name: 'rpName', type: 'text', maxlength: '64', autocomplete: 'off' });
    const more = h('textarea', { name: 'settings', rows: '3', spellcheck: 'false' });
    add = h('form', {
      class: 'add-form', novalidate: true,
      onsubmit: (event) => {
        event.preventDefault();
        const form = event.currentTarget;
        for (const [input, label] of [[name, t('tenants.name')], [rpID, t('tenants.rp_id')], [origins, t('tenants.origins')]]) {
          if (!input.value.trim()) { say(t('common.required', { field: label }), 'error'); input.focus(); return; }
        }
        const extra = parseSettings(more.value);
        if (extra.error) { say(extra.error, 'error'); more.focus(); return; }
        const settings = { ...extra.value, rpID: rpID.value.trim(), origins: words(origins.value) };
        if (rpName.value.trim()) settings.rpName = rpName.value.trim();
        busy(form, async () => {
          const made = await post('/tenants', { name: name.value.trim(), hosts: words(hosts.value), settings });
          await reload();
          say(t('tenants.added', { name: made.name, hosts: made.hosts.join(', ') }), 'success');
        });
      },
    }, h('h3', {}, t('tenants.add')),
    field(t('tenants.name'), name, t('tenants.name_hint')),
    field(t('tenants.rp_id'), rpID, t('tenants.rp_id_hint')),
    field(t('tenants.origins'), origins, t('tenants.origins_hint')),
    field(t('tenants.hosts'), hosts, t('tenants.hosts_default_hint')),
    field(t('tenants.rp_name'), rpName),
    field(t('tenants.more'), more, t('tenants.more_hint')),
    h('button', { type: 'submit', class: 'primary inline' }, t('tenants.add_button')));
  }

  return [
    h('div', { class: 'page-head' }, h('h1', {}, t('tenants.title'))),
    section(t('tenants.list'), h('p', { class: 'hint' }, t('tenants.hint')), table({ caption: t('tenants.caption'), columns, rows, empty: t('tenants.none') }), add),
  ];
}
