// WebAuthn Level 3 JSON helpers, with a small fallback for browsers that lack
// PublicKeyCredential.parseCreationOptionsFromJSON / parseRequestOptionsFromJSON / toJSON().

export function base64urlToBuffer(text) {
  const base64 = text.replace(/-/g, '+').replace(/_/g, '/');
  const padded = base64 + '='.repeat((4 - (base64.length % 4)) % 4);
  const binary = atob(padded);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes.buffer;
}

export function bufferToBase64url(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

const descriptors = (list) => (list || []).map((d) => ({ ...d, id: base64urlToBuffer(d.id) }));

export function creationOptionsFromJSON(json) {
  if (typeof PublicKeyCredential.parseCreationOptionsFromJSON === 'function') {
    return PublicKeyCredential.parseCreationOptionsFromJSON(json);
  }
  return {
    ...json,
    challenge: base64urlToBuffer(json.challenge),
    user: { ...json.user, id: base64urlToBuffer(json.user.id) },
    excludeCredentials: descriptors(json.excludeCredentials),
  };
}

export function requestOptionsFromJSON(json) {
  if (typeof PublicKeyCredential.parseRequestOptionsFromJSON === 'function') {
    return PublicKeyCredential.parseRequestOptionsFromJSON(json);
  }
  return { ...json, challenge: base64urlToBuffer(json.challenge), allowCredentials: descriptors(json.allowCredentials) };
}

export function credentialToJSON(credential) {
  if (typeof credential.toJSON === 'function') {
    try { return credential.toJSON(); } catch { /* fall through to the manual encoding */ }
  }
  const response = credential.response;
  const json = {
    id: credential.id,
    rawId: bufferToBase64url(credential.rawId),
    type: credential.type,
    authenticatorAttachment: credential.authenticatorAttachment ?? null,
    clientExtensionResults: credential.getClientExtensionResults ? credential.getClientExtensionResults() : {},
    response: { clientDataJSON: bufferToBase64url(response.clientDataJSON) },
  };
  if (response.attestationObject) {
    json.response.attestationObject = bufferToBase64url(response.attestationObject);
    json.response.transports = response.getTransports ? response.getTransports() : [];
  } else {
    json.response.authenticatorData = bufferToBase64url(response.authenticatorData);
    json.response.signature = bufferToBase64url(response.signature);
    json.response.userHandle = response.userHandle ? bufferToBase64url(response.userHandle) : null;
  }
  return json;
}

/** Calls a PublicKeyCredential signal method when the browser has it; never throws. */
export async function signal(name, options) {
  try {
    if (window.PublicKeyCredential && typeof PublicKeyCredential[name] === 'function') {
      await PublicKeyCredential[name](options);
      return true;
    }
  } catch (error) {
    console.debug(`${name} failed`, error);
  }
  return false;
}
