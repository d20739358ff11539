// Building blocks of the console's pages. Every value from the API goes in as text (text nodes,
// textContent, attributes): nothing here parses HTML.
import { t } from './i18n.js';

/**
 * An element: `h('a', {href: '#/x', class: 'y'}, 'text', child)`. Attributes are set as
 * attributes (strings), `on…` as listeners, `dataset` as data-*, `hidden`/`disabled`/`checked`/
 * `value` as properties; children are nodes or strings (text), null/false skipped.
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') element.addEventListener(name.slice(2), value);
    else if (name === 'dataset') Object.assign(element.dataset, value);
    else if (['hidden', 'disabled', 'checked', 'value', 'required', 'open'].includes(name)) element[name] = value;
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

let unique = 0;
/** A fresh element id with `prefix`. */
export const uid = (prefix = 'c') => `${prefix}-${++unique}`;

/** A heading section: `<section aria-labelledby><h2>title</h2>…</section>`. */
/** A labelled field of a form: `control` gets an id, its label and its hint (if any). */
export function field(label, control, hint) {
  const id = uid('f');
  control.id = id;
  const hintId = hint ? id + '-hint' : null;
  if (hintId) control.setAttribute('aria-describedby', hintId);
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hint ? h('p', { class: 'hint', id: hintId }, hint) : null);
}

export function section(title, ...children) {
  const id = uid('s');
  return h('section', { class: 'card panel', 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}

/**
 * A table in its own scrolling container (the page never scrolls sideways).
 * `columns`: [{label, cell: (row) => node|string, class?}]; `empty`: the sentence without rows.
 */
export function table({ caption, columns, rows, empty = t('common.none'), label }) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  const head = h('tr', {}, columns.map((column) => h('th', { scope: 'col', class: column.class }, column.label)));
  const body = rows.map((row) => h('tr', {}, columns.map((column, index) => {
    const value = column.cell(row);
    return index === 0 && column.header !== false ? h('th', { scope: 'row', class: column.class }, value) : h('td', { class: column.class }, value);
  })));
  const captionId = caption ? uid('cap') : null;
  const element = h('table', {}, caption ? h('caption', { id: captionId }, caption) : null, h('thead', {}, head), h('tbody', {}, body));
  // A region a keyboard can scroll: focusable, named by the caption.
  return h('div', { class: 'table-wrap', role: 'region', tabindex: '0', 'aria-labelledby': captionId, 'aria-label': captionId ? null : label }, element);
}

/** A definition list of [term, value] pairs (pairs with an undefined value are left out). */
export function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(([, value]) => value !== undefined).map(([term, value]) => [h('dt', {}, term), h('dd', {}, value ?? '—')]));
}

export const badge = (text, kind = '') => h('span', { class: `badge ${kind}`.trim() }, text);

/** A button; `kind`: secondary (default), primary, danger, link. */
export const button = (label, onclick, { kind = 'secondary', ...rest } = {}) =>
  h('button', { type: 'button', class: kind === 'primary' ? 'primary inline' : kind === 'danger' ? 'danger-button' : kind === 'link' ? 'link' : 'secondary', onclick, ...rest }, label);

/** A provider's icon (a data: image from the API; nothing else is loaded). */
export function icon(source) {
  if (typeof source !== 'string' || !/^data:image\/(png|svg\+xml|jpeg|webp|gif);/i.test(source)) return h('span', { class: 'provider-icon none', 'aria-hidden': 'true' });
  return h('img', { class: 'provider-icon', src: source, alt: '', width: '20', height: '20' });
}

/** A long id shown short, whole in its title (and to a screen reader's query of it). */
export function shortId(value, keep = 10) {
  if (!value) return '—';
  const text = String(value);
  return text.length <= keep + 2 ? h('code', {}, text) : h('code', { title: text }, text.slice(0, keep) + '…');
}

// MARK: messages

/** The page's message line: `kind` info, success or error (errors are alerts). */
export function say(text, kind = 'info') {
  const box = document.getElementById('message');
  box.textContent = text || '';
  box.className = 'message ' + kind;
  box.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  box.hidden = !text;
}

/** A failure in a sentence: the API's code translated, its message as a fallback. */
export const explain = (error) => (error && error.name === 'ConsoleError' ? error.message : t('error.unknown'));
export const fail = (error) => { if (error && error.name !== 'ConsoleError') console.error(error); say(explain(error), 'error'); };

/**
 * Runs `work` with `control` (a button or form) busy: marked aria-disabled (not disabled, so it
 * keeps the focus a dialog gives back), and a second click or submit meanwhile is ignored.
 * Failures go to the message line.
 */
export async function busy(control, work) {
  if (control && control.dataset.busy) return undefined;
  const marked = control instanceof HTMLFormElement ? [...control.querySelectorAll('button')] : control ? [control] : [];
  if (control) { control.dataset.busy = 'true'; control.setAttribute('aria-busy', 'true'); }
  for (const element of marked) element.setAttribute('aria-disabled', 'true');
  try {
    return await work();
  } catch (error) {
    fail(error);
    return undefined;
  } finally {
    if (control) { delete control.dataset.busy; control.removeAttribute('aria-busy'); }
    for (const element of marked) element.removeAttribute('aria-disabled');
  }
}

// MARK: dialogs

/**
 * A modal dialog (native <dialog>: focus stays inside, Escape closes). `build(form)` fills its
 * form and returns the value `submit` resolves with; cancelled: null. Focus goes back where it
 * was when it closes.
 */
function modal({ title, body, actions, initialFocus, onSubmit, wide = false }) {
  return new Promise((resolve) => {
    const opener = document.activeElement;
    const titleId = uid('dlg');
    const form = h('form', { method: 'dialog', novalidate: true });
    const error = h('p', { class: 'message error', role: 'alert', hidden: true });
    form.append(h('h2', { id: titleId }, title), ...[].concat(body), error, h('div', { class: 'dialog-actions' }, actions));
    const dialog = h('dialog', { 'aria-labelledby': titleId, class: wide ? 'wide' : null }, form);
    document.body.append(dialog);
    let result = null;
    form.addEventListener('submit', async (event) => {
      const submitter = event.submitter;
      if (submitter && submitter.value === 'cancel') return; // closes with null
      event.preventDefault();
      error.hidden = true;
      const outcome = onSubmit ? onSubmit(form) : true;
      if (outcome && outcome.error) {
        error.textContent = outcome.error;
        error.hidden = false;
        if (outcome.focus) outcome.focus.focus();
        return;
      }
      result = outcome;
      dialog.close();
    });
    dialog.addEventListener('close', () => {
      dialog.remove();
      if (opener && opener.isConnected) opener.focus();
      resolve(result);
    });
    dialog.showModal();
    (initialFocus ? initialFocus(form) : form.querySelector('input, textarea, select, button'))?.focus();
  });
}

const cancelButton = (label = t('common.cancel')) => h('button', { value: 'cancel', class: 'secondary', formnovalidate: true }, label);

/** Asks "are you sure?"; resolves true or false. */
export async function confirm({ title, text, confirmLabel, danger = true }) {
  const answer = await modal({
    title,
    body: h('p', {}, text),
    actions: [cancelButton(), h('button', { value: 'ok', class: danger ? 'danger-button' : 'primary inline' }, confirmLabel)],
    initialFocus: (form) => form.querySelector('button[value=cancel]'),
  });
  return answer === true;
}

/**
 * A small form in a dialog. `fields`: [{name, label, type?: 'text'|'textarea'|'select',
 * options?: [[value, label]], required?, hint?, maxlength?, rows?, check?: (value) => error|null}],
 * `initial`: {name: value} to start from. Resolves with {name: value} or null.
 */
export function ask({ title, text, fields, submitLabel, danger = false, initial = {} }) {
  const inputs = {};
  const body = [text ? h('p', {}, text) : null];
  for (const field of fields) {
    const id = uid('f');
    const hintId = field.hint ? uid('h') : null;
    const common = { id, name: field.name, required: field.required, 'aria-describedby': hintId, autocomplete: 'off', maxlength: field.maxlength, spellcheck: 'false' };
    let input;
    if (field.type === 'textarea') input = h('textarea', { ...common, rows: String(field.rows || 3) });
    else if (field.type === 'select') input = h('select', common, field.options.map(([value, label]) => h('option', { value }, label)));
    else input = h('input', { ...common, type: 'text', autocapitalize: 'none' });
    if (typeof initial[field.name] === 'string') input.value = initial[field.name];
    inputs[field.name] = input;
    body.push(h('label', { for: id }, field.label), input, field.hint ? h('p', { class: 'hint', id: hintId }, field.hint) : null);
  }
  return modal({
    title,
    body,
    actions: [cancelButton(), h('button', { value: 'ok', class: danger ? 'danger-button' : 'primary inline' }, submitLabel)],
    onSubmit: () => {
      const values = {};
      for (const field of fields) {
        const value = inputs[field.name].value.trim();
        if (field.required && !value) return { error: t('common.required', { field: field.label }), focus: inputs[field.name] };
        const problem = field.check ? field.check(value) : null;
        if (problem) return { error: problem, focus: inputs[field.name] };
        values[field.name] = value;
      }
      return values;
    },
  });
}

/** Shows a secret once (a key, a link), with a copy button; resolves when it is closed. */
export function showOnce({ title, lead, secret, details = [] }) {
  const id = uid('secret');
  const status = h('p', { class: 'hint', role: 'status' });
  const field = h('textarea', { id, class: 'secret', readonly: true, rows: String(Math.min(4, Math.ceil(secret.length / 40) || 1)), spellcheck: 'false' });
  field.value = secret;
  const copy = h('button', {
    type: 'button', class: 'secondary',
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(secret);
        status.textContent = t('secret.copied');
      } catch {
        field.select();
        status.textContent = t('secret.copy_failed');
      }
    },
  }, t('secret.copy'));
  return modal({
    title,
    wide: true,
    body: [h('p', {}, lead), facts(details), h('label', { for: id }, t('secret.label')), field, h('div', { class: 'row' }, copy), status,
      h('p', { class: 'warning' }, t('secret.once'))],
    actions: [h('button', { value: 'ok', class: 'primary inline' }, t('secret.done'))],
    initialFocus: () => copy,
  });
}
