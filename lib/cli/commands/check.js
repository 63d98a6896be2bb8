'use strict'
// `dsh-session check <log>`: exit 0 if it loads as stored, 2 if only after
// repair, 1 if not at all (or, with --invariants, if it breaks SPEC 9).

const { resolveLog } = require('../address.js')
const { CliError, CODES } = require('../errors.js')
const { plural } = require('../format.js')
const { PROGRAM, out, outJson } = require('../output.js')
const { describeRepair, invariantResult, needsRepair, readLog } = require('../read.js')

async function check({ positionals, flags }) {
  const address = await resolveLog(positionals[0])
  let result
  try {
    const { report, plan } = await readLog(address)
    const repair = describeRepair(plan, address)
    const violation = flags.invariants ? invariantResult(report, true) : null
    result = { report, plan, repair, violation }
  } catch (error) {
    // --json: the verdict on stdout as for every status, and the error on stderr.
    if (error instanceof CliError && flags.json) {
      outJson({ address: address.text, status: 'error', exitCode: 1, code: error.code ?? null, message: error.message })
    }
    throw error
  }
  const { plan, repair, violation } = result
  const events = plan.preserved + plan.closers.length
  if (violation !== null) {
    const failure = new CliError(`${address.text}: ${violation.message} (at seq ${violation.seq})`, CODES.INVARIANT, { address: address.text, seq: violation.seq })
    if (flags.json) outJson({ address: address.text, status: 'invariant', exitCode: 1, code: CODES.INVARIANT, message: violation.message, seq: violation.seq })
    throw failure
  }
  const status = needsRepair(plan) ? 'repair' : 'ok'
  const exitCode = status === 'ok' ? 0 : 2
  if (flags.json) {
    outJson({ address: address.text, status, exitCode, id: plan.header.id, events, preserved: plan.preserved, records: plan.records, torn: plan.torn, closers: plan.closers.length, repair, invariants: flags.invariants ? 'ok' : 'not checked' })
    return exitCode
  }
  const inv = flags.invariants ? ', invariants ok' : ''
  if (status === 'ok') {
    out(`${address.text}: ok: loads as stored (session ${JSON.stringify(plan.header.id)}, ${plural(plan.preserved, 'event')}${inv})`)
  } else {
    out(`${address.text}: loads only after repair (session ${JSON.stringify(plan.header.id)}${inv}):`)
    for (const r of repair) out(`  ${r}`)
    out(address.stdin ? `  run ${PROGRAM} repair on the file` : `  run: ${PROGRAM} repair ${address.text}`)
  }
  return exitCode
}

module.exports = { check }
