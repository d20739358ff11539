import { creationOptionsFromJSON, requestOptionsFromJSON, credentialToJSON, signal } from './webauthn.js';

const $ = (id) => document.getElementById(id);
const views = ['loading', 'signin', 'signup', 'account'];
let conditional = null; // AbortController of the AutoFill request in flight
let current = null;     // {user, rpId} when signed in
let finishing = false;  // a sign-in is being verified (from AutoFill or the button)

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(path, { method = 'GET', body } = {}) {
  const response = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  let json = null;
  try { json = await response.json(); } catch { /* not JSON */ }
  if (!response.ok) {
    const error = json && json.error ? json.error : { code: 'http_' + response.status, message: 'The server answered ' + response.status + '.' };
    throw new ApiError(response.status, error.code, error.message);
  }
  return json;
}

// MARK: messages

function say(text, kind = 'info') {
  const box = $('message');
  box.textContent = text;
  box.className = 'message ' + kind;
  box.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  box.hidden = !text;
}

const friendly = {
  username_taken: 'That username is taken. Choose another, or sign in.',
  invalid_username: 'Usernames use letters, digits and . _ - @ + (at most 64).',
  invalid_display_name: 'Display names have at most 64 characters.',
  invalid_name: 'Passkey names need 1 to 64 characters.',
  challenge_expired: 'That took too long, so the request expired. Please try again.',
  challenge_unknown: 'That request was already used or is unknown. Please try again.',
  credential_not_found: 'That passkey no longer exists on this account (it may have been deleted). Choose another passkey.',
  credential_not_allowed: 'That passkey belongs to a different account.',
  user_not_verified: 'Your device did not verify you (PIN or biometrics). Please try again.',
  last_passkey: 'This is your only passkey. Add another one before deleting it.',
  not_signed_in: 'Please sign in again.',
  credential_already_registered: 'This passkey is already registered.',
  too_many_ceremonies: 'The server is busy. Please try again in a moment.',
  database_unavailable: 'The server is unavailable right now. Please try again shortly.',
};

function explain(error) {
  if (error instanceof ApiError) return friendly[error.code] || error.message;
  switch (error && error.name) {
    case 'NotAllowedError': return 'The passkey request was cancelled, timed out, or no passkey was available.';
    case 'InvalidStateError': return 'This device already has a passkey for this account.';
    case 'SecurityError': return 'Passkeys cannot be used on this address.';
    case 'NotSupportedError': return 'This browser or device does not support passkeys.';
    case 'TypeError': return 'The server could not be reached. Check your connection and try again.';
    default: return 'Something went wrong. Please try again.';
  }
}

// MARK: views

function show(name) {
  for (const view of views) $('view-' + view).hidden = view !== name;
  const heading = $('view-' + name).querySelector('h1');
  if (heading) { heading.setAttribute('tabindex', '-1'); heading.focus({ preventScroll: true }); }
}

/** Changes the address without a hashchange event (that event is for the person's own navigation). */
function go(hash) {
  if (location.hash !== hash) history.pushState(null, '', hash);
}

function stopConditional() {
  if (conditional) { conditional.abort(); conditional = null; }
}

async function route() {
  const hash = location.hash || '#signin';
  if (hash === '#signup') { stopConditional(); show('signup'); $('signup-username').focus(); return; }
  if (current || hash === '#account') {
    if (await loadAccount()) return;
  }
  show('signin');
  startConditional();
}

// MARK: sign-in

async function startConditional() {
  stopConditional();
  if (!window.PublicKeyCredential || typeof PublicKeyCredential.isConditionalMediationAvailable !== 'function') return;
  if (!(await PublicKeyCredential.isConditionalMediationAvailable())) return;
  const controller = new AbortController();
  conditional = controller;
  try {
    const options = await api('/api/auth/authenticate/options', { method: 'POST', body: {} });
    if (controller.signal.aborted) return;
    const credential = await navigator.credentials.get({ mediation: 'conditional', publicKey: requestOptionsFromJSON(options), signal: controller.signal });
    // The person may have chosen another path (the button, sign-up) meanwhile: that one wins.
    if (controller.signal.aborted) return;
    conditional = null;
    await finishSignIn(credential, options.rpId);
  } catch (error) {
    if (controller.signal.aborted || (error && error.name === 'AbortError')) return;
    // A background AutoFill request that the browser ends on its own (no passkeys, a new page
    // state) is not something the person did: say nothing. Server answers are shown.
    if (!(error instanceof ApiError)) { console.debug('conditional request ended', error); return; }
    say(explain(error), 'error');
    if (error instanceof ApiError && (error.code === 'challenge_expired' || error.code === 'challenge_unknown')) {
      setTimeout(startConditional, 0);
    }
  }
}

async function signInWithButton(event) {
  event.preventDefault();
  if (finishing) return; // an AutoFill choice is being verified; its answer will show
  stopConditional();
  say('');
  const button = $('signin-button');
  button.disabled = true;
  try {
    const username = $('signin-username').value.trim();
    const options = await api('/api/auth/authenticate/options', { method: 'POST', body: username ? { username } : {} });
    const credential = await navigator.credentials.get({ publicKey: requestOptionsFromJSON(options) });
    await finishSignIn(credential, options.rpId);
  } catch (error) {
    say(explain(error), 'error');
    startConditional();
  } finally {
    button.disabled = false;
  }
}

async function finishSignIn(credential, rpId) {
  const json = credentialToJSON(credential);
  finishing = true;
  try {
    const result = await api('/api/auth/authenticate/verify', { method: 'POST', body: { credential: json } });
    current = { user: result.user, rpId: null };
    go('#account');
    await loadAccount('Signed in as ' + result.user.username + '.');
  } catch (error) {
    if (error instanceof ApiError && error.code === 'credential_not_found') {
      // Tell the passkey provider this passkey is gone so it stops offering it.
      await signal('signalUnknownCredential', { rpId, credentialId: json.id });
    }
    throw error;
  } finally {
    finishing = false;
  }
}

// MARK: sign-up and adding passkeys

async function signUp(event) {
  event.preventDefault();
  say('');
  const button = $('signup-button');
  const username = $('signup-username').value.trim();
  if (!username) { say('Choose a username.', 'error'); $('signup-username').focus(); return; }
  button.disabled = true;
  try {
    const options = await api('/api/auth/register/options', { method: 'POST', body: { username, displayName: $('signup-display-name').value.trim() } });
    const credential = await navigator.credentials.create({ publicKey: creationOptionsFromJSON(options) });
    const result = await api('/api/auth/register/verify', { method: 'POST', body: { credential: credentialToJSON(credential) } });
    current = { user: result.user, rpId: options.rp.id };
    go('#account');
    await loadAccount('Welcome, ' + result.user.displayName + '. Your passkey is saved.');
  } catch (error) {
    say(explain(error), 'error');
  } finally {
    button.disabled = false;
  }
}

async function addPasskey() {
  say('');
  const button = $('add-passkey-button');
  button.disabled = true;
  try {
    const options = await api('/api/auth/register/options', { method: 'POST', body: {} });
    const credential = await navigator.credentials.create({ publicKey: creationOptionsFromJSON(options) });
    const result = await api('/api/auth/register/verify', { method: 'POST', body: { credential: credentialToJSON(credential) } });
    await loadAccount('Added “' + result.passkey.name + '”.');
  } catch (error) {
    say(explain(error), 'error');
  } finally {
    button.disabled = false;
  }
}

// MARK: account

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const when = (iso) => (iso ? dateFormat.format(new Date(iso)) : 'Never');

async function loadAccount(notice) {
  let session;
  try {
    session = await api('/api/auth/session');
  } catch (error) {
    current = null;
    if (location.hash === '#account') history.replaceState(null, '', '#signin');
    return false;
  }
  current = { user: session.user, rpId: session.rpId };
  const { passkeys } = await api('/api/auth/passkeys');
  renderPasskeys(passkeys);
  $('account-greeting').textContent = 'Signed in as ' + session.user.displayName + ' (' + session.user.username + ').';
  show('account');
  if (notice) say(notice, 'success');
  await signal('signalAllAcceptedCredentials', { rpId: session.rpId, userId: session.user.userHandle, allAcceptedCredentialIds: passkeys.map((p) => p.id) });
  await signal('signalCurrentUserDetails', { rpId: session.rpId, userId: session.user.userHandle, name: session.user.username, displayName: session.user.displayName });
  return true;
}

function renderPasskeys(passkeys) {
  const list = $('passkey-list');
  list.replaceChildren();
  const only = passkeys.length === 1;
  for (const passkey of passkeys) {
    const item = $('passkey-item').content.firstElementChild.cloneNode(true);
    item.dataset.id = passkey.id;
    item.querySelector('.passkey-name').textContent = passkey.name;
    item.querySelector('.passkey-provider').textContent = passkey.provider && passkey.provider !== passkey.name ? passkey.provider : '';
    item.querySelector('.passkey-sync').textContent = passkey.backedUp ? 'Synced' : passkey.backupEligible ? 'Not synced yet' : 'This device only';
    item.querySelector('.passkey-created').textContent = when(passkey.createdAt);
    item.querySelector('.passkey-used').textContent = when(passkey.lastUsedAt);

    const form = item.querySelector('.rename-form');
    const input = item.querySelector('.rename-input');
    const inputID = 'rename-' + passkey.id;
    input.id = inputID;
    form.querySelector('label').setAttribute('for', inputID);
    form.querySelector('label').textContent = 'New name for ' + passkey.name;
    const rename = item.querySelector('.rename-button');
    rename.setAttribute('aria-label', 'Rename ' + passkey.name);
    rename.addEventListener('click', () => { form.hidden = false; input.value = passkey.name; input.focus(); input.select(); });
    item.querySelector('.rename-cancel').addEventListener('click', () => { form.hidden = true; rename.focus(); });
    form.addEventListener('submit', (event) => renamePasskey(event, passkey, input.value));

    const remove = item.querySelector('.delete-button');
    remove.setAttribute('aria-label', 'Delete ' + passkey.name);
    if (only) {
      remove.disabled = true;
      remove.title = 'Add another passkey before deleting this one.';
    }
    remove.addEventListener('click', () => confirmDelete(passkey));
    list.append(item);
  }
}

async function renamePasskey(event, passkey, name) {
  event.preventDefault();
  try {
    const updated = await api('/api/auth/passkeys/' + encodeURIComponent(passkey.id), { method: 'PATCH', body: { name } });
    await loadAccount('Renamed to “' + updated.name + '”.');
  } catch (error) {
    say(explain(error), 'error');
  }
}

function confirmDelete(passkey) {
  const dialog = $('confirm-delete');
  $('confirm-text').textContent = '“' + passkey.name + '” will no longer sign you in. You will still have your other passkeys.';
  dialog.returnValue = '';
  dialog.onclose = async () => {
    if (dialog.returnValue !== 'delete') return;
    try {
      await api('/api/auth/passkeys/' + encodeURIComponent(passkey.id), { method: 'DELETE' });
      await loadAccount('Deleted “' + passkey.name + '”.');
    } catch (error) {
      say(explain(error), 'error');
    }
  };
  dialog.showModal();
  $('confirm-cancel').focus();
}

async function signOut() {
  try { await api('/api/auth/session', { method: 'DELETE' }); } catch { /* signed out either way */ }
  current = null;
  $('signin-username').value = '';
  go('#signin');
  say('You are signed out.', 'success');
  show('signin');
  startConditional();
}

// MARK: start

$('signin-form').addEventListener('submit', signInWithButton);
$('signup-form').addEventListener('submit', signUp);
$('add-passkey-button').addEventListener('click', addPasskey);
$('signout-button').addEventListener('click', signOut);
window.addEventListener('hashchange', () => { say(''); route(); });
window.addEventListener('popstate', () => { say(''); route(); });
if (!window.PublicKeyCredential) say('This browser does not support passkeys.', 'error');
route();
