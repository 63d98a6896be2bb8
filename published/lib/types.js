// The client-safe face of the published line (PUB 13.1): two values and no
// imports, so it loads without the native addon and without Node built-ins.

/**
 * Brand a string as a SessionId. The brand exists only in the types: at run
 * time this is the identity.
 * @param {string} id
 * @returns {string}
 */
export function SessionId(id) {
  return id
}

/** The session format version every header carries (PUB 13). */
export const SESSION_FORMAT_VERSION = 0
