// The console's languages: the same choice as the account UI (`?lang=` first, then the browser's
// languages, English when neither has a catalogue). Sentences come from admin/i18n/<language>.json;
// the API's error codes the account UI already words (error.*) come from /i18n/<language>.json,
// under the console's own catalogue, which rewords the ones that read differently to an operator.
import { pickLanguage } from '/passkeyd.js';

let messages = {};
/** "en" or "fr". */
export let language = 'en';
/** The locale for dates and numbers: the browser's variant of the language (en-GB, fr-CA). */
export let locale = 'en';

async function load(url) {
  try {
    const init = { credentials: 'omit' };
    if (typeof AbortSignal.timeout === 'function') init.signal = AbortSignal.timeout(5000);
    const response = await fetch(url, init);
    if (!response.ok) return {};
    const json = await response.json();
    return json && typeof json === 'object' ? json : {};
  } catch {
    return {};
  }
}

const errorsOnly = (catalogue) => Object.fromEntries(Object.entries(catalogue).filter(([key]) => key.startsWith('error.')));

/** Loads the catalogues; never rejects (a catalogue that cannot be fetched is left out). */
export async function loadLanguage() {
  const asked = new URLSearchParams(location.search).get('lang');
  const preferred = asked ? [asked] : (navigator.languages ?? [navigator.language]);
  language = pickLanguage(preferred);
  locale = (navigator.languages || []).find((tag) => tag.toLowerCase().split('-')[0] === language) || language;
  const names = language === 'en' ? ['en'] : ['en', language];
  const account = await Promise.all(names.map((name) => load(`/i18n/${name}.json`)));
  const console = await Promise.all(names.map((name) => load(`/admin/i18n/${name}.json`)));
  messages = Object.assign({}, ...account.map(errorsOnly), ...console);
  document.documentElement.lang = language;
}

/**
 * The sentence of `key` with its `{name}` placeholders filled from `params`. With a numeric
 * `params.count`, `key.one` / `key.other` (the language's plural rules) come first. A key no
 * catalogue has is returned as it is.
 */
export function t(key, params = {}) {
  let text;
  if (typeof params.count === 'number') {
    const rule = new Intl.PluralRules(language).select(params.count);
    text = messages[`${key}.${rule}`] ?? messages[`${key}.other`];
  }
  text ??= messages[key];
  if (typeof text !== 'string') return key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (params[name] === undefined || params[name] === null ? '' : String(params[name]))).trim();
}

/** Whether a catalogue has `key`. */
export const has = (key) => typeof messages[key] === 'string';

/** Static text of the page: `data-i18n` (text), `data-i18n-aria-label`, `data-i18n-placeholder`. */
export function translate(root) {
  for (const element of root.querySelectorAll('[data-i18n]')) element.textContent = t(element.dataset.i18n);
  for (const element of root.querySelectorAll('[data-i18n-aria-label]')) element.setAttribute('aria-label', t(element.dataset.i18nAriaLabel));
  for (const element of root.querySelectorAll('[data-i18n-placeholder]')) element.setAttribute('placeholder', t(element.dataset.i18nPlaceholder));
}

const formats = new Map();
function format(kind, options) {
  if (!formats.has(kind)) formats.set(kind, kind === 'number' ? new Intl.NumberFormat(locale, options) : new Intl.DateTimeFormat(locale, options));
  return formats.get(kind);
}

/** A moment from the API (ISO 8601) in the page's language; `fallback` when there is none. */
export function when(iso, fallback = t('common.never')) {
  if (!iso) return fallback;
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : format('datetime', { dateStyle: 'medium', timeStyle: 'short' }).format(date);
}

/** A day ("YYYY-MM-DD", UTC) as a short date; `long` with the year. */
export function day(text, long = false) {
  const date = new Date(text + 'T00:00:00Z');
  if (Number.isNaN(date.getTime())) return String(text);
  return format(long ? 'daylong' : 'day', long ? { dateStyle: 'medium', timeZone: 'UTC' } : { day: 'numeric', month: 'short', timeZone: 'UTC' }).format(date);
}

/** A count in the page's language (1 234 / 1,234). */
export const number = (value) => (typeof value === 'number' ? format('number').format(value) : '—');
