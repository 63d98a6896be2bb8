'use strict'
// The dsh-session command: parse the arguments, run one command, report its
// failure (one line, or JSON with --json) and end with its exit status.

const { parseArgs } = require('./args.js')
const { toCliError } = require('./errors.js')
const { out, reportError, useJson } = require('./output.js')

/** Each command's module, loaded when it runs (a --help loads none, nor the addon). */
const RUN = {
  inspect: () => require('./commands/inspect.js').inspect,
  check: () => require('./commands/check.js').check,
  derive: () => require('./commands/derive.js').derive,
  surface: () => require('./commands/surface.js').surface,
  repair: () => require('./commands/repair.js').repair,
  convert: () => require('./commands/convert.js').convert,
  list: () => require('./commands/list.js').list,
}

/** Run the command line `argv`; resolves to the exit status. */
async function main(argv) {
  // --json anywhere asks for JSON errors, even about the arguments themselves.
  useJson(argv.includes('--json'))
  const parsed = parseArgs(argv)
  if (parsed.help !== undefined) {
    out(parsed.help)
    return 0
  }
  if (parsed.version) {
    out(require('../../package.json').version)
    return 0
  }
  useJson(parsed.flags.json === true)
  return RUN[parsed.command]()(parsed)
}

/** The process around `main`: exit status, errors, a closed stdout pipe. */
function run(argv) {
  process.stdout.on('error', (error) => {
    // A closed pipe (`| head`) ends the output, not the program with a trace.
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
    throw error
  })
  const fatal = (error) => {
    const failure = toCliError(error)
    reportError(failure)
    process.exit(failure.exitCode)
  }
  process.on('uncaughtException', fatal)
  process.on('unhandledRejection', fatal)
  main(argv).then(
    (code) => {
      process.exitCode = code
    },
    (error) => {
      const failure = toCliError(error)
      reportError(failure)
      process.exitCode = failure.exitCode
    },
  )
}

module.exports = { main, run }
