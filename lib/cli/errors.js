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
  IO: 'IO', // reading or writing a file failed
  INTERNAL: 'INTERNAL', // a bug: DSH_SESSION_DEBUG=1 shows the stack
})

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
    this.exitCode = 1
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

module.exports = { CODES, CliError, oneLine, fromPackageError }
