'use strict'
// How many events a fork takes: the JS side of the native fork rule
// (`log::fork_end`, the rule's and its messages' one home), for both lines.
// It reads what the rule may read and hands it over.

const binding = require('../../binding.js')

/**
 * How many events a fork of session `id` of `length` events takes at
 * `boundary`, or the rule's error: the last event's seq, and the boundary
 * event's seq and type when the boundary is an index of one (`seqAt(i)`,
 * `typeAt(i)` read event i); `service`: the Cordis service's wording
 * (SPEC 12.6). `openTurnAt(i)`, given for the published line (PUB 12.5):
 * the turn that events `0..=i` end inside, or null.
 */
function forkEnd(id, boundary, length, seqAt, typeAt, service, openTurnAt) {
  const number = (v) => (typeof v === 'number' ? v : NaN)
  const last = length === 0 ? undefined : seqAt(length - 1)
  const b = boundary === undefined ? last : boundary
  const at = Number.isSafeInteger(b) && b >= 0 && b < length ? b : -1
  const atSeq = at < 0 ? NaN : number(seqAt(at))
  const given = boundary === undefined ? null : number(boundary)
  const shown = [given, String(boundary), length, number(last), String(last), atSeq]
  if (openTurnAt !== undefined) {
    return binding.forkEnd(id, ...shown, null, service, 'published', at < 0 ? null : openTurnAt(at))
  }
  const atType = at < 0 ? 'turn/end' : typeAt(at)
  return binding.forkEnd(id, ...shown, atType === 'turn/end' ? null : String(atType), service)
}

module.exports = { forkEnd }
