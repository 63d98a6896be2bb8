'use strict'
// `dsh-session check <log>`: exit 0 if it loads as stored, 2 if only after
// repair, 3 if it is in use (a store holds its write lease: an open turn is
// being written, not a crash to repair), 1 if not at all (or, with
// --invariants, if it breaks SPEC 9).

const { resolveLog } = require('../address.js')
const { CliError, CODES } = require('../errors.js')
const { plural } = require('../format.js')
const { PROGRAM, out, outJson } = require('../output.js')
const { describeRepair, invariantResult, leaseHolder, needsRepair, readLog } = require('../read.js')

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
  const holder = leaseHolder(address, plan.header.id)
  // A session a store is writing ends in its open turn: that is no crash to repair.
  const status = !needsRepair(plan) ? 'ok' : holder !== null ? 'in-use' : 'repair'
  const exitCode = { ok: 0, repair: 2, 'in-use': 3 }[status]
  if (flags.json) {
    outJson({ address: address.text, status, exitCode, id: plan.header.id, events, preserved: plan.preserved, records: plan.records, torn: plan.torn, closers: plan.closers.length, repair, inUse: holder, invariants: flags.invariants ? 'ok' : 'not checked' })
    return exitCode
  }
  const inv = flags.invariants ? ', invariants ok' : ''
  const busy = holder === null ? '' : `, in use by ${holder}`
  if (status === 'ok') {
    out(`${address.text}: ok: loads as stored (session ${JSON.stringify(plan.header.id)}, ${plural(plan.preserved, 'event')}${inv}${busy})`)
  } else if (status === 'in-use') {
    out(`${address.text}: in use: ${holder} holds the write lease of session ${JSON.stringify(plan.header.id)}; its last turn is being written, not cut by a crash (${plural(plan.preserved, 'event')} so far${inv})`)
    out('  nothing to repair while it is in use: check again once that store has closed it')
  } else {
    out(`${address.text}: loads only after repair (session ${JSON.stringify(plan.header.id)}${inv}):`)
    for (const r of repair) out(`  ${r}`)
    out(address.stdin ? `  run ${PROGRAM} repair on the file` : `  run: ${PROGRAM} repair ${address.text}`)
  }
  return exitCode
}

module.exports = { check }
