'use strict'
// The package's errors have one shape: an `Error` (a `TypeError` where the
// caller passed the wrong kind of value) whose `code` is one of the stable
// codes below, with `line` when the error is about a line of a JSONL log and
// `errno` when an OS error is behind it. The native core makes its own in
// one place (src/binding/mod.rs, `js_error`); JS makes its own here.

/** Codes the native core gives (src/error.rs, `Code::ALL`, in that order). */
const NATIVE_CODES = [
  'NOT_LOSSLESS_JSON', 'INVALID_EVENT', 'INVALID_HEADER', 'LEGACY_VOCABULARY', 'INVALID_SURFACE',
  'SEQ_NOT_CONTIGUOUS', 'REENTRANT_APPEND', 'INVARIANT', 'INVALID_BOUNDARY', 'CORRUPT_LOG',
  'UNSUPPORTED_VERSION', 'SESSION_NOT_FOUND', 'SESSION_ALREADY_EXISTS', 'SEQ_MISMATCH', 'INVALID_ARGUMENT',
  'IO', 'SQLITE', 'STORE_CLOSED', 'SESSION_IN_USE', 'LOG_REPLACED', 'NOT_A_FILE', 'READ_ONLY',
  'LEASE_LOST', 'PG_CONNECT', 'PG', 'TOO_LARGE', 'INTERNAL',
]

/** Codes only the JS side gives: the peers of the service, the service itself, the loader. */
const JS_CODES = [
  'PEER_MISSING', 'PEER_LOAD', 'NATIVE_BINDING_MISSING', 'OPEN_TURN', 'SESSION_NOT_LIVE',
  'SESSION_ALREADY_ATTACHED', 'SESSION_ALREADY_ANNOUNCED',
]

/** Every code an error of this package may carry (`SessionErrorCode` in index.d.ts). */
const CODES = Object.freeze([...NATIVE_CODES, ...JS_CODES])

/**
 * An error of this package: `message`, `code`, and optionally `Type`
 * (`TypeError` for a value of the wrong kind) and `cause`.
 */
function fail(message, code, { Type = Error, cause } = {}) {
  const error = new Type(message, cause === undefined ? undefined : { cause })
  error.code = code
  return error
}

/**
 * Where the caller of `fn` is (captured when an asynchronous operation
 * starts, formatted only if it fails), for the stack of the error it may
 * reject with: an error made off the JS thread has no frames of its own.
 */
function callerFrames(fn) {
  const site = {}
  Error.captureStackTrace(site, fn)
  return site
}

/** `error` with the frames of `site` (from `callerFrames`) as its stack's frames. */
function withFrames(error, site) {
  if (error instanceof Error) {
    const stack = String(site.stack)
    const frames = stack.slice(stack.indexOf('\n') + 1)
    if (frames.length > 0) error.stack = `${error.name}: ${error.message}\n${frames}`
  }
  return error
}

module.exports = { CODES, NATIVE_CODES, JS_CODES, fail, callerFrames, withFrames }
