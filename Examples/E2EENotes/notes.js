// End-to-end-encrypted notes on passkeyd.js: the key-wrapping pattern of docs/extensions.md.
//
// - One random data key per account (AES-256-GCM) encrypts the note.
// - Each passkey's PRF key (passkeyd.js derives it from the passkey's PRF output and the context
//   "notes") wraps that data key once; the server keeps the wrapped copies, one per passkey.
// - Signing in with a passkey gives its PRF key, which unwraps the data key, which decrypts.
// - Another passkey is enrolled by wrapping the same data key with its PRF key.
// - Removing a passkey removes its wrapped copy (the server refuses to remove the last one).
// The server sees ciphertext, wrapped keys and passkey ids: never a key or a note.
import { Passkeyd, encrypt, decrypt, wrapKey, unwrapKey } from '/passkeyd.js';

const CONTEXT = 'notes';
const $ = (id) => document.getElementById(id);
const client = new Passkeyd({ onReauthenticate: () => true });

let user = null;     // {id, username, …} of the session
let passkeyId = null; // the passkey that unlocked
let prfKey = null;   // its PRF key (non-extractable)
let dataKey = null;  // the account's data key (non-extractable)

function say(text, error = false) {
  $('status').textContent = text;
  $('status').className = error ? 'error' : '';
}

function show(view) {
  for (const name of ['signed-out', 'locked', 'unlocked']) $(name).hidden = name !== view;
  for (const element of document.querySelectorAll('.who')) element.textContent = user ? user.username : '';
  $('passkey-id').textContent = passkeyId || '';
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  const json = await response.json();
  if (!response.ok) throw new Error(json.error ? json.error.message : `HTTP ${response.status}`);
  return json;
}

/** Why a passkey gave no key, for the person (the app's fallback would go here). */
function noKey(prf) {
  const why = {
    unsupported: 'this passkey or browser has no PRF extension, so it cannot encrypt',
    'not-evaluated': 'the browser did not evaluate the PRF extension this time',
    'not-offered': 'the server does not offer the PRF extension (PASSKEYD_PRF)',
  }[prf.reason] || prf.reason;
  return `Signed in, but no encryption key: ${why}.`;
}

/** After a PRF sign-in or sign-up: unwrap the data key (or make the account's first one). */
async function unlock(answer, { creating = false } = {}) {
  user = answer.user;
  passkeyId = answer.prf.passkeyId; // the passkey that signed in (its credential ID)
  if (!answer.prf.key) { show('locked'); say(noKey(answer.prf), true); return; }
  prfKey = answer.prf.key;
  const vault = await api('GET', '/notes');
  const wrapped = vault.keys[passkeyId];
  // The passkey's id is bound to its wrapped key: a wrapped key moved to another passkey's row
  // does not unwrap.
  const binding = `${vault.userId}/${passkeyId}`;
  if (wrapped) {
    dataKey = await unwrapKey(prfKey, wrapped, { additionalData: binding });
  } else if (creating && Object.keys(vault.keys).length === 0) {
    const fresh = await crypto.subtle.generateKey({ name: 'AES-GCM', length: 256 }, true, ['encrypt', 'decrypt']);
    await api('PUT', '/keys/' + encodeURIComponent(passkeyId), { wrapped: await wrapKey(prfKey, fresh, { additionalData: binding }) });
    dataKey = await unwrapKey(prfKey, await wrapKey(prfKey, fresh), {}); // a non-extractable copy
  } else {
    show('locked');
    say('This passkey does not open these notes yet: unlock with a passkey that does, then add this one.', true);
    return;
  }
  $('note').value = vault.note ? await decrypt(dataKey, vault.note, { additionalData: vault.userId, text: true }) : '';
  show('unlocked');
  say('Unlocked.');
  await listPasskeys();
}

/** The account's passkeys, which of them open the notes, and a Remove button for each but the
 *  one that unlocked (it holds this page's way in; unlock with another to remove it). */
async function listPasskeys() {
  const [passkeys, vault] = await Promise.all([client.passkeys(), api('GET', '/notes')]);
  $('passkeys').replaceChildren(...passkeys.map((passkey) => {
    const item = document.createElement('li');
    item.dataset.id = passkey.id;
    const opens = passkey.id in vault.keys;
    item.textContent = `${passkey.name}: ${opens ? 'opens these notes' : 'does not open these notes'}`;
    if (passkey.id === passkeyId) {
      item.append(' (unlocked with it)');
    } else {
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.className = 'remove';
      remove.textContent = 'Remove';
      remove.addEventListener('click', () => run(() => removePasskey(passkey)));
      item.append(' ', remove);
    }
    return item;
  }));
}

/** Removes a passkey from the account; the server forgets its wrapped data key with it. */
async function removePasskey(passkey) {
  await client.deletePasskey(passkey.id);
  await listPasskeys();
  say(`Removed passkey ${passkey.id}: it no longer signs in or opens these notes.`);
}

async function signUp(username) {
  const answer = await client.signUp({ username, prf: { context: CONTEXT } });
  await unlock(answer, { creating: true });
}

async function signIn(username) {
  await unlock(await client.signIn({ username, prf: { context: CONTEXT } }));
}

async function save() {
  const vault = await api('GET', '/notes');
  await api('PUT', '/notes', { note: await encrypt(dataKey, $('note').value, { additionalData: vault.userId }) });
  say('Saved: the server holds only the ciphertext.');
}

/** Another passkey for the account that opens the same notes: the same data key, wrapped with
 *  the new passkey's PRF key. Needs the data key in the clear for a moment (extractable). */
async function enroll() {
  const vault = await api('GET', '/notes');
  const extractable = await unwrapKey(prfKey, vault.keys[passkeyId], { additionalData: `${vault.userId}/${passkeyId}`, extractable: true });
  const answer = await client.addPasskey({ prf: { context: CONTEXT } });
  if (!answer.prf.key) { say(`Added the passkey, but it cannot open the notes: ${noKey(answer.prf)}`, true); return; }
  const id = answer.prf.passkeyId;
  await api('PUT', '/keys/' + encodeURIComponent(id), { wrapped: await wrapKey(answer.prf.key, extractable, { additionalData: `${vault.userId}/${id}` }) });
  await listPasskeys();
  say(`Added passkey ${id}: it opens these notes too.`);
}

async function signOut() {
  try { await client.signOut(); } catch { /* signed out either way */ }
  user = passkeyId = prfKey = dataKey = null;
  $('note').value = '';
  show('signed-out');
  say('Signed out.');
}

const run = (work) => work().catch((error) => say(error.message, true));
$('account-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const username = $('username').value.trim();
  run(() => (event.submitter && event.submitter.value === 'sign-up' ? signUp(username) : signIn(username)));
});
$('unlock').addEventListener('click', () => run(() => signIn(user.username)));
$('save').addEventListener('click', () => run(save));
$('enroll').addEventListener('click', () => run(enroll));
for (const button of document.querySelectorAll('.sign-out')) button.addEventListener('click', () => run(signOut));

// A session from before (another tab, a reload) is signed in but locked: the key lives only in
// memory, so a passkey sign-in unlocks again.
await client.ready;
const session = await client.session().catch(() => null);
user = session ? session.user : null;
show(user ? 'locked' : 'signed-out');
document.body.dataset.ready = 'true';
