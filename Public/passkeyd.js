// passkeyd.js: the web client of passkeyd. One ES module, no dependencies, no build step.
//
//   import { Passkeyd } from 'https://login.example.com/passkeyd.js';
//   const client = new Passkeyd();                 // talks to the server it was loaded from
//   const { user } = await client.signUp({ username: 'ada', displayName: 'Ada Lovelace' });
//   client.autoFill(document.querySelector('input[autocomplete~=webauthn]')).then(signedIn);
//
// Every call of passkeyd's browser API and every passkey ceremony lives here (the web UI in
// app.js is built on it). Errors are one type, PasskeydError, with a stable `code` and a
// sentence in the person's language from the catalogues in i18n/. The full API: docs/web.md.

/** The languages with a message catalogue (`i18n/<language>.json` next to this module). */
export const LANGUAGES = Object.freeze(['en', 'fr']);

/** Built-in English for the client's own error codes: what a person reads when the catalogue
 *  cannot be fetched (the server is unreachable). The same sentences as i18n/en.json. */
export const FALLBACK_MESSAGES = Object.freeze({
  'error.cancelled': 'The passkey request was cancelled.',
  'error.timeout': 'The passkey request timed out, or there is no passkey for this account on this device.',
  'error.network': 'The server cannot be reached. Check the connection and try again.',
  'error.unsupported': 'This device or browser cannot use passkeys here.',
  'error.invalid_response': "The server's answer could not be read.",
  'error.unknown': 'Something went wrong. Try again.',
  'error.decryption_failed': "The data could not be decrypted: another passkey's key, other additional data, or it was changed.",
  'error.not_text': 'The data was decrypted, but it is not text (not UTF-8): open it as bytes.',
});

/** Server codes the client reports under a code of its own. */
const CLIENT_CODES = { credential_not_found: 'passkey_removed' };

// MARK: Errors

/**
 * Every failure of the client.
 *
 * - `code`: stable. The server's `error.code` (`username_taken`, `rate_limited`,
 *   `authenticator_not_allowed`, …; `credential_not_found` is reported as `passkey_removed`), or
 *   the client's: `cancelled` (the person dismissed the passkey sheet, or another sign-in took
 *   over), `timeout` (the browser gave up waiting: timed out, or no passkey on this device),
 *   `credential_already_registered` (this device already holds a passkey of the account),
 *   `network`, `unsupported`, `invalid_response`, `unknown`; from the module's encryption
 *   functions, `decryption_failed` and `not_text`.
 * - `message`: a sentence for the person in the client's language (the module's functions,
 *   which know no client, use the page's languages: see moduleError).
 * - `status`: the HTTP status (0 when the server did not answer).
 * - `retryAfter`: seconds to wait (429 and 503), else null.
 * - `serverMessage`: the server's own (English) message, for logs.
 */
export class PasskeydError extends Error {
  constructor(code, message, { status = 0, retryAfter = null, serverMessage = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'PasskeydError';
    this.code = code;
    this.status = status;
    this.retryAfter = retryAfter;
    this.serverMessage = serverMessage;
  }
}

// MARK: Base64url (RFC 4648 §5), without atob: '-' and '_' are its letters, padding optional

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const DECODE = new Int8Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DECODE[ALPHABET.charCodeAt(i)] = i;

/** The bytes of a base64url string (unpadded or padded); throws a TypeError on any other
 *  character ('+', '/', spaces) or an impossible length. */
export function fromBase64url(text) {
  if (typeof text !== 'string') throw new TypeError('base64url: not a string');
  const body = text.replace(/={1,2}$/, '');
  if (body.length % 4 === 1 || (body.length !== text.length && text.length % 4 !== 0)) {
    throw new TypeError('base64url: impossible length');
  }
  const bytes = new Uint8Array(Math.floor((body.length * 3) / 4));
  let bits = 0, value = 0, out = 0;
  for (let i = 0; i < body.length; i++) {
    const code = body.charCodeAt(i);
    const digit = code < 128 ? DECODE[code] : -1;
    if (digit < 0) throw new TypeError('base64url: invalid character');
    value = (value << 6) | digit;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes[out++] = (value >> bits) & 0xff;
    }
  }
  // The bits left over must be zero: "AB" and "AA" would otherwise both be one zero byte.
  if (value & ((1 << bits) - 1)) throw new TypeError('base64url: not canonical');
  return bytes.buffer;
}

/** Unpadded base64url of an ArrayBuffer or a typed array. */
export function toBase64url(data) {
  const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  let text = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    text += ALPHABET[n >> 18] + ALPHABET[(n >> 12) & 63] + ALPHABET[(n >> 6) & 63] + ALPHABET[n & 63];
  }
  if (i < bytes.length) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8);
    text += ALPHABET[n >> 18] + ALPHABET[(n >> 12) & 63];
    if (i + 1 < bytes.length) text += ALPHABET[(n >> 6) & 63];
  }
  return text;
}

// MARK: WebAuthn Level 3 JSON, with a fallback for browsers that lack it

const descriptor = (d) => ({ ...d, id: fromBase64url(d.id) });

// passkeyd answers a browser where the guide's atob-decoding client signed in with standard
// base64 creation options (docs/web.md): '+' and '/' become base64url's '-' and '_' again.
const urlAlphabet = (text) => (typeof text === 'string' ? text.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '') : text);
const urlDescriptor = (d) => ({ ...d, id: urlAlphabet(d.id) });

/** PublicKeyCredentialCreationOptionsJSON → options for navigator.credentials.create. */
export function creationOptionsFromJSON(answer) {
  const json = { ...answer, challenge: urlAlphabet(answer.challenge) };
  if (answer.user) json.user = { ...answer.user, id: urlAlphabet(answer.user.id) };
  if (answer.excludeCredentials) json.excludeCredentials = answer.excludeCredentials.map(urlDescriptor);
  if (typeof PublicKeyCredential.parseCreationOptionsFromJSON === 'function') {
    return withExtensions(PublicKeyCredential.parseCreationOptionsFromJSON(json), json);
  }
  const options = { ...json, challenge: fromBase64url(json.challenge), user: { ...json.user, id: fromBase64url(json.user.id) } };
  if (json.excludeCredentials) options.excludeCredentials = json.excludeCredentials.map(descriptor);
  if (json.extensions) options.extensions = extensionsFromJSON(json.extensions);
  return options;
}

/** PublicKeyCredentialRequestOptionsJSON → options for navigator.credentials.get. */
export function requestOptionsFromJSON(json) {
  if (typeof PublicKeyCredential.parseRequestOptionsFromJSON === 'function') {
    return withExtensions(PublicKeyCredential.parseRequestOptionsFromJSON(json), json);
  }
  const options = { ...json, challenge: fromBase64url(json.challenge) };
  if (json.allowCredentials) options.allowCredentials = json.allowCredentials.map(descriptor);
  if (json.extensions) options.extensions = extensionsFromJSON(json.extensions);
  return options;
}

// Extension inputs in the Level 3 JSON encodings (AuthenticationExtensionsClientInputsJSON):
// the byte members are base64url there and BufferSources for the browser.
const prfValuesFromJSON = (values) => {
  const out = { first: fromBase64url(values.first) };
  if (values.second !== undefined) out.second = fromBase64url(values.second);
  return out;
};

/** AuthenticationExtensionsClientInputsJSON → the `extensions` of create()/get(): `prf.eval`,
 *  every `prf.evalByCredential` entry and `largeBlob.write` become bytes; the rest is copied. */
export function extensionsFromJSON(json) {
  const extensions = { ...json };
  if (json.prf && typeof json.prf === 'object') {
    const prf = { ...json.prf };
    if (prf.eval) prf.eval = prfValuesFromJSON(prf.eval);
    if (prf.evalByCredential) {
      prf.evalByCredential = Object.fromEntries(Object.entries(prf.evalByCredential).map(([id, values]) => [id, prfValuesFromJSON(values)]));
    }
    extensions.prf = prf;
  }
  if (json.largeBlob && typeof json.largeBlob === 'object' && typeof json.largeBlob.write === 'string') {
    extensions.largeBlob = { ...json.largeBlob, write: fromBase64url(json.largeBlob.write) };
  }
  return extensions;
}

// A browser whose parse…FromJSON predates an extension's JSON encoding drops that member (or
// leaves it a string): the extensions are always converted here, the same way on every browser.
const withExtensions = (options, json) => {
  if (json.extensions) options.extensions = extensionsFromJSON(json.extensions);
  return options;
};

// Client extension results may hold bytes (prf): base64url them, as toJSON() does.
const jsonValue = (value) => {
  if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return toBase64url(value);
  if (Array.isArray(value)) return value.map(jsonValue);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonValue(v)]));
  return value;
};

/**
 * `json` (RegistrationResponseJSON or AuthenticationResponseJSON) without what must never
 * reach the server: `prf.results` (the PRF output is the key material of the app's encryption;
 * passkeyd refuses it with 400 `prf_output_posted`) and `largeBlob.blob` (the app's data on
 * the passkey). `prf.enabled` and `largeBlob.supported` / `written` stay. Returns a copy.
 */
export function withoutSecrets(json) {
  const results = json && json.clientExtensionResults;
  if (!results || typeof results !== 'object') return json;
  const cleaned = { ...results };
  if (cleaned.prf && typeof cleaned.prf === 'object') {
    cleaned.prf = { ...cleaned.prf };
    delete cleaned.prf.results;
  }
  if (cleaned.largeBlob && typeof cleaned.largeBlob === 'object') {
    cleaned.largeBlob = { ...cleaned.largeBlob };
    delete cleaned.largeBlob.blob;
  }
  return { ...json, clientExtensionResults: cleaned };
}

/** A PublicKeyCredential → RegistrationResponseJSON or AuthenticationResponseJSON. */
export function credentialToJSON(credential) {
  if (typeof credential.toJSON === 'function') {
    try { return credential.toJSON(); } catch { /* encode it by hand below */ }
  }
  const response = credential.response;
  const call = (name) => (typeof response[name] === 'function' ? response[name]() : undefined);
  const json = {
    id: credential.id,
    rawId: toBase64url(credential.rawId),
    type: credential.type,
    authenticatorAttachment: credential.authenticatorAttachment ?? null,
    clientExtensionResults: jsonValue(credential.getClientExtensionResults ? credential.getClientExtensionResults() : {}),
    response: { clientDataJSON: toBase64url(response.clientDataJSON) },
  };
  if (response.attestationObject) {
    json.response.attestationObject = toBase64url(response.attestationObject);
    json.response.transports = call('getTransports') ?? [];
    const authenticatorData = call('getAuthenticatorData');
    if (authenticatorData) json.response.authenticatorData = toBase64url(authenticatorData);
    const publicKey = call('getPublicKey');
    if (publicKey) json.response.publicKey = toBase64url(publicKey);
    const algorithm = call('getPublicKeyAlgorithm');
    if (algorithm !== undefined) json.response.publicKeyAlgorithm = algorithm;
  } else {
    json.response.authenticatorData = toBase64url(response.authenticatorData);
    json.response.signature = toBase64url(response.signature);
    json.response.userHandle = response.userHandle ? toBase64url(response.userHandle) : null;
  }
  return json;
}

// MARK: Keys from a passkey (the PRF extension) and the encryption helper

/** HKDF's salt for every key passkeyd.js and PasskeyClient derive: version 1 of the scheme. */
export const PRF_KEY_SALT = 'passkeyd-prf-v1';
/** The context of `prf: true` (an app with several kinds of data names each: `{context: 'notes'}`). */
export const DEFAULT_PRF_CONTEXT = 'default';

const utf8 = new TextEncoder();
const bytesOf = (data) => {
  if (typeof data === 'string') return utf8.encode(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError('expected a string, an ArrayBuffer or a typed array');
};

const clientExtensionResults = (credential) => {
  try { return (credential.getClientExtensionResults && credential.getClientExtensionResults()) || {}; } catch { return {}; }
};

const subtle = () => (typeof crypto !== 'undefined' && crypto.subtle ? crypto.subtle : null);

function checkContext(context) {
  const length = typeof context === 'string' ? utf8.encode(context).length : 0;
  if (length < 1 || length > 256) throw new TypeError('the key context is a string of 1 to 256 UTF-8 bytes');
}

/**
 * The AES-256-GCM key of a PRF output for `context`:
 * HKDF-SHA256(ikm = `prfOutput`, salt = "passkeyd-prf-v1", info = `context`), 32 bytes. The
 * Swift PasskeyClient derives the same bytes. The key is non-extractable unless a test asks
 * (`extractable: true`); it encrypts, decrypts, wraps and unwraps.
 * @param {ArrayBuffer|ArrayBufferView} prfOutput `results.first` of the prf extension
 * @param {string} context the app's name for what the key protects (1 to 256 UTF-8 bytes)
 * @returns {Promise<CryptoKey>}
 */
export async function deriveKey(prfOutput, context, { extractable = false } = {}) {
  checkContext(context);
  const webCrypto = subtle();
  if (!webCrypto) throw await moduleError('unsupported');
  const material = await webCrypto.importKey('raw', bytesOf(prfOutput), 'HKDF', false, ['deriveKey']);
  return webCrypto.deriveKey(
    { name: 'HKDF', hash: 'SHA-256', salt: utf8.encode(PRF_KEY_SALT), info: utf8.encode(context) },
    material,
    { name: 'AES-GCM', length: 256 },
    extractable,
    ['encrypt', 'decrypt', 'wrapKey', 'unwrapKey'],
  );
}

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const gcm = (nonce, additionalData) => {
  const algorithm = { name: 'AES-GCM', iv: nonce, tagLength: TAG_BYTES * 8 };
  if (additionalData !== undefined && additionalData !== null) algorithm.additionalData = bytesOf(additionalData);
  return algorithm;
};
const sealed = (nonce, body) => {
  const out = new Uint8Array(NONCE_BYTES + body.byteLength);
  out.set(nonce, 0);
  out.set(new Uint8Array(body), NONCE_BYTES);
  return toBase64url(out);
};
const opened = async (box) => {
  let bytes;
  try { bytes = typeof box === 'string' ? new Uint8Array(fromBase64url(box)) : bytesOf(box); } catch { bytes = new Uint8Array(0); }
  if (bytes.length < NONCE_BYTES + TAG_BYTES) throw await moduleError('decryption_failed');
  return { nonce: bytes.subarray(0, NONCE_BYTES), body: bytes.subarray(NONCE_BYTES) };
};

/**
 * Encrypts with AES-256-GCM: a fresh random 12-byte nonce, then the ciphertext and its 16-byte
 * tag, as unpadded base64url (the format PasskeyClient reads too).
 * @param {CryptoKey} key from a `prf` answer or deriveKey()
 * @param {string|ArrayBuffer|ArrayBufferView} data a string is encrypted as UTF-8
 * @param {{additionalData?: string|ArrayBuffer|ArrayBufferView}} [options] bound to the
 *   ciphertext, not in it (e.g. the record's id, so it cannot be swapped for another's)
 * @returns {Promise<string>} base64url of nonce ‖ ciphertext ‖ tag
 */
export async function encrypt(key, data, { additionalData } = {}) {
  const nonce = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
  return sealed(nonce, await crypto.subtle.encrypt(gcm(nonce, additionalData), key, bytesOf(data)));
}

/**
 * Decrypts what encrypt() made. Rejects with PasskeydError `decryption_failed` for another key,
 * other additional data, or changed bytes (GCM's tag), never with garbage.
 * @param {CryptoKey} key
 * @param {string|ArrayBuffer|ArrayBufferView} box base64url text or the bytes
 * @param {{additionalData?: string|ArrayBuffer|ArrayBufferView, text?: boolean}} [options]
 *   `text: true`: resolve with the UTF-8 string. GCM opened the box, so the bytes are the
 *   ones encrypted: bytes that are not UTF-8 were not text (the app encrypted binary data),
 *   and that rejects with PasskeydError `not_text` (decrypt without `text` to get them).
 * @returns {Promise<Uint8Array|string>}
 */
export async function decrypt(key, box, { additionalData, text = false } = {}) {
  const { nonce, body } = await opened(box);
  let plain;
  try {
    plain = new Uint8Array(await crypto.subtle.decrypt(gcm(nonce, additionalData), key, body));
  } catch (error) {
    throw await moduleError('decryption_failed', error);
  }
  if (!text) return plain;
  try { return new TextDecoder('utf-8', { fatal: true }).decode(plain); } catch (error) { throw await moduleError('not_text', error); }
}

/**
 * Wraps an AES key (e.g. one data key per account, see docs/extensions.md) with `key`: the same
 * format as encrypt() over the data key's raw bytes. `dataKey` must be extractable.
 * @returns {Promise<string>}
 */
export async function wrapKey(key, dataKey, { additionalData } = {}) {
  const nonce = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
  return sealed(nonce, await crypto.subtle.wrapKey('raw', dataKey, key, gcm(nonce, additionalData)));
}

/**
 * The AES-GCM key wrapKey() wrapped. Non-extractable unless `extractable: true` (needed only to
 * wrap it again, for another passkey). Rejects with `decryption_failed` like decrypt().
 * @returns {Promise<CryptoKey>}
 */
export async function unwrapKey(key, wrapped, { additionalData, extractable = false } = {}) {
  const { nonce, body } = await opened(wrapped);
  try {
    return await crypto.subtle.unwrapKey('raw', body, key, gcm(nonce, additionalData), { name: 'AES-GCM' }, extractable, ['encrypt', 'decrypt']);
  } catch (error) {
    throw await moduleError('decryption_failed', error);
  }
}

/**
 * The `prf` member of an answer: `{key, context}` from a credential's extension results, or
 * `{key: null, reason}`:
 * - `not-offered`: the server put no PRF input in the options (its configuration turns PRF off);
 * - `unsupported`: the browser does not know the extension, the passkey has no PRF (`enabled:
 *   false`, or the server's stored fact is not `true`), or there is no Web Crypto;
 * - `not-evaluated`: the passkey has PRF (the server's stored fact) but the browser gave no
 *   output this time;
 * - `invalid-output`: an output that is not 32 bytes.
 * `requested`: whether the options asked for PRF; `hasPRF`: the server's stored fact about this
 * passkey (the new passkey's `prf`, a sign-in answer's `prfEnabled`; undefined when unknown).
 * `passkeyId` (the credential ID, base64url) names the passkey the answer is about.
 */
async function prfOutcome(credential, context, requested, hasPRF) {
  const passkeyId = credential.id;
  if (!requested) return { key: null, reason: 'not-offered', passkeyId };
  if (!subtle()) return { key: null, reason: 'unsupported', passkeyId };
  const prf = clientExtensionResults(credential).prf;
  const first = prf && prf.results && prf.results.first;
  if (!first) {
    // Browsers answer `prf: {}` for a passkey without PRF too: only the server's fact tells a
    // passkey worth another prompt from one that will never give a key.
    const evaluable = !!prf && prf.enabled !== false && hasPRF === true;
    return { key: null, reason: evaluable ? 'not-evaluated' : 'unsupported', passkeyId };
  }
  const output = bytesOf(first);
  if (output.length !== 32) return { key: null, reason: 'invalid-output', passkeyId };
  return { key: await deriveKey(output, context), context, passkeyId };
}

// MARK: Signals (WebAuthn L3 §5.1.10): where the browser has them; they never fail a flow

/** Calls `PublicKeyCredential[name](details)` when the browser has it; true when it did.
 *  Never throws, and never waits more than a second. */
export async function signal(name, details) {
  try {
    if (typeof PublicKeyCredential === 'undefined' || typeof PublicKeyCredential[name] !== 'function') return false;
    await Promise.race([PublicKeyCredential[name](details), new Promise((resolve) => setTimeout(resolve, 1000))]);
    return true;
  } catch {
    return false;
  }
}

// MARK: Languages

/** The first of `preferred` (language tags such as "fr-CA") there is a catalogue for, else "en". */
export function pickLanguage(preferred) {
  for (const tag of [].concat(preferred ?? [])) {
    const primary = String(tag).toLowerCase().split(/[-_]/)[0];
    if (LANGUAGES.includes(primary)) return primary;
  }
  return 'en';
}

/**
 * The messages in `language`: `i18n/<language>.json` under `base`, over `i18n/en.json`, over
 * FALLBACK_MESSAGES. Never rejects (a catalogue that cannot be fetched is left out).
 */
async function loadMessages(base, language) {
  const load = async (name) => {
    const url = new URL(`i18n/${name}.json`, base);
    const init = { credentials: 'omit' };
    if (typeof AbortSignal.timeout === 'function') init.signal = AbortSignal.timeout(5000);
    const response = await fetch(url, init);
    if (!response.ok) throw new Error(`${url}: ${response.status}`);
    const json = await response.json();
    return json && typeof json === 'object' ? json : {};
  };
  const [english, local] = await Promise.allSettled([load('en'), language === 'en' ? {} : load(language)]);
  return {
    ...FALLBACK_MESSAGES,
    ...(english.status === 'fulfilled' ? english.value : {}),
    ...(local.status === 'fulfilled' ? local.value : {}),
  };
}

let moduleMessages = null; // the page's catalogue (a promise), from the first error that needed it

/**
 * A PasskeydError of the module's own functions (deriveKey, decrypt, unwrapKey), which know no
 * client. Its message is in the page's languages (`navigator.languages`, as for a client made
 * without `lang`), from the catalogue next to this module, fetched once, when first needed; the
 * built-in English when it cannot be. A client in another language says the same with
 * `client.message('error.' + error.code)`.
 */
async function moduleError(code, cause) {
  if (!moduleMessages) {
    const preferred = typeof navigator !== 'undefined' ? navigator.languages ?? [navigator.language] : [];
    moduleMessages = loadMessages(new URL('.', import.meta.url).href, pickLanguage(preferred));
  }
  const messages = await moduleMessages;
  return new PasskeydError(code, messages['error.' + code] ?? messages['error.unknown'], cause === undefined ? {} : { cause });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const compact = (object) => Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined && v !== null && v !== ''));

/** The key context of a `prf` option (`true`: the default one), or null without one. */
function prfContext(prf) {
  if (prf === undefined || prf === null || prf === false) return null;
  const context = prf === true ? DEFAULT_PRF_CONTEXT : prf && prf.context;
  checkContext(context);
  return context;
}


// MARK: The client

/**
 * A client of one passkeyd server.
 *
 * @example
 *   const client = new Passkeyd({ lang: 'fr' });
 *   try { await client.signIn({ username: 'ada' }); }
 *   catch (error) { if (error.code !== 'cancelled') show(error.message); }
 */
export class Passkeyd {
  /** @type {string} the server's origin, e.g. "https://login.example.com" */
  server;
  /** @type {string} the language of `message()` and errors: "en" or "fr" */
  language;
  /** @type {Promise<void>} settles when the catalogue is loaded (never rejects) */
  ready;

  #base;
  #auth;
  #token = null;
  #messages = { ...FALLBACK_MESSAGES };
  #onReauthenticate;
  #user = null;
  #rpId = null;
  #autofill = null;        // the AutoFill request in flight (see autoFill)
  #verifying = null;       // an AutoFill choice being verified
  #autoCreate = null;      // AbortController of a conditional create

  /**
   * @param {object} [options]
   * @param {string} [options.server] the passkeyd origin; default: where this module was loaded from
   * @param {string|string[]} [options.lang] language tag(s); default: `navigator.languages`; English
   *   when none has a catalogue
   * @param {'cookie'|'bearer'} [options.auth] `cookie` (default): the session cookie, sent with
   *   `credentials: 'include'`; `bearer`: the session token of the last sign-in, kept in memory and
   *   sent as `Authorization: Bearer` (for pages on another site, where the cookie does not ride)
   * @param {string} [options.token] a session token to start with (`bearer`)
   * @param {() => boolean|Promise<boolean>} [options.onReauthenticate] called when an action needs a
   *   recent sign-in (403 `reauthentication_required`); return true to confirm with a passkey
   *   (then the action is retried once), false to fail with that error. Without it: the error.
   */
  constructor({ server, lang, auth = 'cookie', token, onReauthenticate } = {}) {
    this.server = new URL(server ?? import.meta.url).origin;
    this.#base = server ? this.server + '/' : new URL('.', import.meta.url).href;
    if (auth !== 'cookie' && auth !== 'bearer') throw new TypeError("auth is 'cookie' or 'bearer'");
    this.#auth = auth;
    this.#token = token ?? null;
    this.#onReauthenticate = onReauthenticate;
    const preferred = lang ? [].concat(lang) : (typeof navigator !== 'undefined' ? navigator.languages ?? [navigator.language] : []);
    this.language = pickLanguage(preferred);
    this.ready = this.#loadMessages();
  }

  /** Whether this browser can use passkeys at all. */
  static isSupported() {
    return typeof window !== 'undefined' && typeof window.PublicKeyCredential === 'function' && !!navigator.credentials;
  }

  /** Whether this browser offers passkeys in AutoFill (conditional mediation). */
  static async isAutoFillAvailable() {
    if (!Passkeyd.isSupported() || typeof PublicKeyCredential.isConditionalMediationAvailable !== 'function') return false;
    try { return await PublicKeyCredential.isConditionalMediationAvailable(); } catch { return false; }
  }

  /** The session token of the last sign-in (`auth: 'bearer'`), to keep where the app keeps
   *  secrets; null with cookies. Never log it. */
  get sessionToken() { return this.#token; }

  // MARK: Messages

  async #loadMessages() {
    this.#messages = await loadMessages(this.#base, this.language);
  }

  /**
   * The catalogue's sentence for `key` with `{name}` placeholders filled from `params`. With a
   * numeric `params.count`, `key.one` / `key.other` (by the language's plural rules) come first.
   * A key no catalogue has is returned as it is. Call after `await client.ready`.
   */
  message(key, params = {}) {
    let text;
    if (typeof params.count === 'number') {
      const rule = new Intl.PluralRules(this.language).select(params.count);
      text = this.#messages[`${key}.${rule}`] ?? this.#messages[`${key}.other`];
    }
    text ??= this.#messages[key];
    if (typeof text !== 'string') return key;
    return text.replace(/\{(\w+)\}/g, (whole, name) => (params[name] === undefined || params[name] === null ? '' : String(params[name]))).trim();
  }

  /** Whether the catalogue has `key`. */
  hasMessage(key) { return typeof this.#messages[key] === 'string'; }

  async #error(code, { status = 0, retryAfter = null, serverMessage = null, cause } = {}) {
    await this.ready;
    let message;
    if (this.hasMessage('error.' + code)) message = this.message('error.' + code, { message: serverMessage, retryAfter });
    else message = serverMessage || this.message('error.unknown');
    return new PasskeydError(code, message, { status, retryAfter, serverMessage, cause });
  }

  /** A browser's ceremony failure as a PasskeydError. */
  async #browserError(error, { started, timeout } = {}) {
    if (error instanceof PasskeydError) return error;
    const name = error && error.name;
    let code = 'unknown';
    if (name === 'NotAllowedError' || name === 'AbortError') {
      // One error for "dismissed", "timed out" and "nothing to offer": a request that ran its
      // whole time is told apart by the clock.
      const ranOut = started !== undefined && timeout > 0 && performance.now() - started >= timeout * 0.9;
      code = ranOut ? 'timeout' : 'cancelled';
    } else if (name === 'InvalidStateError') {
      code = 'credential_already_registered';
    } else if (name === 'NotSupportedError' || name === 'SecurityError') {
      code = 'unsupported';
    }
    return this.#error(code, { cause: error });
  }

  // MARK: HTTP

  async #request(method, path, body, { signal, retried = false } = {}) {
    const headers = {};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (this.#auth === 'bearer' && this.#token) headers.Authorization = 'Bearer ' + this.#token;
    let response;
    try {
      // Under the folder the module came from: passkeyd behind a path prefix works too.
      response = await fetch(new URL(path.replace(/^\//, ''), this.#base), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: this.#auth === 'bearer' ? 'omit' : 'include',
        signal,
      });
    } catch (error) {
      if (signal && signal.aborted) throw await this.#error('cancelled', { cause: error });
      throw await this.#error('network', { cause: error });
    }
    if (response.status === 204) return null;
    let json;
    try { json = await response.json(); } catch { json = undefined; }
    if (response.ok) {
      if (json === undefined) throw await this.#error('invalid_response', { status: response.status });
      return json;
    }
    const failure = json && json.error && typeof json.error.code === 'string' ? json.error : null;
    if (!failure) throw await this.#error('invalid_response', { status: response.status });
    const seconds = Number.parseInt(response.headers.get('Retry-After') ?? '', 10);
    if (failure.code === 'reauthentication_required' && !retried && (await this.#reauthenticate())) {
      return this.#request(method, path, body, { signal, retried: true });
    }
    throw await this.#error(CLIENT_CODES[failure.code] ?? failure.code, {
      status: response.status,
      retryAfter: Number.isFinite(seconds) ? seconds : null,
      serverMessage: typeof failure.message === 'string' ? failure.message : null,
    });
  }

  /** Asks `onReauthenticate`, then signs the current account in again with a passkey. */
  async #reauthenticate() {
    if (typeof this.#onReauthenticate !== 'function') return false;
    const username = this.#user ? this.#user.username : (await this.session())?.user.username;
    if (!username || !(await this.#onReauthenticate())) return false;
    await this.signIn({ username });
    return true;
  }

  #signedIn(answer, rpId) {
    this.#user = answer.user ?? this.#user;
    if (rpId) this.#rpId = rpId;
    if (this.#auth === 'bearer' && typeof answer.token === 'string') this.#token = answer.token;
    return answer;
  }

  // MARK: Ceremonies

  #requireWebAuthn() {
    return Passkeyd.isSupported() ? null : this.#error('unsupported');
  }

  async #ceremony(kind, options, { mediation, signal, publicKey } = {}) {
    const started = performance.now();
    try {
      const request = { publicKey };
      if (mediation) request.mediation = mediation;
      if (signal) request.signal = signal;
      return await navigator.credentials[kind](request);
    } catch (error) {
      throw await this.#browserError(error, { started, timeout: mediation === 'conditional' ? 0 : options.timeout });
    }
  }

  #parse(parse, json) {
    try { return parse(json); } catch (error) { return this.#error('invalid_response', { cause: error }).then((e) => { throw e; }); }
  }

  /** Runs a modal ceremony: a pending AutoFill request steps aside for it, and comes back if it
   *  fails; once it has signed someone in, the AutoFill request ends (`cancelled`). */
  async #modal(signsIn, work) {
    const unsupported = this.#requireWebAuthn();
    if (unsupported) throw await unsupported;
    // A pending conditional create would make the browser refuse this ceremony.
    this.#stopAutoCreate();
    const run = this.#autofill;
    if (run) await run.pause();
    try {
      const answer = await work();
      if (run) (signsIn ? run.end() : run.resume());
      return answer;
    } catch (error) {
      if (run) run.resume();
      throw error;
    }
  }

  async #finishSignIn(credential, options) {
    const json = withoutSecrets(credentialToJSON(credential));
    const verifying = (async () => {
      try {
        return this.#signedIn(await this.#request('POST', '/api/auth/authenticate/verify', { credential: json }), options.rpId);
      } catch (error) {
        // The server no longer knows this passkey: tell the passkey provider to stop offering it.
        if (error.code === 'passkey_removed') await signal('signalUnknownCredential', { rpId: options.rpId ?? this.#rpId, credentialId: json.id });
        throw error;
      }
    })();
    this.#verifying = verifying;
    try { return await verifying; } finally { if (this.#verifying === verifying) this.#verifying = null; }
  }

  /**
   * Creates an account and its first passkey (the browser's create-passkey sheet), and signs in.
   * @param {{username: string, displayName?: string, email?: string, name?: string, hints?: string[],
   *   prf?: boolean|{context: string}, largeBlob?: 'preferred'|'required'}} details
   *   `email`: the account's address, as `emailPolicy().signUp` asks (a verification mail goes to it).
   *   `name`: the passkey's name (default: its provider's name).
   *   `prf`: also derive the passkey's encryption key for `context` (`true`: "default"). The
   *   answer's `prf` is `{key, context}` or `{key: null, reason}` (see docs/extensions.md). A
   *   browser or passkey that can make the key only at sign-in (it reports `prf.enabled` but no
   *   output at creation) gets a second prompt: one sign-in with the new passkey.
   *   `largeBlob`: ask for a passkey that can store data (`required`: refuse one that cannot).
   * @returns {Promise<{verified: true, user: object, passkey: object, token: string, accessToken: string, accessTokenExpiresAt: string, prf?: object}>}
   */
  async signUp({ username, displayName, email, name, hints, prf, largeBlob } = {}) {
    const context = prfContext(prf);
    return this.#modal(true, async () => {
      const body = compact({ username, displayName, email: email && email.trim(), hints });
      const extensions = compact({ prf: context ? true : undefined, largeBlob });
      if (Object.keys(extensions).length) body.extensions = extensions;
      const options = await this.#request('POST', '/api/auth/register/options', body);
      const publicKey = await this.#parse(creationOptionsFromJSON, options);
      const credential = await this.#ceremony('create', options, { publicKey });
      const answer = this.#signedIn(
        await this.#request('POST', '/api/auth/register/verify', compact({ credential: withoutSecrets(credentialToJSON(credential)), name })),
        options.rp && options.rp.id);
      if (!context) return answer;
      const { outcome, session } = await this.#prfAfterCreation(credential, options, context, answer);
      return { ...answer, ...session, prf: outcome };
    });
  }

  /** The `prf` member of a sign-up or added passkey, with one sign-in of the new passkey when
   *  the browser reported PRF support but could not evaluate it at creation. `session`: the
   *  fields of that sign-in's session (the client now uses it), else {}. */
  async #prfAfterCreation(credential, options, context, answer) {
    const requested = !!(options.extensions && options.extensions.prf);
    const outcome = await prfOutcome(credential, context, requested, answer.passkey && answer.passkey.prf);
    if (outcome.reason !== 'not-evaluated' || !answer.user || !answer.passkey) return { outcome, session: {} };
    try {
      const signedIn = await this.#signInForExtension({ username: answer.user.username, credentialId: answer.passkey.id, extensions: { prf: true } });
      const second = await prfOutcome(signedIn.credential, context, signedIn.requested.prf, signedIn.answer.prfEnabled);
      const { token, expiresAt, accessToken, accessTokenExpiresAt } = signedIn.answer;
      return { outcome: second, session: compact({ token, expiresAt, accessToken, accessTokenExpiresAt }) };
    } catch (error) {
      return { outcome: { key: null, reason: 'not-evaluated', passkeyId: credential.id, error }, session: {} };
    }
  }

  /** A sign-in ceremony (inside a modal one) that asks for extensions: its answer, the
   *  credential (for its extension results) and which extensions the server put in the options. */
  async #signInForExtension({ username, credentialId, extensions, hints }) {
    const options = await this.#request('POST', '/api/auth/authenticate/options',
      compact({ username: username && username.trim(), credentialId, hints, extensions }));
    const publicKey = await this.#parse(requestOptionsFromJSON, options);
    const credential = await this.#ceremony('get', options, { publicKey });
    const answer = await this.#finishSignIn(credential, options);
    const asked = options.extensions || {};
    return { answer, credential, requested: { prf: !!asked.prf, largeBlob: asked.largeBlob } };
  }

  /**
   * Signs in with the browser's passkey sheet. With a username, only that account's passkeys
   * are offered (allowCredentials); without, any passkey of this site (discoverable).
   * Started while an AutoFill choice is being verified, it waits for that one, and if it
   * signed in, rejects with `cancelled` (autoFill has the answer).
   *
   * `prf` (needs `username`: the server names each passkey's salt, which needs the list):
   * the answer's `prf` is `{key, context}`, the key of the passkey that signed in for `context`
   * (`true`: "default"), or `{key: null, reason}`. `credentialId` offers only that passkey of
   * the account.
   * @param {{username?: string, hints?: string[], prf?: boolean|{context: string}, credentialId?: string}} [details]
   * @returns {Promise<{verified: true, user: object, token: string, expiresAt: string, accessToken: string, accessTokenExpiresAt: string, prf?: object}>}
   *   (the server's sign-in answer does not name the passkey: `prf.passkeyId` does)
   */
  async signIn({ username, hints, prf, credentialId } = {}) {
    const context = prfContext(prf);
    if (this.#verifying) {
      const won = await this.#verifying.then(() => true, () => false);
      if (won) throw await this.#error('cancelled');
    }
    if (context || credentialId) {
      return this.#modal(true, async () => {
        const signedIn = await this.#signInForExtension({ username, credentialId, hints, extensions: context ? { prf: true } : undefined });
        if (!context) return signedIn.answer;
        return { ...signedIn.answer, prf: await prfOutcome(signedIn.credential, context, signedIn.requested.prf, signedIn.answer.prfEnabled) };
      });
    }
    return this.#modal(true, async () => {
      const options = await this.#request('POST', '/api/auth/authenticate/options', compact({ username: username && username.trim(), hints }));
      const publicKey = await this.#parse(requestOptionsFromJSON, options);
      const credential = await this.#ceremony('get', options, { publicKey });
      return this.#finishSignIn(credential, options);
    });
  }

  /**
   * Passkeys in the browser's AutoFill (conditional mediation) for `input`, which gets
   * `autocomplete="… webauthn"` if it lacks it. Resolves with the sign-in answer once the
   * person picks a passkey.
   *
   * - While signIn(), signUp() or addPasskey() of this client runs, the request steps aside
   *   (aborted) and starts again if that fails; if that signs in, this rejects with `cancelled`.
   * - A failure after the person picked a passkey (the server refused it: `passkey_removed`, …)
   *   goes to `onError`, and the request starts again when the person next focuses or types in
   *   `input` (at once for an expired challenge). Without `onError`, this rejects with it.
   * - Rejects with `cancelled` when `signal` aborts or another autoFill() starts, and with
   *   `unsupported` where the browser has no conditional mediation.
   * @param {HTMLInputElement} input
   * @param {{signal?: AbortSignal, onError?: (error: PasskeydError) => void}} [options]
   */
  async autoFill(input, { signal: outer, onError } = {}) {
    if (!(await Passkeyd.isAutoFillAvailable())) throw await this.#error('unsupported');
    if (outer && outer.aborted) throw await this.#error('cancelled');
    if (input && !/(^|\s)webauthn(\s|$)/i.test(input.getAttribute('autocomplete') || '')) {
      input.setAttribute('autocomplete', ((input.getAttribute('autocomplete') || 'username') + ' webauthn').trim());
    }
    if (this.#autofill) this.#autofill.end();
    const run = new AutoFillRun(outer);
    this.#autofill = run;
    try {
      return await this.#runAutoFill(run, input, onError);
    } finally {
      run.end();
      if (this.#autofill === run) this.#autofill = null;
    }
  }

  async #runAutoFill(run, input, onError) {
    let quickRetries = 0;
    let wait = null; // what the next attempt waits for (the person coming back to the field)
    for (;;) {
      let controller = null;
      try {
        if (wait) await run.whileActive(wait);
        wait = null;
        await run.whileActive(run.unpaused());
        controller = run.attempt();
        const options = await this.#request('POST', '/api/auth/authenticate/options', { mediation: 'conditional' }, { signal: controller.signal });
        const publicKey = await this.#parse(requestOptionsFromJSON, options);
        const pending = this.#ceremony('get', options, { mediation: 'conditional', signal: controller.signal, publicKey });
        run.pending = pending.catch(() => {});
        const credential = await pending;
        if (controller.signal.aborted) throw await this.#error('cancelled');
        return await this.#finishSignIn(credential, options);
      } catch (error) {
        if (run.ended) throw await this.#error('cancelled', { cause: error });
        if (controller && controller.signal.aborted) continue; // stepped aside for a modal ceremony
        const failure = await this.#browserError(error);
        if ((failure.code === 'challenge_expired' || failure.code === 'challenge_unknown') && quickRetries++ < 3) continue;
        quickRetries = 0;
        // The browser ended the request by itself (nothing the person did): no message.
        if (failure.code !== 'cancelled' && failure.code !== 'timeout') {
          if (typeof onError !== 'function') throw failure;
          try { onError(failure); } catch { /* the page's handler */ }
        }
        if (!input) throw failure;
        wait = interaction(input);
      }
    }
  }

  /**
   * Adds a passkey to the signed-in account (the create-passkey sheet). Needs a recent sign-in
   * (see `onReauthenticate`).
   * @param {{name?: string, replaces?: string|{id: string}, hints?: string[],
   *   prf?: boolean|{context: string}, largeBlob?: 'preferred'|'required'}} [details]
   *   `replaces`: a passkey of the account the new one takes the place of (removed once stored).
   *   `prf`, `largeBlob`: as in signUp() (the new passkey's key in the answer's `prf`).
   * @returns {Promise<{verified: true, user: object, passkey: object, prf?: object}>}
   */
  async addPasskey({ name, replaces, hints, prf, largeBlob } = {}) {
    const context = prfContext(prf);
    this.#stopAutoCreate();
    return this.#modal(false, async () => {
      const body = compact({ hints });
      const extensions = compact({ prf: context ? true : undefined, largeBlob });
      if (Object.keys(extensions).length) body.extensions = extensions;
      const options = await this.#request('POST', '/api/auth/register/options', body);
      const publicKey = await this.#parse(creationOptionsFromJSON, options);
      const credential = await this.#ceremony('create', options, { publicKey });
      const replaced = replaces && typeof replaces === 'object' ? replaces.id : replaces;
      const answer = await this.#request('POST', '/api/auth/register/verify',
        compact({ credential: withoutSecrets(credentialToJSON(credential)), name, replaces: replaced }));
      if (!context) return answer;
      const { outcome } = await this.#prfAfterCreation(credential, options, context, answer);
      return { ...answer, prf: outcome };
    });
  }

  // MARK: largeBlob: data kept on the passkey itself

  /**
   * Reads the data stored on a passkey (largeBlob) in a sign-in ceremony with it, which also
   * signs in. `credentialId` names the passkey (needed when the account has several).
   * @param {{username: string, credentialId?: string}} details
   * @returns {Promise<{verified: true, user: object, token: string, expiresAt: string, accessToken: string, accessTokenExpiresAt: string, blob: Uint8Array|null}>}
   *   `blob`: null when the passkey holds nothing for this site or cannot store data
   */
  async readLargeBlob({ username, credentialId } = {}) {
    return this.#modal(true, async () => {
      const signedIn = await this.#signInForExtension({ username, credentialId, extensions: { largeBlob: { read: true } } });
      const results = clientExtensionResults(signedIn.credential);
      const blob = results.largeBlob && results.largeBlob.blob ? bytesOf(results.largeBlob.blob).slice() : null;
      return { ...signedIn.answer, blob };
    });
  }

  /**
   * Stores `data` on a passkey (largeBlob; it replaces what was there) in a sign-in ceremony
   * with it, which also signs in. `credentialId` names the passkey (required: 400
   * `invalid_extension` without it). At most the server's `largeBlobMaxBytes` (400
   * `large_blob_too_large`). Put nothing secret there unencrypted: anyone holding the
   * authenticator and passing its user verification can read it.
   * @param {{username: string, credentialId: string, data: string|ArrayBuffer|ArrayBufferView}} details
   * @returns {Promise<{verified: true, user: object, token: string, expiresAt: string, accessToken: string, accessTokenExpiresAt: string, written: boolean}>}
   */
  async writeLargeBlob({ username, credentialId, data } = {}) {
    const bytes = bytesOf(data);
    return this.#modal(true, async () => {
      const signedIn = await this.#signInForExtension({ username, credentialId, extensions: { largeBlob: { write: toBase64url(bytes) } } });
      const results = clientExtensionResults(signedIn.credential);
      return { ...signedIn.answer, written: !!(results.largeBlob && results.largeBlob.written) };
    });
  }

  /**
   * Right after a password sign-in: asks the browser to create a passkey with conditional
   * mediation (its password manager may do it without a prompt). Resolves with the
   * registration answer; rejects with `unsupported` where the browser cannot
   * (`getClientCapabilities().conditionalCreate`), `cancelled` when it declines or `signal`
   * aborts. addPasskey() and signOut() abort it. The browser may keep it pending a long time:
   * do not make the page wait on it.
   * @param {{signal?: AbortSignal}} [options]
   */
  async autoCreatePasskey({ signal: outer } = {}) {
    let capabilities = {};
    try {
      if (Passkeyd.isSupported() && typeof PublicKeyCredential.getClientCapabilities === 'function') {
        capabilities = await PublicKeyCredential.getClientCapabilities();
      }
    } catch { /* unsupported */ }
    if (!capabilities.conditionalCreate) throw await this.#error('unsupported');
    if (outer?.aborted) throw await this.#error('cancelled');
    this.#stopAutoCreate();
    const controller = new AbortController();
    this.#autoCreate = controller;
    const abort = () => controller.abort();
    if (outer) outer.addEventListener('abort', abort, { once: true });
    try {
      const options = await this.#request('POST', '/api/auth/register/options', { mediation: 'conditional' }, { signal: controller.signal });
      const publicKey = await this.#parse(creationOptionsFromJSON, options);
      const credential = await this.#ceremony('create', options, { mediation: 'conditional', signal: controller.signal, publicKey });
      if (controller.signal.aborted) throw await this.#error('cancelled');
      return await this.#request('POST', '/api/auth/register/verify', { credential: withoutSecrets(credentialToJSON(credential)) });
    } finally {
      if (outer) outer.removeEventListener('abort', abort);
      if (this.#autoCreate === controller) this.#autoCreate = null;
    }
  }

  #stopAutoCreate() {
    if (this.#autoCreate) { this.#autoCreate.abort(); this.#autoCreate = null; }
  }

  // MARK: The account

  /**
   * Who is signed in: `{user, rpId, createdAt, expiresAt, hasPassword, recoveryCodesLeft}`, or
   * null when nobody is. Tells the passkey provider the account's current names
   * (signalCurrentUserDetails).
   */
  async session() {
    let session;
    try {
      session = await this.#request('GET', '/api/auth/session');
    } catch (error) {
      if (error.code === 'not_signed_in') { this.#user = null; return null; }
      throw error;
    }
    this.#user = session.user;
    this.#rpId = session.rpId;
    await signal('signalCurrentUserDetails', { rpId: session.rpId, userId: session.user.userHandle, name: session.user.username, displayName: session.user.displayName });
    return session;
  }

  /**
   * The account's passkeys: `[{id, name, provider, providerIcon?, aaguid, createdAt, lastUsedAt,
   * backedUp, backupEligible, deviceBound, transports, attestationFormat, userVerified}]`.
   * Tells the passkey provider which of its passkeys still count (signalAllAcceptedCredentials)
   * with exactly this list and the account the server read it for (the answer names it): the
   * provider hides every passkey of that user missing from the list, so never a cached one.
   */
  async passkeys() {
    const { passkeys, rpId, userHandle } = await this.#request('GET', '/api/auth/passkeys');
    if (rpId && userHandle) {
      await signal('signalAllAcceptedCredentials', { rpId, userId: userHandle, allAcceptedCredentialIds: passkeys.map((p) => p.id) });
    }
    return passkeys;
  }

  /** Renames a passkey; resolves with the passkey. */
  async renamePasskey(id, name) {
    return this.#request('PATCH', '/api/auth/passkeys/' + encodeURIComponent(id), { name });
  }

  /** Deletes a passkey (never the last way in: `last_passkey`), then tells the passkey provider. */
  async deletePasskey(id) {
    await this.#request('DELETE', '/api/auth/passkeys/' + encodeURIComponent(id));
    // The list as the server has it now (never a cached one minus this id).
    try { await this.passkeys(); } catch { /* the signal only */ }
  }

  /**
   * Gives one of the account's passkeys a new PRF salt (`POST /api/auth/passkeys/{id}/prf-salt`;
   * needs a recent sign-in, see `onReauthenticate`): its next `prf` sign-in gives a different
   * key. Re-wrap what the old key protected first, while that key is at hand (docs/extensions.md).
   * Rejects with `passkey_not_found` for a passkey that is not the account's.
   * @param {string} id the passkey's id (a `prf` answer's `passkeyId`)
   * @returns {Promise<object>} the passkey
   */
  async rotatePRFSalt(id) {
    return this.#request('POST', '/api/auth/passkeys/' + encodeURIComponent(id) + '/prf-salt', {});
  }

  /** Signs out (ends the session; clears the cookie or forgets the token). */
  async signOut() {
    this.#stopAutoCreate();
    try {
      await this.#request('DELETE', '/api/auth/session');
    } catch (error) {
      if (error.code !== 'not_signed_in') throw error;
    } finally {
      this.#user = null;
      this.#token = null;
    }
  }

  /** A fresh access token (JWT) for the live session: `{accessToken, accessTokenExpiresAt, tokenType}`. */
  async accessToken() {
    return this.#request('POST', '/api/auth/token', {});
  }

  // MARK: Passwords and recovery (accounts on their way to passkeys)

  /** Password sign-in of an imported account: `{verified, user, token, …, canCreatePasskey, recovery}`. */
  async signInWithPassword({ username, password }) {
    return this.#signedIn(await this.#request('POST', '/api/auth/password/sign-in', { username: (username ?? '').trim(), password }));
  }

  /** Changes the password (needs a recent sign-in; ends every other session). */
  async changePassword(newPassword) {
    await this.#request('POST', '/api/auth/password', { newPassword });
  }

  /** Turns the password off (the account needs a passkey first: `no_passkey`). */
  async removePassword() {
    await this.#request('DELETE', '/api/auth/password');
  }

  /** Signs in with a recovery code (single use; ends every other session). */
  async recover({ username, code }) {
    return this.#signedIn(await this.#request('POST', '/api/auth/recovery/sign-in', { username: (username ?? '').trim(), code: (code ?? '').trim() }));
  }

  /** Signs in with the token of an admin-issued recovery link. */
  async recoverWithLink(token) {
    return this.#signedIn(await this.#request('POST', '/api/auth/recovery/link', { token }));
  }

  /** Ten new single-use recovery codes (the old ones stop working); show them once. */
  async newRecoveryCodes() {
    const { codes } = await this.#request('POST', '/api/auth/recovery-codes', {});
    return codes;
  }

  // MARK: Email (docs/email.md): the account's address, recovery by mail, "this wasn't me"

  /** What sign-up and the account page offer: `{mailEnabled, signUp, undoHours}`; `signUp` is
   *  `off`, `optional`, `required` or `username` (the username is the address). */
  async emailPolicy() {
    return this.#request('GET', '/api/auth/email/policy');
  }

  /** The account's address: `{address, verified, verifiedAt, recoveryOpen, pendingAddress, mailEnabled}`. */
  async email() {
    return this.#request('GET', '/api/auth/email');
  }

  /** Sets or changes the address (needs a recent sign-in): a mail with a link and a code goes to
   *  it; a verified address stays until the new one is verified. Resolves with the state, the new
   *  address in `pendingAddress`. */
  async setEmail(address) {
    return this.#request('PUT', '/api/auth/email', { address: (address ?? '').trim() });
  }

  /** Removes the address (a verified one is told, and its "this wasn't me" puts it back). */
  async removeEmail() {
    return this.#request('DELETE', '/api/auth/email');
  }

  /**
   * Verifies the address with a mail's link `token`, or its 6-digit `code` (signed in).
   * @returns {Promise<{verified: true, address: string, username: string, passkeysBefore: object[],
   *   sessionsBefore: number, removed: boolean, recoveryToken: string|null}>} `recoveryToken`: the
   *   verifier is not signed in to the account; with it, `emailRecoveryOptions({token})` opens a
   *   recovery step (one new passkey), after which `removeOtherPasskeys()` removes `passkeysBefore`.
   */
  async verifyEmail({ token, code } = {}) {
    return this.#request('POST', '/api/auth/email/verify', compact({ token, code: code && code.trim() }));
  }

  /** "Lost your passkey?": asks for a recovery mail to the verified address of `identifier` (a
   *  username or an address). The same answer whether or not such an account exists. */
  async requestEmailRecovery(identifier) {
    await this.#request('POST', '/api/auth/recovery/email', { identifier: (identifier ?? '').trim() });
  }

  /** The recovery step's creation options (W3C JSON), for the mail's link `token` or its `code`
   *  with the `identifier` it was asked for. The token or code is spent here: keep the options
   *  and pass them to recoverWithEmail() again when the person cancels the sheet. */
  async emailRecoveryOptions({ token, identifier, code } = {}) {
    return this.#request('POST', '/api/auth/recovery/email/options',
      compact({ token, identifier: identifier && identifier.trim(), code: code && code.trim() }));
  }

  /**
   * Creates the new passkey of a recovery step (the create-passkey sheet) with the options of
   * emailRecoveryOptions(), and signs in. Can run again with the same options after `cancelled`,
   * until the ceremony expires (`challenge_expired`).
   * @returns {Promise<{verified: true, recovery: true, user: object, passkey: object, token: string|null,
   *   otherPasskeys: number}>} `otherPasskeys`: the account's other passkeys (removeOtherPasskeys())
   */
  async recoverWithEmail(options, { name } = {}) {
    return this.#modal(true, async () => {
      const publicKey = await this.#parse(creationOptionsFromJSON, options);
      const credential = await this.#ceremony('create', options, { publicKey });
      return this.#signedIn(
        await this.#request('POST', '/api/auth/recovery/email/verify', compact({ credential: withoutSecrets(credentialToJSON(credential)), name })),
        options.rp && options.rp.id);
    });
  }

  /** Removes every passkey of the account but the one this session signed in with, and ends
   *  every other session (needs a recent sign-in): `{passkeysRemoved, sessionsEnded}`. */
  async removeOtherPasskeys() {
    const answer = await this.#request('POST', '/api/auth/passkeys/remove-others', {});
    try { await this.passkeys(); } catch { /* the signal only */ }
    return answer;
  }

  /** "This wasn't me" with a notice's link `token`: undoes the change, ends every session of the
   *  account and closes recovery by mail. `{undone, username, passkeyRemoved, addressRestored, sessionsEnded}`. */
  async undoEmailChange(token) {
    const answer = await this.#request('POST', '/api/auth/email/undo', { token });
    if (this.#user && this.#user.username === answer.username) {
      this.#user = null;
      this.#token = null;
    }
    return answer;
  }

  // MARK: Sessions

  /** Where the account is signed in: `[{id, device, method, createdAt, lastSeenAt, current, …}]`. */
  async sessions() {
    const { sessions } = await this.#request('GET', '/api/auth/sessions');
    return sessions;
  }

  /** Ends one of the account's sessions. */
  async revokeSession(id) {
    await this.#request('DELETE', '/api/auth/sessions/' + encodeURIComponent(id));
  }

  /** Ends every other session of the account; resolves with how many. */
  async revokeOtherSessions() {
    const { revoked } = await this.#request('POST', '/api/auth/sessions/revoke-others', {});
    return revoked;
  }

  // MARK: Signing in for another application (passkeyd's own OpenID Provider pages)

  /** A pending authorization request: `{client, scopes, signInNeeded, consentNeeded, …}`. */
  async authorizationRequest(id) {
    return this.#request('GET', '/oauth2/authorize/requests/' + encodeURIComponent(id));
  }

  /** The signed-in person's answer to it; resolves with `{redirect}`. */
  async decideAuthorization(id, approve) {
    return this.#request('POST', '/oauth2/authorize/requests/' + encodeURIComponent(id), { approve });
  }
}

/** Resolves when the person next focuses, clicks or types in `input`. */
function interaction(input) {
  return new Promise((resolve) => {
    const events = ['focus', 'pointerdown', 'keydown', 'input'];
    const done = () => { for (const name of events) input.removeEventListener(name, done); resolve(); };
    for (const name of events) input.addEventListener(name, done);
  });
}

/** One autoFill() call: its current attempt, whether it is paused for a modal ceremony, and
 *  whether it has ended (the caller's signal, another autoFill, a sign-in elsewhere). */
class AutoFillRun {
  ended = false;
  pending = null;
  #controller = null;
  #paused = null;
  #end;
  #endedPromise;

  constructor(outer) {
    this.#endedPromise = new Promise((resolve) => { this.#end = resolve; });
    if (outer) outer.addEventListener('abort', () => this.end(), { once: true });
  }

  /** A fresh AbortController for the next attempt. */
  attempt() {
    this.#controller = new AbortController();
    if (this.ended) this.#controller.abort();
    return this.#controller;
  }

  /** `promise`, unless the run ends first (then a rejection the loop turns into `cancelled`). */
  whileActive(promise) {
    return Promise.race([promise, this.#endedPromise.then(() => { throw new DOMException('ended', 'AbortError'); })]);
  }

  unpaused() { return this.#paused ? this.#paused.promise : Promise.resolve(); }

  /** Steps aside: aborts the attempt and waits (a second at most) for the browser to let go. */
  async pause() {
    if (this.ended || this.#paused) return;
    let resume;
    this.#paused = { promise: new Promise((resolve) => { resume = resolve; }), resume };
    if (this.#controller) this.#controller.abort();
    if (this.pending) await Promise.race([this.pending, sleep(1000)]);
  }

  resume() {
    if (!this.#paused) return;
    const { resume } = this.#paused;
    this.#paused = null;
    resume();
  }

  end() {
    if (this.ended) return;
    this.ended = true;
    if (this.#controller) this.#controller.abort();
    this.#end();
  }
}
