// Every call of the console's API (/admin/api) and its passkey ceremonies. A change carries the
// session's CSRF token and JSON; one that answers 403 reauthentication_required runs the step-up
// (a passkey verification) and is sent once more.
import { creationOptionsFromJSON, requestOptionsFromJSON, credentialToJSON, withoutSecrets, signal } from '/passkeyd.js';
import { t, has } from './i18n.js';

/** A failure: `code` the API's error code (or the console's: network, cancelled, timeout,
 *  unsupported, invalid_response, unknown), `message` a sentence in the page's language. */
export class ConsoleError extends Error {
  constructor(code, { status = 0, serverMessage = null, retryAfter = null, cause } = {}) {
    let message;
    if (has('error.' + code)) message = t('error.' + code, { message: serverMessage, retryAfter });
    else message = serverMessage || t('error.unknown');
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'ConsoleError';
    this.code = code;
    this.status = status;
    this.serverMessage = serverMessage;
    this.retryAfter = retryAfter;
  }
}

let csrfToken = null;
const hooks = { stepUp: null, signedOut: null };

/** `stepUp`: called before the passkey sheet of a step-up (say why it appears); `signedOut`:
 *  called when the console session is gone (403 admin_required on a page's call). */
export function configure({ onStepUp, onSignedOut }) {
  hooks.stepUp = onStepUp;
  hooks.signedOut = onSignedOut;
}

/** Keeps the CSRF token of a session answer (sign-in, bootstrap, GET session, step-up). */
export function remember(body) {
  if (body && typeof body.csrfToken === 'string') csrfToken = body.csrfToken;
  return body;
}

export function forget() { csrfToken = null; }

async function send(method, path, body) {
  const headers = { Accept: 'application/json' };
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    if (csrfToken) headers['X-CSRF-Token'] = csrfToken;
    init.body = JSON.stringify(body ?? {});
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ConsoleError('network', { cause: error });
  }
  if (response.status === 204) return null;
  let json;
  try { json = await response.json(); } catch { json = undefined; }
  if (response.ok) {
    if (json === undefined) throw new ConsoleError('invalid_response', { status: response.status });
    return json;
  }
  const failure = json && json.error && typeof json.error.code === 'string' ? json.error : null;
  const seconds = Number.parseInt(response.headers.get('Retry-After') ?? '', 10);
  throw new ConsoleError(failure ? failure.code : 'unknown', {
    status: response.status,
    serverMessage: failure && typeof failure.message === 'string' ? failure.message : null,
    retryAfter: Number.isFinite(seconds) ? seconds : null,
  });
}

/** A call of the console's API: `path` under /admin/api. */
export async function call(method, path, body, { retried = false } = {}) {
  try {
    return await send(method, '/admin/api' + path, body);
  } catch (error) {
    if (error.code === 'reauthentication_required' && !retried && method !== 'GET') {
      await stepUp();
      return call(method, path, body, { retried: true });
    }
    if (error.code === 'admin_required' && hooks.signedOut) hooks.signedOut();
    throw error;
  }
}

export const get = (path) => call('GET', path);
export const post = (path, body) => call('POST', path, body);
export const del = (path, body) => call('DELETE', path, body);
export const patch = (path, body) => call('PATCH', path, body);

/** A path segment: ids and usernames never change the path's shape. */
export const segment = (value) => encodeURIComponent(String(value));

/** `?name=value&…` of the parameters that have a value. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text ? '?' + text : '';
}

// MARK: passkeys

export const webAuthnAvailable = () => typeof window.PublicKeyCredential === 'function' && !!navigator.credentials;

async function ceremony(kind, publicKey, timeout) {
  if (!webAuthnAvailable()) throw new ConsoleError('unsupported');
  const started = performance.now();
  try {
    return await navigator.credentials[kind]({ publicKey });
  } catch (error) {
    const name = error && error.name;
    if (name === 'NotAllowedError' || name === 'AbortError') {
      // One error for "dismissed", "timed out" and "nothing to offer": the clock tells them apart.
      const ranOut = timeout > 0 && performance.now() - started >= timeout * 0.9;
      throw new ConsoleError(ranOut ? 'timeout' : 'cancelled', { cause: error });
    }
    if (name === 'InvalidStateError') throw new ConsoleError('credential_already_registered', { cause: error });
    if (name === 'NotSupportedError' || name === 'SecurityError') throw new ConsoleError('unsupported', { cause: error });
    throw new ConsoleError('unknown', { cause: error });
  }
}

// The options as /api/auth/…/options answer them; a `publicKey` wrapper is unwrapped too.
const unwrap = (json) => (json && json.publicKey && json.publicKey.challenge ? json.publicKey : json);

function parse(parser, json) {
  try { return parser(json); } catch (error) { throw new ConsoleError('invalid_response', { cause: error }); }
}

/** A passkey assertion for the options at `optionsPath`, verified at `verifyPath`. */
async function assertion(optionsPath, verifyPath) {
  const options = unwrap(await send('POST', '/admin/api' + optionsPath, {}));
  const credential = await ceremony('get', parse(requestOptionsFromJSON, options), options.timeout);
  const json = withoutSecrets(credentialToJSON(credential));
  try {
    return await send('POST', '/admin/api' + verifyPath, { credential: json });
  } catch (error) {
    // The server no longer knows this passkey: the passkey provider stops offering it.
    if (error.code === 'credential_not_found' || error.code === 'passkey_not_found') {
      await signal('signalUnknownCredential', { rpId: options.rpId ?? location.hostname, credentialId: json.id });
    }
    throw error;
  }
}

/** Signs in to the console with a passkey (the modal sheet, user verification required). */
export async function signIn() {
  return remember(await assertion('/session/options', '/session/verify'));
}

/** The step-up: a passkey verification of the admin, a fresh CSRF token. */
export async function stepUp() {
  if (hooks.stepUp) hooks.stepUp();
  return remember(await assertion('/step-up/options', '/step-up/verify'));
}

/** The first admin: a new account and its passkey, from the bootstrap link's token. */
export async function bootstrap(token, username, displayName) {
  const body = { token, username };
  if (displayName) body.displayName = displayName;
  const options = unwrap(await send('POST', '/admin/api/bootstrap/options', body));
  const credential = await ceremony('create', parse(creationOptionsFromJSON, options), options.timeout);
  return remember(await send('POST', '/admin/api/bootstrap/verify', { token, credential: withoutSecrets(credentialToJSON(credential)) }));
}

/** The current console session, or null (403 admin_required). */
export async function session() {
  try {
    return remember(await send('GET', '/admin/api/session'));
  } catch (error) {
    if (error.code === 'admin_required') return null;
    throw error;
  }
}

export async function signOut() {
  try { await send('DELETE', '/admin/api/session'); } finally { forget(); }
}
