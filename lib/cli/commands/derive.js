'use strict'
// `dsh-session derive <log>`: the derived messages (what the model sees), as JSON.

const { resolveLog } = require('../address.js')
const { out } = require('../output.js')
const { readLog, warnRepair } = require('../read.js')
const { deriveNative } = require('../core.js')

async function derive({ positionals, flags }) {
  const address = await resolveLog(positionals[0])
  const { report, plan } = await readLog(address)
  warnRepair(plan, address, flags.repaired === true)
  const native = report.session(flags.repaired === true)
  out(JSON.stringify(deriveNative(native), null, 2))
  return 0
}

module.exports = { derive }
