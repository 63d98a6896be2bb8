'use strict'
// Where the command writes: results on stdout, warnings and the error on
// stderr. With --json every stderr record is one JSON line
// (`{"warning":{...}}`, `{"error":{...}}`), so a script can read both streams.

const { oneLine } = require('./errors.js')

const PROGRAM = 'dsh-session'
const state = { json: false }

/** Set by the entry once the arguments are parsed (and before, for --json anywhere). */
function useJson(json) {
  state.json = json === true
}

function out(text) {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`)
}

function outJson(value) {
  out(JSON.stringify(value, null, 2))
}

/** A warning on stderr: `dsh-session: warning: <message>` or `{"warning":{code,message,...}}`. */
function warn(code, message, details = {}) {
  if (state.json) process.stderr.write(`${JSON.stringify({ warning: { code, message: oneLine(message), ...details } })}\n`)
  else process.stderr.write(`${PROGRAM}: warning: ${oneLine(message)}\n`)
}

/** The error that ends the command, on stderr (a CliError: see toCliError). */
function reportError(failure) {
  const lines = String(failure.message).split('\n')
  if (state.json) {
    process.stderr.write(`${JSON.stringify({ error: { code: failure.code, message: oneLine(lines[0]), ...failure.details } })}\n`)
  } else {
    // The first line is the error; a usage text may follow it.
    process.stderr.write(`${PROGRAM}: ${oneLine(lines[0])}\n`)
    if (lines.length > 1) process.stderr.write(`${lines.slice(1).join('\n')}\n`)
  }
  if (process.env.DSH_SESSION_DEBUG && failure?.stack) process.stderr.write(`${failure.stack}\n`)
}

module.exports = { PROGRAM, useJson, out, outJson, warn, reportError, state }
