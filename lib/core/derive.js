'use strict'
// Deriving messages (SPEC 6): the one home of the event -> message rule.
//
// It runs on frozen event objects, so a message shares its event's frozen
// `content` (and `provenance`): deriving copies nothing, and callers that
// compare identities see the event's own blocks. The bulk paths (a resumed
// log, the CLI) derive through the same function after parsing the surface
// events' texts.

const { deepFreeze } = require('./json.js')

const { freeze } = Object
const isArray = Array.isArray

function isRecord(value) {
  return typeof value === 'object' && value !== null && !isArray(value)
}

/** A text block, frozen. */
function textBlock(text) {
  return freeze({ type: 'text', text })
}

/** `<tag source=KIND>`, KIND being `JSON.stringify(source.kind)` (`undefined` when there is none). */
function openTag(tag, source) {
  return `<${tag} source=${isRecord(source) ? JSON.stringify(source.kind) : undefined}>`
}

/** `<tag source=KIND>` … `</tag>` around the blocks, frozen. */
function wrap(tag, content, source) {
  const blocks = isArray(content) ? content : []
  const out = new Array(blocks.length + 2)
  out[0] = textBlock(openTag(tag, source))
  for (let i = 0; i < blocks.length; i++) out[i + 1] = blocks[i]
  out[blocks.length + 1] = textBlock(`</${tag}>`)
  return freeze(out)
}

/** A message with the given fields, leaving out the ones the payload lacks. */
function message(role, content, provenance) {
  const m = { role }
  if (content !== undefined) m.content = content
  if (provenance !== undefined) m.provenance = provenance
  return freeze(m)
}

/**
 * The message an event produces, or null (SPEC 6). `event` must be frozen
 * (an event the session handed out, or a parsed one): the message shares its
 * values. Callers with a mutable event use `deriveDetached`.
 */
function deriveFrozen(event) {
  const data = event.data
  if (!isRecord(data)) return null
  switch (event.type) {
    case 'user/message':
      return message('user', data.content)
    case 'assistant/message':
      if (isArray(data.content) && data.content.length === 0) return null
      return message('assistant', data.content, data.provenance)
    case 'tool/result': {
      const block = { type: 'tool-result' }
      if (data.callId !== undefined) block.toolCallId = data.callId
      if (data.content !== undefined) block.content = data.content
      if (data.isError !== undefined) block.isError = data.isError
      return message('user', freeze([freeze(block)]))
    }
    case 'context/message':
      if (data.envelope === 'raw') return message('user', data.content)
      return message('user', wrap('context', data.content, data.source))
    case 'steering/message':
      return message('user', wrap('steering', data.content, data.source))
    default:
      return null
  }
}

/**
 * `deriveEventMessage(event)` for any event: a frozen event is derived in
 * place (the message shares its values); a mutable one is copied first, so
 * the message never aliases what the caller may change.
 */
function deriveEventMessage(event) {
  if (event === null || typeof event !== 'object') return null
  if (Object.isFrozen(event) && (typeof event.data !== 'object' || event.data === null || Object.isFrozen(event.data))) {
    return deriveFrozen(event)
  }
  let copy
  try {
    copy = JSON.parse(JSON.stringify({ type: event.type, data: event.data }))
  } catch {
    return null
  }
  if (copy === undefined || copy === null) return null
  return deriveFrozen(deepFreeze(copy))
}

/** `renderContextContent(content, source, envelope?)`: the blocks of a context message. */
function renderContextContent(content, source, envelope) {
  const blocks = isArray(content) ? JSON.parse(JSON.stringify(content)) : []
  if (envelope === 'raw') return blocks
  return [{ type: 'text', text: openTag('context', source) }, ...blocks, { type: 'text', text: '</context>' }]
}

module.exports = { deriveFrozen, deriveEventMessage, renderContextContent }
