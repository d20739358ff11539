// Policy and metadata: the attestation policy in force, the FIDO MDS BLOB the server holds, and
// the passkey providers people use (by AAGUID).
import { get } from '../api.js';
import { t, has, when, number } from '../i18n.js';
import { h, section, table, facts, icon } from '../ui.js';

/** A value of the policy as text: lists joined, objects as compact JSON, booleans in words. */
function text(value) {
  if (value === null || value === undefined || value === '') return '—';
  if (typeof value === 'boolean') return value ? t('common.yes') : t('common.no');
  if (Array.isArray(value)) return value.length ? value.map((item) => (typeof item === 'object' ? JSON.stringify(item) : String(item))).join(', ') : t('common.none_short');
  if (typeof value === 'object') return h('code', { class: 'wrap' }, JSON.stringify(value));
  return String(value);
}

/** A setting's name in words when the catalogue has it, else as the API names it. */
const setting = (name) => (has('policy.setting.' + name) ? t('policy.setting.' + name) : name);

export default async function policy() {
  const answer = await get('/policy');
  const attestation = answer.attestation || {};
  const metadata = answer.metadata;
  const providers = answer.providers || [];
  return [
    h('div', { class: 'page-head' }, h('h1', {}, t('policy.title'))),
    section(t('policy.attestation'),
      h('p', { class: 'hint' }, t('policy.attestation_hint')),
      facts(Object.entries(attestation).map(([name, value]) => [setting(name), text(value)]))),
    section(t('policy.metadata'),
      metadata
        ? facts([
          [t('policy.blob_number'), number(metadata.number)],
          [t('policy.blob_next_update'), metadata.nextUpdate ? String(metadata.nextUpdate) : '—'],
          [t('policy.blob_entries'), typeof metadata.entries === 'number' ? number(metadata.entries) : text(metadata.entries)],
          [t('policy.blob_imported'), when(metadata.importedAt)],
          [t('policy.blob_loaded'), when(metadata.loadedAt)],
          [t('policy.blob_warning'), metadata.warning ? h('span', { class: 'warning' }, metadata.warning) : undefined],
        ])
        : h('p', { class: 'empty' }, t('policy.no_metadata'))),
    section(t('policy.providers'),
      table({
        caption: t('policy.providers_caption'),
        rows: providers,
        empty: t('policy.no_providers'),
        columns: [
          { label: t('policy.provider'), cell: (row) => h('span', { class: 'with-icon' }, icon(row.icon), h('span', {}, row.name || t('passkey.unknown_provider'))) },
          { label: t('policy.aaguid'), cell: (row) => h('code', {}, row.aaguid || '—') },
          { label: t('policy.passkeys'), cell: (row) => number(row.passkeys), class: 'number' },
        ],
      })),
  ];
}
