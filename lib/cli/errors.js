'use strict'
// Failures the command reports: one line of text on stderr, or with --json
// one JSON object `{"error":{"code","message",...}}`. The codes are stable:
// the CLI's own (below) and the package's `err.code`s passed through
// (CORRUPT_LOG, UNSUPPORTED_VERSION, SESSION_NOT_FOUND, SQLITE, IO, ...).

/** The CLI's own error codes (docs/CLI.md lists them with the package's). */
const CODES = Object.freeze({
  USAGE: 'USAGE', // unknown command or option, wrong arguments
  BAD_ADDRESS: 'BAD_ADDRESS', // an address the CLI cannot read as a log
  NO_SUCH_FILE: 'NO_SUCH_FILE', // the log, database or directory does not exist
  NOT_A_FILE: 'NOT_A_FILE', // a directory or a device where a log file was expected
  ALREADY_EXISTS: 'ALREADY_EXISTS', // convert never overwrites
  INVARIANT: 'INVARIANT', // check --invariants: a SPEC 9 violation
  OLD_LOG: 'OLD_LOG', // a log from before sessions recorded the model's provider
  IO: 'IO', // reading or writing a file failed (permission denied, disk full, ...)
  INTERNAL: 'INTERNAL', // a bug: DSH_SESSION_DEBUG=1 shows the stack
})

/** Exit statuses (docs/CLI.md): 1 a failure, 64 a usage error (sysexits' EX_USAGE); `check` adds 2 and 3. */
const EXIT = Object.freeze({ FAILURE: 1, USAGE: 64 })

/** A failure to report, with the exit status to end on and a stable code. */
class CliError extends Error {
  /**
   * @param {string} message what was wrong and where (the first line is the error; a usage text may follow)
   * @param {string} code a stable code (CODES or the package's err.code)
   * @param {Record<string, unknown>} [details] extra fields for --json (seq, line, path, ...)
   */
  constructor(message, code, details = {}) {
    super(message)
    this.code = code
    this.details = details
    this.exitCode = code === CODES.USAGE ? EXIT.USAGE : EXIT.FAILURE
  }
}

/** One line, whatever the message holds. */
function oneLine(message) {
  return String(message).replace(/\s*\n\s*/g, ' ')
}

/** A CliError for an error of the package (a store or the core): its message and code kept. */
function fromPackageError(label, error) {
  return new CliError(`${label}: ${oneLine(error?.message ?? error)}`, typeof error?.code === 'string' ? error.code : CODES.INTERNAL)
}

/** What a file-system error code means, in words. */
const SYSTEM_WORDS = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOENT: 'no such file or directory',
  ENOTDIR: 'a part of the path is not a directory',
  EISDIR: 'is a directory',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  EROFS: 'read-only file system',
  EMFILE: 'too many open files',
  ENFILE: 'too many open files in the system',
  EIO: 'input/output error',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'file name too long',
  EBUSY: 'resource busy',
}

/** What the failed system call was doing. */
const SYSCALL_WORDS = {
  open: 'cannot open',
  read: 'cannot read',
  write: 'cannot write',
  stat: 'cannot read the status of',
  lstat: 'cannot read the status of',
  fstat: 'cannot read the status of',
  scandir: 'cannot read the folder',
  opendir: 'cannot read the folder',
  mkdir: 'cannot create the folder',
  mkdtemp: 'cannot create a temporary folder',
  rename: 'cannot rename',
  unlink: 'cannot remove',
  rmdir: 'cannot remove',
  copyfile: 'cannot copy',
  fsync: 'cannot flush to disk',
}

/**
 * The failure to report for any error: a CliError as it is; a Node
 * file-system error (`EACCES`, `ENOSPC`, ... with a `syscall`) as `IO`
 * (`NO_SUCH_FILE` for `ENOENT`) with a plain message naming the path; any
 * other error is a bug (`INTERNAL`).
 */
function toCliError(error) {
  if (error instanceof CliError) return error
  const sys = error?.code
  if (typeof sys === 'string' && /^E[A-Z0-9]+$/.test(sys) && typeof error.syscall === 'string') {
    const words = SYSTEM_WORDS[sys] ?? String(error.message).replace(/^E[A-Z0-9]+: /, '').replace(/,.*$/, '')
    const doing = SYSCALL_WORDS[error.syscall] ?? `${error.syscall} failed on`
    const where = error.path === undefined ? '' : ` ${error.path}`
    const code = sys === 'ENOENT' ? CODES.NO_SUCH_FILE : CODES.IO
    return new CliError(`${doing}${where}: ${words} (${sys})`, code, error.path === undefined ? { errno: sys } : { path: error.path, errno: sys })
  }
  const failure = new CliError(oneLine(error?.message ?? error), CODES.INTERNAL)
  failure.stack = error?.stack
  return failure
}

module.exports = { CODES, EXIT, CliError, oneLine, fromPackageError, toCliError }
