import { creationOptionsFromJSON, requestOptionsFromJSON, credentialToJSON, signal } from './webauthn.js';

const $ = (id) => document.getElementById(id);
const views = ['loading', 'signin', 'signup', 'password', 'recover', 'consent', 'account'];
let conditional = null; // AbortController of the AutoFill request in flight
let current = null;     // {user, rpId} when signed in
let finishing = false;  // a sign-in is being verified (from AutoFill or the button)
let recovering = false; // signed in through recovery: lead to a new passkey
let automaticCreate = null; // AbortController of a conditional create in flight

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(path, { method = 'GET', body, reauthenticated = false } = {}) {
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
    // Sensitive actions need a recent sign-in: confirm with a passkey, then try once more.
    if (error.code === 'reauthentication_required' && !reauthenticated && current) {
      await reauthenticate();
      return api(path, { method, body, reauthenticated: true });
    }
    throw new ApiError(response.status, error.code, error.message);
  }
  return json;
}

/** A fresh passkey sign-in for the signed-in account; its new session replaces the old one. */
async function reauthenticate() {
  stopConditional();
  say('To do this, confirm it is you with your passkey.', 'info');
  const options = await api('/api/auth/authenticate/options', { method: 'POST', body: { username: current.user.username } });
  const credential = await navigator.credentials.get({ publicKey: requestOptionsFromJSON(options) });
  const result = await api('/api/auth/authenticate/verify', { method: 'POST', body: { credential: credentialToJSON(credential) } });
  current = { user: result.user, rpId: current.rpId };
  say('');
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
  invalid_credentials: 'Wrong username or password.',
  invalid_recovery_code: 'That recovery code is wrong or was already used.',
  invalid_recovery_link: 'This recovery link is unknown, expired or was already used. Ask for a new one.',
  no_passkey: 'Create a passkey before turning the password off.',
  rate_limited: 'Too many attempts. Please wait a minute and try again.',
  reauthentication_required: 'For your security, sign in again with your passkey to do this.',
  busy: 'The server is busy. Please try again in a moment.',
  account_disabled: 'This account is disabled.',
  not_signed_in: 'Please sign in again.',
  credential_already_registered: 'This passkey is already registered.',
  invalid_authorization_request: 'This sign-in request expired. Go back to the app and start again.',
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

// MARK: sign-in for another application (OpenID Connect)

// The pending authorization request an app sent the person here with (kept across the views
// of a sign-in: sign-up, password, a reload).
let authorizing = sessionStorage.getItem('authorize');

const scopeText = {
  openid: 'Know who you are (your account id)',
  profile: 'See your username and display name',
  email: 'See your email address, if your username is one',
  offline_access: 'Stay signed in while you are away',
};

/** Goes on with a pending authorization: sign in first, then consent, then back to the app.
 *  Returns true when it took over the page. */
async function resumeAuthorization() {
  if (!authorizing) return false;
  let info;
  try {
    info = await api('/oauth2/authorize/requests/' + encodeURIComponent(authorizing));
  } catch (error) {
    // Expired or finished meanwhile: nothing to go back to.
    authorizing = null;
    sessionStorage.removeItem('authorize');
    if (!(error instanceof ApiError && error.code === 'invalid_authorization_request')) say(explain(error), 'error');
    return false;
  }
  // Sign-up from this page only for applications that allow it.
  $('to-signup').parentElement.hidden = !info.allowSignUp;
  if (info.signInNeeded) {
    stopConditional();
    if (info.create && !current) { show('signup'); $('signup-username').value = info.loginHint || ''; }
    else { show('signin'); if (info.loginHint) $('signin-username').value = info.loginHint; startConditional(); }
    say('Sign in to continue to ' + info.client.name + '.', 'info');
    return true;
  }
  if (info.consentNeeded) {
    $('consent-client').textContent = info.client.name;
    $('consent-who').textContent = current ? 'Signed in as ' + current.user.username + '.' : '';
    const list = $('consent-scopes');
    list.replaceChildren();
    for (const scope of info.scopes) {
      const item = document.createElement('li');
      item.textContent = scopeText[scope] || scope;
      list.append(item);
    }
    show('consent');
    return true;
  }
  await decideAuthorization(true);
  return true;
}

async function decideAuthorization(approve) {
  const id = authorizing;
  try {
    const { redirect } = await api('/oauth2/authorize/requests/' + encodeURIComponent(id), { method: 'POST', body: { approve } });
    authorizing = null;
    sessionStorage.removeItem('authorize');
    location.assign(redirect);
  } catch (error) {
    say(explain(error), 'error');
  }
}

async function route() {
  const hash = location.hash || '#signin';
  if (hash.startsWith('#authorize=')) {
    authorizing = hash.slice('#authorize='.length);
    sessionStorage.setItem('authorize', authorizing);
    history.replaceState(null, '', '#signin');
    try { const session = await api('/api/auth/session'); current = { user: session.user, rpId: session.rpId }; } catch { current = null; }
    if (await resumeAuthorization()) return;
  }
  if (hash === '#signup') { stopConditional(); show('signup'); $('signup-username').focus(); return; }
  if (hash === '#password') { stopConditional(); show('password'); $('password-username').focus(); return; }
  if (hash === '#recover') { stopConditional(); show('recover'); $('recover-username').focus(); return; }
  if (hash.startsWith('#recover=')) { stopConditional(); await recoveryLink(hash.slice('#recover='.length)); return; }
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
    if (await resumeAuthorization()) return;
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

// MARK: passwords and recovery

async function passwordSignIn(event) {
  event.preventDefault();
  say('');
  const button = $('password-button');
  button.disabled = true;
  try {
    const result = await api('/api/auth/password/sign-in', { method: 'POST', body: { username: $('password-username').value.trim(), password: $('password-input').value } });
    $('password-input').value = '';
    current = { user: result.user, rpId: null };
    if (await resumeAuthorization()) return;
    go('#account');
    await loadAccount('Signed in as ' + result.user.username + '.');
    // Not awaited: the browser may keep a conditional create pending for as long as it likes.
    if (result.canCreatePasskey) upgradeAfterPassword();
  } catch (error) {
    say(explain(error), 'error');
  } finally {
    button.disabled = false;
  }
}

/** Right after a password sign-in: where the browser can (conditional create), the password
 *  manager makes a passkey without asking; elsewhere the account page offers the button. */
async function upgradeAfterPassword() {
  $('upgrade-banner').hidden = false;
  let capabilities = {};
  try {
    if (typeof PublicKeyCredential.getClientCapabilities === 'function') capabilities = await PublicKeyCredential.getClientCapabilities();
  } catch { /* treat as unsupported */ }
  if (!capabilities.conditionalCreate) return;
  const controller = new AbortController();
  automaticCreate = controller;
  try {
    const options = await api('/api/auth/register/options', { method: 'POST', body: { mediation: 'conditional' } });
    const credential = await navigator.credentials.create({ mediation: 'conditional', publicKey: creationOptionsFromJSON(options), signal: controller.signal });
    if (controller.signal.aborted) return;
    const result = await api('/api/auth/register/verify', { method: 'POST', body: { credential: credentialToJSON(credential) } });
    await loadAccount('Your password manager created a passkey (“' + result.passkey.name + '”). Next time, sign in with it.');
  } catch (error) {
    // Conditional create ends quietly when the browser declines; the banner's button remains.
    console.debug('conditional create ended', error);
  } finally {
    if (automaticCreate === controller) automaticCreate = null;
  }
}

function stopAutomaticCreate() {
  if (automaticCreate) { automaticCreate.abort(); automaticCreate = null; }
}

async function recoverySignIn(event) {
  event.preventDefault();
  say('');
  const button = $('recover-button');
  button.disabled = true;
  try {
    const result = await api('/api/auth/recovery/sign-in', { method: 'POST', body: { username: $('recover-username').value.trim(), code: $('recover-code').value.trim() } });
    $('recover-code').value = '';
    await afterRecovery(result, 'Signed in with a recovery code.');
  } catch (error) {
    say(explain(error), 'error');
  } finally {
    button.disabled = false;
  }
}

async function recoveryLink(token) {
  // The token leaves the address bar (and history) before anything else happens.
  history.replaceState(null, '', '#signin');
  show('loading');
  try {
    const result = await api('/api/auth/recovery/link', { method: 'POST', body: { token } });
    await afterRecovery(result, 'Signed in with your recovery link.');
  } catch (error) {
    show('signin');
    say(explain(error), 'error');
  }
}

async function afterRecovery(result, notice) {
  recovering = true;
  current = { user: result.user, rpId: null };
  go('#account');
  await loadAccount(notice + ' Create a new passkey now.');
}

async function createRecoveryCodes(notice) {
  try {
    const { codes } = await api('/api/auth/recovery-codes', { method: 'POST', body: {} });
    const list = $('recovery-codes-list');
    list.replaceChildren(...codes.map((code) => { const item = document.createElement('li'); item.textContent = code; return item; }));
    $('recovery-codes').hidden = false;
    $('recovery-codes-status').textContent = codes.length + ' unused codes.';
    if (notice) say(notice, 'success');
  } catch (error) {
    say(explain(error), 'error');
  }
}

async function removePassword() {
  try {
    await api('/api/auth/password', { method: 'DELETE' });
    await loadAccount('Your password is off. You sign in with passkeys only.');
  } catch (error) {
    say(explain(error), 'error');
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
    if (await resumeAuthorization()) return;
    go('#account');
    await loadAccount('Welcome, ' + result.user.displayName + '. Your passkey is saved.');
    await createRecoveryCodes('Welcome, ' + result.user.displayName + '. Your passkey is saved. Save your recovery codes below.');
  } catch (error) {
    say(explain(error), 'error');
  } finally {
    button.disabled = false;
  }
}

/** Adds a passkey to the signed-in account; `replaces` names one it takes the place of. */
async function addPasskey(button = $('add-passkey-button'), replaces = null) {
  say('');
  stopAutomaticCreate();
  button.disabled = true;
  try {
    const options = await api('/api/auth/register/options', { method: 'POST', body: {} });
    const credential = await navigator.credentials.create({ publicKey: creationOptionsFromJSON(options) });
    const body = { credential: credentialToJSON(credential) };
    if (replaces) body.replaces = replaces.id;
    const result = await api('/api/auth/register/verify', { method: 'POST', body });
    recovering = false;
    await loadAccount(replaces ? 'Replaced “' + replaces.name + '” with “' + result.passkey.name + '”.' : 'Added “' + result.passkey.name + '”.');
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
  renderPasskeys(passkeys, session.hasPassword);
  $('upgrade-banner').hidden = passkeys.length > 0 || recovering;
  $('recovery-banner').hidden = !recovering;
  $('password-section').hidden = !session.hasPassword;
  $('password-remove-button').disabled = passkeys.length === 0;
  await loadSessions();
  $('recovery-codes-status').textContent = session.recoveryCodesLeft > 0 ? session.recoveryCodesLeft + ' unused codes.' : 'You have no recovery codes.';
  $('account-greeting').textContent = 'Signed in as ' + session.user.displayName + ' (' + session.user.username + ').';
  show('account');
  if (notice) say(notice, 'success');
  await signal('signalAllAcceptedCredentials', { rpId: session.rpId, userId: session.user.userHandle, allAcceptedCredentialIds: passkeys.map((p) => p.id) });
  await signal('signalCurrentUserDetails', { rpId: session.rpId, userId: session.user.userHandle, name: session.user.username, displayName: session.user.displayName });
  return true;
}

function renderPasskeys(passkeys, hasPassword) {
  const list = $('passkey-list');
  list.replaceChildren();
  const only = passkeys.length === 1 && !hasPassword;
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

    const replace = item.querySelector('.replace-button');
    replace.setAttribute('aria-label', 'Replace ' + passkey.name);
    replace.addEventListener('click', () => addPasskey(replace, passkey));

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

async function loadSessions() {
  const { sessions } = await api('/api/auth/sessions');
  const list = $('session-list');
  list.replaceChildren();
  for (const session of sessions) {
    const item = document.createElement('li');
    const how = { passkey: 'passkey', sign_up: 'sign-up', password: 'password', recovery_code: 'recovery code', recovery_link: 'recovery link' }[session.method] || 'sign-in';
    const seen = session.lastSeenAt && !session.current ? ', last seen ' + when(session.lastSeenAt) : '';
    item.textContent = (session.current ? 'This browser (' + session.device + ')' : session.device) + ' — signed in with ' + how + ', ' + when(session.createdAt) + seen;
    if (session.ipAddress) item.title = session.ipAddress;
    list.append(item);
  }
  $('revoke-others-button').disabled = sessions.length < 2;
}

async function revokeOthers() {
  try {
    const { revoked } = await api('/api/auth/sessions/revoke-others', { method: 'POST', body: {} });
    await loadAccount(revoked === 1 ? 'Signed out 1 other session.' : 'Signed out ' + revoked + ' other sessions.');
  } catch (error) {
    say(explain(error), 'error');
  }
}

async function signOut() {
  try { await api('/api/auth/session', { method: 'DELETE' }); } catch { /* signed out either way */ }
  current = null;
  recovering = false;
  stopAutomaticCreate();
  $('recovery-codes').hidden = true;
  $('recovery-codes-list').replaceChildren();
  $('signin-username').value = '';
  go('#signin');
  say('You are signed out.', 'success');
  show('signin');
  startConditional();
}

// MARK: start

$('signin-form').addEventListener('submit', signInWithButton);
$('signup-form').addEventListener('submit', signUp);
$('add-passkey-button').addEventListener('click', () => addPasskey());
$('upgrade-button').addEventListener('click', () => addPasskey($('upgrade-button')));
$('recovery-passkey-button').addEventListener('click', () => addPasskey($('recovery-passkey-button')));
$('password-form').addEventListener('submit', passwordSignIn);
$('recover-form').addEventListener('submit', recoverySignIn);
$('recovery-codes-button').addEventListener('click', () => createRecoveryCodes('New recovery codes: the old ones no longer work.'));
$('password-remove-button').addEventListener('click', removePassword);
$('signout-button').addEventListener('click', signOut);
$('revoke-others-button').addEventListener('click', revokeOthers);
$('consent-allow').addEventListener('click', () => decideAuthorization(true));
$('consent-deny').addEventListener('click', () => decideAuthorization(false));
window.addEventListener('hashchange', () => { say(''); route(); });
window.addEventListener('popstate', () => { say(''); route(); });
if (!window.PublicKeyCredential) say('This browser does not support passkeys.', 'error');
route();
