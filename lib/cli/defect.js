'use strict'
// A log's defect told in the CLI's words, whichever reader found it (the
// store's load, `Session.fromJsonl`): one numbering, the file's lines (the
// header is line 1) with the seq of the event the line holds or should hold
// (a SQLite session: its row in seq order, with the seq); and plain words
// for logs written before sessions recorded the model's provider, instead
// of the API's "corrupt"/"seed request/header at index N".
//
// The package's messages keep their own wording (the store's is the
// reference's, word for word: `line N` counts event lines after the
// header, `row N` event rows; `fromJsonl` counts file lines); this is the
// one place that turns them into the CLI's.

/** The CLI's code for a log from before provider routing. */
const OLD_LOG = 'OLD_LOG'

/** Where the event of seq `seq` is: `line N` (JSONL: header line 1) or `row N` (SQLite, in seq order). */
function place(kind, seq) {
  return kind === 'jsonl' ? { text: `line ${seq + 2}`, line: seq + 2 } : { text: `row ${seq + 1}`, row: seq + 1 }
}

/**
 * `{ code, message, line?, row?, seq? }`: the package error `{ code, message }`
 * of a log of `kind` ('jsonl', 'sqlite' or 'postgres') in the CLI's words.
 * `numbering`: how the message counts lines: 'events' (the store's load:
 * header line 0) or 'file' (`fromJsonl`: header line 1).
 */
function plainDefect({ code, message }, kind, numbering = 'events') {
  // An old log: a request/header without provider/model, an assistant/message without provenance.
  const old = /(request\/header|assistant\/message) at index (\d+) lacks provider\/model/.exec(message)
  if (old !== null) {
    const seq = Number(old[2])
    const at = place(kind, seq)
    const what = old[1] === 'request/header' ? 'its request/header' : 'its assistant/message'
    const names = old[1] === 'request/header' ? 'names no provider/model' : 'names no provider/model that produced it'
    return {
      code: OLD_LOG,
      message: `an old log, written before sessions recorded the model's provider: ${what} at ${at.text} (seq ${seq}) ${names}; this version reads only logs that do (nothing in the file is damaged)`,
      ...withoutText(at),
      seq,
    }
  }
  let text = message
    // The seed wording of the API: the rule is the same for a stored log.
    .replace(/: invalid seed event at index \d+: /, ': ')
    .replace(/\bseed (event|request\/header|assistant\/message) at index \d+ /, '$1 ')
  let where = {}
  // `line N` / `row N`, and a seq gap's `(expected E, got G)`.
  text = text.replace(/ at (line|row) (\d+)( \(expected (\d+), got ([^)]*)\))?/, (_m, unit, n, gap, expected, got) => {
    const index = Number(n) - (unit === 'line' && numbering === 'file' ? 2 : 1)
    const at = unit === 'line' ? place('jsonl', index) : place('sqlite', index)
    where = { ...withoutText(at), seq: gap === undefined ? index : Number(expected) }
    return gap === undefined ? ` at ${at.text} (seq ${index})` : ` at ${at.text} (expected seq ${expected}, got ${got})`
  })
  if (where.seq === undefined) {
    // A rule broken by one event names its seq: add where it is.
    text = text.replace(/ at seq (\d+)/, (_m, s) => {
      const seq = Number(s)
      if (kind === 'postgres') {
        where = { seq }
        return ` at seq ${seq}`
      }
      const at = place(kind, seq)
      where = { ...withoutText(at), seq }
      return ` at ${at.text} (seq ${seq})`
    })
  }
  return { code, message: text, ...where }
}

function withoutText({ text: _text, ...rest }) {
  return rest
}

module.exports = { OLD_LOG, plainDefect }
