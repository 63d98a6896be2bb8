'use strict'
// `dsh-session surface <log>`: the surface nodes and the replacement history
// (the core's fold: `foldSurface`).

const { resolveLog } = require('../address.js')
const { contentChars, firstText } = require('../content.js')
const { api } = require('../core.js')
const { formatInt, plural, preview, ranges, table } = require('../format.js')
const { out, outJson } = require('../output.js')
const { eventChunks, readLog, warnRepair } = require('../read.js')

async function surface({ positionals, flags }) {
  const address = await resolveLog(positionals[0])
  const { report, plan } = await readLog(address)
  warnRepair(plan, address, flags.repaired === true)
  const native = report.session(flags.repaired === true)
  const total = native.length
  const rows = new Array(total)
  const info = new Map()
  const nodes = new Set(native.surfaceNodes())
  const touched = new Set()
  for (const [from, events] of eventChunks(native)) {
    for (let k = 0; k < events.length; k++) {
      const e = events[k]
      const row = { type: e.type, seq: e.seq }
      if (api.isSurfaceEligibleType(e.type)) {
        if (e.surfaceOp !== undefined) row.surfaceOp = e.surfaceOp
        if (e.sourceEventSeqs !== undefined) row.sourceEventSeqs = e.sourceEventSeqs
        if (e.surfaceOp !== undefined) {
          touched.add(from + k)
          info.set(from + k, { type: e.type, chars: contentChars(e.data?.content), text: firstText(e.data?.content) })
        }
      }
      rows[from + k] = row
    }
  }
  const fold = api.foldSurface(rows)
  if (flags.json) {
    outJson({ nodes: fold.nodes, replaceGeneration: fold.replacements.length, replacements: fold.replacements })
    return 0
  }
  const lines = []
  lines.push(`${address.text}: ${plural(fold.nodes.length, 'surface node')}, ${plural(fold.replacements.length, 'replacement')} (${plural(touched.size - nodes.size, 'shadowed event')} stay in the log)`)
  lines.push('')
  lines.push('replacements')
  if (fold.replacements.length === 0) lines.push('  none')
  for (const r of fold.replacements) {
    const i = info.get(r.seq) ?? { type: '?', chars: 0, text: '' }
    const shadowedChars = r.shadowedSeqs.reduce((n, s) => n + (info.get(s)?.chars ?? 0), 0)
    lines.push(`  seq ${r.seq} ${i.type} replaced ${r.start}..${r.end}: ${plural(r.shadowedSeqs.length, 'node')}, ${formatInt(shadowedChars)} → ${formatInt(i.chars)} chars`)
    lines.push(`    shadowed ${ranges([...r.shadowedSeqs].sort((x, y) => x - y), 20)}`)
    if (i.text !== '') lines.push(`    "${preview(i.text, 70)}"`)
  }
  lines.push('')
  lines.push('nodes')
  const table_ = [['#', 'seq', 'type', 'chars', 'text']]
  fold.nodes.forEach((seq, index) => {
    const i = info.get(seq) ?? { type: '?', chars: 0, text: '' }
    table_.push([String(index), String(seq), i.type, formatInt(i.chars), preview(i.text)])
  })
  lines.push(table(table_, ['r', 'r', 'l', 'r', 'l']))
  out(lines.join('\n'))
  return 0
}

module.exports = { surface }
