'use strict'
// A progress bar on stderr, drawn only on a terminal and for long logs.

const { formatInt } = require('./format.js')

/** Logs at least this long show a progress bar (when stderr is a terminal). */
const PROGRESS_MIN_EVENTS = 20000

function progress(label, total) {
  const enabled = process.stderr.isTTY === true && total >= PROGRESS_MIN_EVENTS
  let last = 0
  return {
    update(done) {
      if (!enabled) return
      const now = Date.now()
      if (now - last < 80 && done < total) return
      last = now
      const width = 30
      const filled = Math.round((done / total) * width)
      const pct = Math.floor((done / total) * 100)
      process.stderr.write(`\r${label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(pct).padStart(3)}% ${formatInt(done)}/${formatInt(total)}`)
    },
    done() {
      if (enabled) process.stderr.write('\r\x1b[K')
    },
  }
}

module.exports = { progress }
