// The web UI: views, messages and forms. Every API call and passkey ceremony goes through
// passkeyd.js (the same client other sites import); this file only decides what the page shows.
import { Passkeyd, PasskeydError } from './passkeyd.js';

const $ = (id) => document.getElementById(id);
const views = ['loading', 'signin', 'signup', 'password', 'recover', 'recover-email', 'recover-step', 'verify-email', 'undo', 'consent', 'account'];

const client = new Passkeyd({
  lang: new URLSearchParams(location.search).get('lang') || undefined,
  // Sensitive actions need a recent sign-in: say why the passkey sheet appears, then go on.
  onReauthenticate: () => { say(t('status.reauthenticate'), 'info'); return true; },
});
const t = (key, params) => client.message(key, params);

let autofill = null;    // AbortController of the AutoFill request in flight
let current = null;     // the signed-in user, when there is one
let recovering = false; // signed in through recovery: lead to a new passkey
let automaticCreate = null; // AbortController of a conditional create in flight
// Mail (docs/email.md): what this server offers (GET /api/auth/email/policy).
let policy = { mailEnabled: false, signUp: 'off', undoHours: 72 };
let pendingAddress = null;      // an address waiting for its code on the account page
let recoveryIdentifier = null;  // the username or address a recovery mail was asked for
let recoveryStep = null;        // {options, claim}: a recovery step's options (its token is spent), kept for "Try again"
let claimToken = null;          // a verification's recovery token: "remove them all and create my own passkey"
// A mail link's token waits here (in memory only) for the person's click: opening a link posts
// nothing, so a mail scanner that runs the page spends no token and changes nothing.
let verifyToken = null;         // a verification link's token, until "Confirm my address"
let recoveryLinkToken = null;   // a recovery link's token, until "Create a new passkey"
let undoToken = null;           // a "this wasn't me" link's token, until the person confirms
let othersAfterRecovery = 0;    // other passkeys on the account after a recovery by mail

// MARK: language

/** Static text from the catalogue: `data-i18n` (text), `data-i18n-aria-label`, `data-i18n-title`. */
function translate(root) {
  for (const element of root.querySelectorAll('[data-i18n]')) element.textContent = t(element.dataset.i18n);
  for (const element of root.querySelectorAll('[data-i18n-aria-label]')) element.setAttribute('aria-label', t(element.dataset.i18nAriaLabel));
  for (const element of root.querySelectorAll('[data-i18n-title]')) element.setAttribute('title', t(element.dataset.i18nTitle));
}

/** Fills `element` with the sentence of `key`, its `{name}` placeholders replaced by nodes. */
function fillWithNodes(element, key, nodes) {
  const parts = t(key, Object.fromEntries(Object.keys(nodes).map((name) => [name, `{${name}}`]))).split(/(\{\w+\})/);
  element.replaceChildren(...parts.map((part) => {
    const name = /^\{(\w+)\}$/.exec(part);
    return name && nodes[name[1]] ? nodes[name[1]] : document.createTextNode(part);
  }));
}

// MARK: messages

function say(text, kind = 'info') {
  const box = $('message');
  box.textContent = text;
  box.className = 'message ' + kind;
  box.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  box.hidden = !text;
}

/** A failure in a sentence for the person: the client's (already in the page's language). */
const explain = (error) => (error instanceof PasskeydError ? error.message : t('error.unknown'));
const fail = (error) => say(explain(error), 'error');

// MARK: views

function show(name) {
  for (const view of views) $('view-' + view).hidden = view !== name;
  const heading = $('view-' + name).querySelector('h1');
  if (heading) { heading.setAttribute('tabindex', '-1'); heading.focus({ preventScroll: true }); }
}

// The fragment route() last handled, or the page itself set: a fragment navigation fires both
// popstate and hashchange, and is routed once (a link's token is read once).
let routedHash = null;

/** Changes the address without a hashchange event (that event is for the person's own navigation). */
function go(hash) {
  if (location.hash !== hash) history.pushState(null, '', hash);
  routedHash = location.hash;
}

/** Replaces the address (a link's token leaves it and the history). */
function replaceHash(hash) {
  history.replaceState(null, '', hash);
  routedHash = location.hash;
}

/** The person's own navigation (Back, a link, an address typed or opened). */
function navigated() {
  if (location.hash === routedHash) return;
  say('');
  route();
}

// MARK: sign-in for another application (OpenID Connect)

// The pending authorization request an app sent the person here with (kept across the views
// of a sign-in: sign-up, password, a reload).
let authorizing = sessionStorage.getItem('authorize');

/** Goes on with a pending authorization: sign in first, then consent, then back to the app.
 *  Returns true when it took over the page. */
async function resumeAuthorization() {
  if (!authorizing) return false;
  let info;
  try {
    info = await client.authorizationRequest(authorizing);
  } catch (error) {
    // Expired or finished meanwhile: nothing to go back to.
    authorizing = null;
    sessionStorage.removeItem('authorize');
    if (error.code !== 'invalid_authorization_request') fail(error);
    return false;
  }
  // Sign-up from this page only for applications that allow it.
  $('to-signup').parentElement.hidden = !info.allowSignUp;
  if (info.signInNeeded) {
    stopAutoFill();
    if (info.create && !current) { show('signup'); $('signup-username').value = info.loginHint || ''; }
    else { show('signin'); if (info.loginHint) $('signin-username').value = info.loginHint; startAutoFill(); }
    say(t('status.sign_in_to_continue', { client: info.client.name }), 'info');
    return true;
  }
  if (info.consentNeeded) {
    const name = document.createElement('span');
    name.id = 'consent-client';
    name.textContent = info.client.name;
    fillWithNodes($('consent-title'), 'consent.title', { client: name });
    $('consent-who').textContent = current ? t('consent.who', { username: current.username }) : '';
    $('consent-scopes').replaceChildren(...info.scopes.map((scope) => {
      const item = document.createElement('li');
      item.textContent = client.hasMessage('scope.' + scope) ? t('scope.' + scope) : scope;
      return item;
    }));
    show('consent');
    return true;
  }
  await decideAuthorization(true);
  return true;
}

async function decideAuthorization(approve) {
  try {
    const { redirect } = await client.decideAuthorization(authorizing, approve);
    authorizing = null;
    sessionStorage.removeItem('authorize');
    location.assign(redirect);
  } catch (error) {
    fail(error);
  }
}

async function route() {
  routedHash = location.hash;
  // Any navigation drops a mail link's token that was not acted on (a link sets its own again).
  verifyToken = null;
  recoveryLinkToken = null;
  undoToken = null;
  const hash = location.hash || '#signin';
  if (hash.startsWith('#authorize=')) {
    authorizing = hash.slice('#authorize='.length);
    sessionStorage.setItem('authorize', authorizing);
    replaceHash('#signin');
    try { current = (await client.session())?.user ?? null; } catch { current = null; }
    if (await resumeAuthorization()) return;
  }
  // Links from mails: the token leaves the address bar (and history) before anything else (a
  // reload of what is left shows the sign-in or the account).
  for (const [prefix, open] of [['#verify-email=', verifyEmailLink], ['#email-recover=', recoveryMailLink], ['#undo=', undoLink]]) {
    if (hash.startsWith(prefix)) {
      replaceHash(prefix.slice(0, -1));
      stopAutoFill();
      await open(hash.slice(prefix.length));
      return;
    }
  }
  if (hash === '#signup' || hash === '#password' || hash === '#recover' || hash === '#recover-email') {
    // Signed in already (Back after signing up, a bookmark): those pages would act on another
    // account, so the account shows instead.
    if (!current) { try { current = (await client.session())?.user ?? null; } catch { current = null; } }
    if (current && await loadAccount()) { replaceHash('#account'); return; }
  }
  if (hash === '#signup') { stopAutoFill(); show('signup'); $('signup-username').focus(); return; }
  if (hash === '#password') { stopAutoFill(); show('password'); $('password-username').focus(); return; }
  if (hash === '#recover') { stopAutoFill(); show('recover'); $('recover-username').focus(); return; }
  if (hash === '#recover-email' && policy.mailEnabled) { stopAutoFill(); openRecoveryMailForm(); return; }
  if (hash.startsWith('#recover=')) { stopAutoFill(); await recoveryLink(hash.slice('#recover='.length)); return; }
  if (current || hash === '#account') {
    if (await loadAccount()) return;
  }
  show('signin');
  startAutoFill();
}

// MARK: sign-in

/** Passkeys in the username field's AutoFill while the sign-in page shows. */
function startAutoFill() {
  stopAutoFill();
  const controller = new AbortController();
  autofill = controller;
  client.autoFill($('signin-username'), { signal: controller.signal, onError: fail })
    .then((answer) => { if (autofill === controller) autofill = null; return signedIn(answer); })
    .catch((error) => {
      if (autofill === controller) autofill = null;
      // Ended by the page (another view, the button's sign-in) or not offered by this browser.
      if (error.code === 'cancelled' || error.code === 'unsupported') return;
      fail(error);
    });
}

function stopAutoFill() {
  if (autofill) { autofill.abort(); autofill = null; }
}

async function signInWithButton(event) {
  event.preventDefault();
  say('');
  const button = $('signin-button');
  button.disabled = true;
  try {
    await signedIn(await client.signIn({ username: $('signin-username').value.trim() }));
  } catch (error) {
    // `cancelled` after an AutoFill choice won: that sign-in shows its own answer.
    if (!(error.code === 'cancelled' && current)) fail(error);
  } finally {
    button.disabled = false;
  }
}

async function signedIn(answer) {
  current = answer.user;
  stopAutoFill();
  if (await resumeAuthorization()) return;
  go('#account');
  await loadAccount(t('status.signed_in', { username: answer.user.username }));
}

// MARK: passwords and recovery

async function passwordSignIn(event) {
  event.preventDefault();
  say('');
  const button = $('password-button');
  button.disabled = true;
  try {
    const answer = await client.signInWithPassword({ username: $('password-username').value, password: $('password-input').value });
    $('password-input').value = '';
    current = answer.user;
    if (await resumeAuthorization()) return;
    go('#account');
    await loadAccount(t('status.signed_in', { username: answer.user.username }));
    // Not awaited: the browser may keep a conditional create pending for as long as it likes.
    if (answer.canCreatePasskey) upgradeAfterPassword();
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

/** Right after a password sign-in: where the browser can (conditional create), the password
 *  manager makes a passkey without asking; elsewhere the account page offers the button. */
async function upgradeAfterPassword() {
  $('upgrade-banner').hidden = false;
  const controller = new AbortController();
  automaticCreate = controller;
  try {
    const answer = await client.autoCreatePasskey({ signal: controller.signal });
    await loadAccount(t('status.auto_created', { name: answer.passkey.name }));
  } catch (error) {
    // Conditional create ends quietly when the browser declines; the banner's button remains.
    console.debug('conditional create ended:', error.code);
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
    const answer = await client.recover({ username: $('recover-username').value, code: $('recover-code').value });
    $('recover-code').value = '';
    await afterRecovery(answer, t('status.recovered_code'));
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

async function recoveryLink(token) {
  // The token leaves the address bar (and history) before anything else happens.
  replaceHash('#signin');
  show('loading');
  try {
    await afterRecovery(await client.recoverWithLink(token), t('status.recovered_link'));
  } catch (error) {
    show('signin');
    fail(error);
  }
}

async function afterRecovery(answer, notice) {
  recovering = true;
  current = answer.user;
  go('#account');
  await loadAccount(notice);
}

// MARK: recovery by mail

function openRecoveryMailForm() {
  $('recover-email-code-form').hidden = !recoveryIdentifier;
  show('recover-email');
  $('recover-email-identifier').focus();
}

/** "Lost your passkey?": the same answer whether or not the account exists. */
async function requestRecoveryMail(event) {
  event.preventDefault();
  say('');
  const identifier = $('recover-email-identifier').value.trim();
  if (!identifier) { say(t('status.give_identifier'), 'error'); $('recover-email-identifier').focus(); return; }
  const button = $('recover-email-button');
  button.disabled = true;
  try {
    await client.requestEmailRecovery(identifier);
    recoveryIdentifier = identifier;
    $('recover-email-code-form').hidden = false;
    say(t('status.recovery_mail_sent'), 'success');
    $('recover-email-code').focus();
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

/** The code of a recovery mail: opens the recovery step (the click starts its passkey sheet). */
async function enterRecoveryCode(event) {
  event.preventDefault();
  say('');
  const button = $('recover-email-code-button');
  button.disabled = true;
  try {
    const options = await client.emailRecoveryOptions({ identifier: recoveryIdentifier, code: $('recover-email-code').value });
    $('recover-email-code').value = '';
    recoveryIdentifier = null;
    await startRecoveryStep(options);
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

/** A recovery mail's link (#email-recover=; #recover= is an administrator's recovery link): what it
 *  does, and a button. The token is spent only when the person presses it. */
function recoveryMailLink(token) {
  recoveryLinkToken = token;
  recoveryStep = null;
  $('recover-step-text').textContent = t('recover_step.link_text');
  $('recover-step-account').hidden = true;
  $('recover-step-button').textContent = t('recover_step.button');
  $('recover-step-button').hidden = false;
  show('recover-step');
}

/** "Create a new passkey" on a recovery link's screen: the step's options (the token is spent
 *  here), then its passkey sheet, under the name of the account it is for. */
async function openRecoveryLink() {
  const token = recoveryLinkToken;
  if (!token) return;
  say('');
  const button = $('recover-step-button');
  button.disabled = true;
  try {
    const options = await client.emailRecoveryOptions({ token });
    if (recoveryLinkToken !== token) return; // cancelled meanwhile
    recoveryLinkToken = null;
    await startRecoveryStep(options);
  } catch (error) {
    if (recoveryLinkToken !== token) return;
    await leaveMailLink();
    fail(error);
  } finally {
    button.disabled = false;
  }
}

/** Cancel on a mail link's screen: its token (or step) is dropped, and the sign-in or the account shows. */
async function leaveMailLink() {
  verifyToken = null;
  recoveryLinkToken = null;
  recoveryStep = null;
  // The account when this browser is signed in (route() falls back to the sign-in otherwise).
  go('#account');
  await route();
}

/** Shows a recovery step and starts its passkey sheet; `claim`: then remove every other passkey.
 *  The account's name shows first: a link someone else sent would sign in to their account (login
 *  CSRF), and the person who sees a name not theirs cancels. */
async function startRecoveryStep(options, { claim = false } = {}) {
  recoveryStep = { options, claim };
  $('recover-step-text').textContent = t(claim ? 'recover_step.claim_text' : 'recover_step.text');
  const account = options && options.user && typeof options.user.name === 'string' ? options.user.name : '';
  const line = $('recover-step-account');
  line.hidden = !account;
  if (account) {
    const name = document.createElement('strong');
    name.id = 'recover-step-username';
    name.textContent = account;
    fillWithNodes(line, 'recover_step.account', { username: name });
  }
  $('recover-step-button').textContent = t('recover_step.button');
  $('recover-step-button').hidden = false;
  show('recover-step');
  await createRecoveryPasskey();
}

async function createRecoveryPasskey() {
  if (!recoveryStep) return;
  say('');
  const button = $('recover-step-button');
  button.disabled = true;
  try {
    const answer = await client.recoverWithEmail(recoveryStep.options);
    const { claim } = recoveryStep;
    recoveryStep = null;
    recovering = false;
    current = answer.user;
    go('#account');
    if (claim) {
      const removed = await client.removeOtherPasskeys();
      othersAfterRecovery = 0;
      await loadAccount(t('status.claimed', { count: removed.passkeysRemoved }));
      return;
    }
    othersAfterRecovery = answer.otherPasskeys;
    await loadAccount(t('status.recovered_email', { name: answer.passkey.name }));
  } catch (error) {
    // Dismissed (or no passkey made): the same options can be tried again until they expire.
    if (error.code === 'cancelled' || error.code === 'timeout' || error.code === 'credential_already_registered') {
      button.textContent = t('recover_step.try_again');
    } else {
      recoveryStep = null;
      button.hidden = true;
    }
    fail(error);
  } finally {
    button.disabled = false;
  }
}

async function removeOthers() {
  const button = $('remove-others-button');
  button.disabled = true;
  try {
    const { passkeysRemoved, sessionsEnded } = await client.removeOtherPasskeys();
    othersAfterRecovery = 0;
    await loadAccount(t('status.removed_others', { count: passkeysRemoved }) + ' ' + t('status.revoked', { count: sessionsEnded }));
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

// MARK: the account's address

/** A verification mail's link (#verify-email=): what it does, and a button. Nothing is posted
 *  before the person presses it (under beforeVerification: remove, a verification by someone not
 *  signed in removes the account's passkeys). */
function verifyEmailLink(token) {
  verifyToken = token;
  claimToken = null;
  $('verify-email-confirm').hidden = false;
  $('verify-email-done').hidden = true;
  show('verify-email');
}

/** "Confirm my address": the link's token is posted. */
async function confirmAddress() {
  const token = verifyToken;
  if (!token) return;
  verifyToken = null;
  say('');
  show('loading');
  let answer;
  try {
    answer = await client.verifyEmail({ token });
  } catch (error) {
    $('verify-email-result').textContent = t('verify_email.failed');
    $('verify-email-before').hidden = true;
    await showVerifyResult();
    fail(error);
    return;
  }
  if (!current) { try { current = (await client.session())?.user ?? null; } catch { current = null; } }
  const before = answer.passkeysBefore || [];
  const claim = !!answer.recoveryToken && (before.length > 0 || answer.removed);
  if (pendingAddress && pendingAddress.toLowerCase() === answer.address.toLowerCase()) pendingAddress = null;
  if (!claim && current && current.username === answer.username) {
    go('#account');
    await loadAccount(t('status.email_verified', { address: answer.address }));
    return;
  }
  $('verify-email-result').textContent = t('verify_email.done', { address: answer.address, username: answer.username });
  $('verify-email-before').hidden = !claim;
  if (claim) {
    claimToken = answer.recoveryToken;
    $('verify-email-passkeys').replaceChildren(...before.map((passkey) => {
      const item = document.createElement('li');
      item.textContent = t('verify_email.passkey_line', { name: passkey.name, created: when(passkey.createdAt) });
      return item;
    }));
    $('verify-email-passkeys').hidden = before.length === 0;
    $('verify-email-before').querySelector('strong').textContent = t(answer.removed ? 'verify_email.removed_lead' : 'verify_email.before_lead');
    $('verify-email-before').querySelector('span').textContent = t(answer.removed ? 'verify_email.removed_text' : 'verify_email.before_text');
    $('verify-email-claim').textContent = t(answer.removed ? 'verify_email.create_own' : 'verify_email.claim');
  }
  await showVerifyResult();
  say(t('status.email_verified', { address: answer.address }), 'success');
}

async function showVerifyResult() {
  const signedIn = !!current;
  $('verify-email-confirm').hidden = true;
  $('verify-email-done').hidden = false;
  $('verify-email-continue').setAttribute('href', signedIn ? '#account' : '#signin');
  $('verify-email-continue').textContent = t(signedIn ? 'verify_email.continue' : 'verify_email.sign_in');
  show('verify-email');
}

/** "Remove them all and create my own passkey": the verification's recovery step, then the
 *  passkeys and sessions made before the address was verified are removed. */
async function claimAccount() {
  if (!claimToken) return;
  say('');
  const button = $('verify-email-claim');
  button.disabled = true;
  try {
    const options = await client.emailRecoveryOptions({ token: claimToken });
    claimToken = null;
    await startRecoveryStep(options, { claim: true });
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

async function loadEmail() {
  const section = $('email-section');
  let email = null;
  if (policy.mailEnabled) {
    try { email = await client.email(); } catch { email = null; }
  }
  section.hidden = !email || !email.mailEnabled;
  if (section.hidden) return;
  const has = !!email.address;
  if (pendingAddress && email.verified && email.address && email.address.toLowerCase() === pendingAddress.toLowerCase()) pendingAddress = null;
  $('email-state').hidden = !has;
  $('email-none').hidden = has;
  $('email-address').textContent = email.address || '';
  $('email-verified').textContent = t(email.verified ? 'email.verified' : 'email.not_verified');
  $('email-verified').classList.toggle('ok', email.verified);
  $('email-recovery').textContent = !has ? '' : !email.verified ? t('email.recovery_unverified') : t(email.recoveryOpen ? 'email.recovery_open' : 'email.recovery_closed');
  $('email-recovery').hidden = !has;
  const waiting = pendingAddress || (has && !email.verified ? email.address : null);
  $('email-code-form').hidden = !waiting;
  $('email-sent').textContent = waiting ? t('email.sent', { address: waiting }) : '';
  $('email-input-label').textContent = t(has ? 'email.change_address' : 'email.new_address');
  $('email-save-button').textContent = t(has ? 'email.change' : 'email.save');
  $('email-remove-button').hidden = !has;
}

async function saveEmail(event) {
  event.preventDefault();
  say('');
  const address = $('email-input').value.trim();
  if (!address) { say(t('status.give_email'), 'error'); $('email-input').focus(); return; }
  const button = $('email-save-button');
  button.disabled = true;
  try {
    const state = await client.setEmail(address);
    pendingAddress = state.pendingAddress || (state.verified ? null : state.address);
    $('email-input').value = '';
    await loadAccount(pendingAddress ? t('status.email_sent', { address: pendingAddress }) : t('status.email_verified', { address }));
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

async function confirmEmailCode(event) {
  event.preventDefault();
  say('');
  const button = $('email-code-button');
  button.disabled = true;
  try {
    const answer = await client.verifyEmail({ code: $('email-code').value });
    $('email-code').value = '';
    pendingAddress = null;
    await loadAccount(t('status.email_verified', { address: answer.address }));
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

async function removeEmail() {
  try {
    await client.removeEmail();
    pendingAddress = null;
    await loadAccount(t('status.email_removed'));
  } catch (error) {
    fail(error);
  }
}

// MARK: "this wasn't me"

/** A notice's undo link (#undo=): nothing happens before the person confirms. */
function undoLink(token) {
  undoToken = token;
  $('undo-confirm').hidden = false;
  $('undo-done').hidden = true;
  show('undo');
}

async function undoChange() {
  if (!undoToken) return;
  say('');
  const button = $('undo-button');
  button.disabled = true;
  try {
    const answer = await client.undoEmailChange(undoToken);
    undoToken = null;
    const lines = [];
    if (answer.passkeyRemoved) lines.push(t('undo.passkey_removed'));
    if (answer.addressRestored) lines.push(t('undo.address_restored', { address: answer.addressRestored }));
    // (The sessions of a removed passkey end with it: the count can be 0 with this one ended too.)
    lines.push(answer.sessionsEnded > 0 ? t('undo.sessions_ended', { count: answer.sessionsEnded }) : t('undo.signed_out_everywhere'));
    lines.push(t('undo.recovery_closed'));
    $('undo-list').replaceChildren(...lines.map((line) => { const item = document.createElement('li'); item.textContent = line; return item; }));
    $('undo-confirm').hidden = true;
    $('undo-done').hidden = false;
    // Every session of the account ended: this browser's too, when it was signed in to it.
    if (current && current.username === answer.username) {
      current = null;
      recovering = false;
      othersAfterRecovery = 0;
      pendingAddress = null;
    }
    say(t('status.undone', { username: answer.username }), 'success');
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

async function createRecoveryCodes(notice) {
  try {
    const codes = await client.newRecoveryCodes();
    $('recovery-codes-list').replaceChildren(...codes.map((code) => { const item = document.createElement('li'); item.textContent = code; return item; }));
    $('recovery-codes').hidden = false;
    $('recovery-codes-status').textContent = t('codes.unused', { count: codes.length });
    if (notice) say(notice, 'success');
  } catch (error) {
    fail(error);
  }
}

async function removePassword() {
  try {
    await client.removePassword();
    await loadAccount(t('status.password_off'));
  } catch (error) {
    fail(error);
  }
}

// MARK: sign-up and adding passkeys

/** What sign-up asks for: off, optional, required or username (the username is the address). */
const signUpMode = () => (policy.mailEnabled ? policy.signUp : 'off');

function applyEmailPolicy() {
  const mode = signUpMode();
  const username = $('signup-username');
  username.type = mode === 'username' ? 'email' : 'text';
  username.setAttribute('autocomplete', mode === 'username' ? 'email' : 'username');
  $('signup-username-label').textContent = t(mode === 'username' ? 'field.email' : 'field.username');
  $('signup-username-hint').textContent = t(mode === 'username' ? 'signup.username_is_email' : 'signup.username_hint');
  $('signup-email-field').hidden = mode !== 'optional' && mode !== 'required';
  $('signup-email-optional').hidden = mode !== 'optional';
  $('signup-email').required = mode === 'required';
  $('to-recover-email-item').hidden = !policy.mailEnabled;
}

async function signUp(event) {
  event.preventDefault();
  say('');
  const button = $('signup-button');
  const username = $('signup-username').value.trim();
  const mode = signUpMode();
  if (!username) { say(t(mode === 'username' ? 'status.give_email' : 'status.choose_username'), 'error'); $('signup-username').focus(); return; }
  const email = mode === 'username' ? username : mode === 'optional' || mode === 'required' ? $('signup-email').value.trim() : '';
  if (mode === 'required' && !email) { say(t('status.give_email'), 'error'); $('signup-email').focus(); return; }
  button.disabled = true;
  try {
    const answer = await client.signUp({ username, displayName: $('signup-display-name').value.trim(), email: email || undefined });
    current = answer.user;
    if (email) pendingAddress = email;
    if (await resumeAuthorization()) return;
    go('#account');
    await loadAccount(t('status.welcome', { name: answer.user.displayName }));
    await createRecoveryCodes(email
      ? t('status.welcome_codes_email', { name: answer.user.displayName, address: email })
      : t('status.welcome_codes', { name: answer.user.displayName }));
  } catch (error) {
    fail(error);
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
    const answer = await client.addPasskey({ replaces: replaces && replaces.id });
    recovering = false;
    await loadAccount(replaces ? t('status.replaced', { old: replaces.name, name: answer.passkey.name }) : t('status.added', { name: answer.passkey.name }));
  } catch (error) {
    fail(error);
  } finally {
    button.disabled = false;
  }
}

// MARK: account

// Dates in the browser's own variant of the page's language (en-GB, fr-CA), else the language.
const locale = (navigator.languages || []).find((tag) => tag.toLowerCase().split('-')[0] === client.language) || client.language;
const dateFormat = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short' });
const when = (iso) => (iso ? dateFormat.format(new Date(iso)) : t('passkey.never'));

async function loadAccount(notice) {
  let session;
  try {
    session = await client.session();
  } catch {
    session = null;
  }
  if (!session) {
    current = null;
    if (location.hash === '#account') replaceHash('#signin');
    return false;
  }
  current = session.user;
  const passkeys = await client.passkeys();
  renderPasskeys(passkeys, session.hasPassword);
  $('upgrade-banner').hidden = passkeys.length > 0 || recovering;
  $('recovery-banner').hidden = !recovering;
  // After a recovery by mail: the other passkeys may be the lost ones, or an attacker's.
  if (passkeys.length < 2) othersAfterRecovery = 0;
  $('remove-others-banner').hidden = othersAfterRecovery === 0;
  $('remove-others-text').textContent = t('remove_others.text', { count: passkeys.length - 1 });
  $('password-section').hidden = !session.hasPassword;
  $('password-remove-button').disabled = passkeys.length === 0;
  await loadSessions();
  await loadEmail();
  $('recovery-codes-status').textContent = session.recoveryCodesLeft > 0 ? t('codes.unused', { count: session.recoveryCodesLeft }) : t('codes.none');
  $('account-greeting').textContent = t('account.greeting', { displayName: session.user.displayName, username: session.user.username });
  show('account');
  if (notice) say(notice, 'success');
  return true;
}

function renderPasskeys(passkeys, hasPassword) {
  const list = $('passkey-list');
  list.replaceChildren();
  const only = passkeys.length === 1 && !hasPassword;
  for (const passkey of passkeys) {
    const item = $('passkey-item').content.firstElementChild.cloneNode(true);
    translate(item);
    item.dataset.id = passkey.id;
    item.querySelector('.passkey-name').textContent = passkey.name;
    item.querySelector('.passkey-provider').textContent = passkey.provider && passkey.provider !== passkey.name ? passkey.provider : '';
    item.querySelector('.passkey-sync').textContent = t(passkey.backedUp ? 'passkey.synced' : passkey.backupEligible ? 'passkey.not_synced_yet' : 'passkey.device_only');
    item.querySelector('.passkey-created').textContent = when(passkey.createdAt);
    item.querySelector('.passkey-used').textContent = when(passkey.lastUsedAt);
    renderExtensions(item, passkey);

    const form = item.querySelector('.rename-form');
    const input = item.querySelector('.rename-input');
    const inputID = 'rename-' + passkey.id;
    input.id = inputID;
    form.querySelector('label').setAttribute('for', inputID);
    form.querySelector('label').textContent = t('passkey.new_name_for', { name: passkey.name });
    const rename = item.querySelector('.rename-button');
    rename.setAttribute('aria-label', t('passkey.rename_named', { name: passkey.name }));
    rename.addEventListener('click', () => { form.hidden = false; input.value = passkey.name; input.focus(); input.select(); });
    item.querySelector('.rename-cancel').addEventListener('click', () => { form.hidden = true; rename.focus(); });
    form.addEventListener('submit', (event) => renamePasskey(event, passkey, input.value));

    const replace = item.querySelector('.replace-button');
    replace.setAttribute('aria-label', t('passkey.replace_named', { name: passkey.name }));
    replace.addEventListener('click', () => addPasskey(replace, passkey));

    const remove = item.querySelector('.delete-button');
    remove.setAttribute('aria-label', t('passkey.delete_named', { name: passkey.name }));
    if (only) {
      remove.disabled = true;
      remove.title = t('passkey.delete_disabled');
    }
    remove.addEventListener('click', () => confirmDelete(passkey));
    list.append(item);
  }
}

/** What the passkey's extensions told the server at registration (null: not reported). */
function renderExtensions(item, passkey) {
  // credProps' rk: a discoverable passkey signs in without the username typed first.
  const discoverable = item.querySelector('.passkey-discoverable');
  discoverable.hidden = typeof passkey.discoverable !== 'boolean';
  if (!discoverable.hidden) discoverable.textContent = t(passkey.discoverable ? 'passkey.discoverable' : 'passkey.not_discoverable');
  const capabilities = [];
  if (passkey.prf === true) capabilities.push(t('passkey.prf'));
  if (passkey.largeBlob === true) capabilities.push(t('passkey.large_blob'));
  // credProtect 1 is every passkey's default: only the stronger levels are worth a line.
  if (passkey.credProtect === 2 || passkey.credProtect === 3) capabilities.push(t('passkey.cred_protect.' + passkey.credProtect));
  if (Number.isInteger(passkey.minPinLength)) capabilities.push(t('passkey.min_pin_length', { length: passkey.minPinLength }));
  item.querySelector('.passkey-capabilities').textContent = capabilities.join(' · ');
  item.querySelector('.passkey-capabilities').hidden = capabilities.length === 0;
  item.querySelector('.passkey-capabilities-label').hidden = capabilities.length === 0;
}

async function renamePasskey(event, passkey, name) {
  event.preventDefault();
  try {
    const updated = await client.renamePasskey(passkey.id, name);
    await loadAccount(t('status.renamed', { name: updated.name }));
  } catch (error) {
    fail(error);
  }
}

function confirmDelete(passkey) {
  const dialog = $('confirm-delete');
  $('confirm-text').textContent = t('confirm.text', { name: passkey.name });
  dialog.returnValue = '';
  dialog.onclose = async () => {
    if (dialog.returnValue !== 'delete') return;
    try {
      await client.deletePasskey(passkey.id);
      await loadAccount(t('status.deleted', { name: passkey.name }));
    } catch (error) {
      fail(error);
    }
  };
  dialog.showModal();
  $('confirm-cancel').focus();
}

async function loadSessions() {
  const sessions = await client.sessions();
  $('session-list').replaceChildren(...sessions.map((session) => {
    const item = document.createElement('li');
    const method = client.hasMessage('sessions.method.' + session.method) ? session.method : 'unknown';
    const seen = session.lastSeenAt && !session.current;
    item.textContent = t(seen ? 'sessions.line_seen' : 'sessions.line', {
      device: session.current ? t('sessions.this_browser', { device: session.device }) : session.device,
      method: t('sessions.method.' + method),
      created: when(session.createdAt),
      seen: seen ? when(session.lastSeenAt) : '',
    });
    if (session.ipAddress) item.title = session.ipAddress;
    return item;
  }));
  $('revoke-others-button').disabled = sessions.length < 2;
}

async function revokeOthers() {
  try {
    const revoked = await client.revokeOtherSessions();
    await loadAccount(t('status.revoked', { count: revoked }));
  } catch (error) {
    fail(error);
  }
}

async function signOut() {
  try { await client.signOut(); } catch { /* signed out either way */ }
  current = null;
  recovering = false;
  othersAfterRecovery = 0;
  pendingAddress = null;
  stopAutomaticCreate();
  $('recovery-codes').hidden = true;
  $('recovery-codes-list').replaceChildren();
  $('signin-username').value = '';
  go('#signin');
  say(t('status.signed_out'), 'success');
  show('signin');
  startAutoFill();
}

// MARK: start

$('signin-form').addEventListener('submit', signInWithButton);
$('signup-form').addEventListener('submit', signUp);
$('add-passkey-button').addEventListener('click', () => addPasskey());
$('upgrade-button').addEventListener('click', () => addPasskey($('upgrade-button')));
$('recovery-passkey-button').addEventListener('click', () => addPasskey($('recovery-passkey-button')));
$('password-form').addEventListener('submit', passwordSignIn);
$('recover-form').addEventListener('submit', recoverySignIn);
$('recovery-codes-button').addEventListener('click', () => createRecoveryCodes(t('status.new_codes')));
$('password-remove-button').addEventListener('click', removePassword);
$('signout-button').addEventListener('click', signOut);
$('revoke-others-button').addEventListener('click', revokeOthers);
$('recover-email-form').addEventListener('submit', requestRecoveryMail);
$('recover-email-code-form').addEventListener('submit', enterRecoveryCode);
$('recover-step-button').addEventListener('click', () => (recoveryStep ? createRecoveryPasskey() : openRecoveryLink()));
$('recover-step-cancel').addEventListener('click', () => { say(''); leaveMailLink(); });
$('remove-others-button').addEventListener('click', removeOthers);
$('verify-email-confirm-button').addEventListener('click', confirmAddress);
$('verify-email-cancel').addEventListener('click', () => { say(''); leaveMailLink(); });
$('verify-email-claim').addEventListener('click', claimAccount);
$('email-form').addEventListener('submit', saveEmail);
$('email-code-form').addEventListener('submit', confirmEmailCode);
$('email-remove-button').addEventListener('click', removeEmail);
$('undo-button').addEventListener('click', undoChange);
$('consent-allow').addEventListener('click', () => decideAuthorization(true));
$('consent-deny').addEventListener('click', () => decideAuthorization(false));
window.addEventListener('hashchange', navigated);
window.addEventListener('popstate', navigated);

await client.ready;
document.documentElement.lang = client.language;
translate(document);
if (!Passkeyd.isSupported()) say(t('app.no_webauthn'), 'error');
try { policy = await client.emailPolicy(); } catch { /* a server without mail routes: no mail */ }
applyEmailPolicy();
route();
