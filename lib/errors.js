'use strict'
// The package's errors have one shape: a `SessionError` (a `TypeError` where
// the caller passed the wrong kind of value, which `instanceof SessionError`
// also recognises) whose `code` is one of the stable codes below, with `line`
// when the error is about a line of a JSONL log and `errno` when an OS error
// is behind it. The native core makes its own in one place
// (src/binding/mod.rs, `js_error`), constructing the class binding.js hands
// it at load time; JS makes its own here.

/** Codes the native core gives (src/error.rs, `Code::ALL`, in that order). */
const NATIVE_CODES = [
  'NOT_LOSSLESS_JSON', 'INVALID_EVENT', 'INVALID_HEADER', 'LEGACY_VOCABULARY', 'INVALID_SURFACE',
  'SEQ_NOT_CONTIGUOUS', 'REENTRANT_APPEND', 'INVARIANT', 'INVALID_BOUNDARY', 'OPEN_TURN', 'CORRUPT_LOG',
  'UNSUPPORTED_VERSION', 'SESSION_NOT_FOUND', 'SESSION_ALREADY_EXISTS', 'SEQ_MISMATCH', 'INVALID_ARGUMENT',
  'IO', 'SQLITE', 'STORE_CLOSED', 'SESSION_IN_USE', 'LOG_REPLACED', 'NOT_A_FILE', 'READ_ONLY',
  'LEASE_LOST', 'PG_CONNECT', 'PG', 'TOO_LARGE', 'INTERNAL',
]

/** Codes only the JS side gives: the peers of the service, the service itself, the loader. */
const JS_CODES = [
  'PEER_MISSING', 'PEER_LOAD', 'NATIVE_BINDING_MISSING', 'SESSION_NOT_LIVE',
  'SESSION_ALREADY_ATTACHED', 'SESSION_ALREADY_ANNOUNCED',
]

/** Every code an error of this package may carry (`SessionErrorCode` in index.d.ts). */
const CODES = Object.freeze([...NATIVE_CODES, ...JS_CODES])

/** Marks the `TypeError`s of this package, which cannot also inherit from `SessionError`. */
const typeErrorMark = Symbol('dsh-session-native.SessionError')

/**
 * The class of every error this package throws or rejects with (as
 * better-sqlite3's `SqliteError`). Its `name` stays `Error`, what callers
 * saw before it existed. The argument errors that are `TypeError`s are
 * not its instances by inheritance; `instanceof SessionError` still holds
 * for them (they carry a mark `fail` sets).
 */
class SessionError extends Error {
  constructor(message, code, options) {
    super(message, options)
    this.code = code
  }

  static [Symbol.hasInstance](value) {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true
    return this === SessionError && value instanceof TypeError && value[typeErrorMark] === true
  }
}
Object.defineProperty(SessionError.prototype, 'name', { value: 'Error', writable: true, configurable: true })

/**
 * An error of this package: `message`, `code`, and optionally `Type`
 * (`TypeError` for a value of the wrong kind) and `cause`.
 */
function fail(message, code, { Type = SessionError, cause } = {}) {
  const options = cause === undefined ? undefined : { cause }
  if (Type === SessionError) return new SessionError(message, code, options)
  const error = new Type(message, options)
  error.code = code
  Object.defineProperty(error, typeErrorMark, { value: true })
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

module.exports = { SessionError, CODES, NATIVE_CODES, JS_CODES, fail, callerFrames, withFrames }
